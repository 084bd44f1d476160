package budget

import (
	"testing"
	"time"

	"herd"
)

func TestDecide(t *testing.T) {
	for _, tc := range []struct {
		name          string
		spent, budget float64
		hard          bool
		act           herd.Activity
		want          Action
	}{
		{"no budget", 1000, 0, false, herd.ActivityIdle, None},
		{"no budget, hard", 1000, 0, true, herd.ActivityWorking, None},
		{"under the budget", 4.99, 5, false, herd.ActivityIdle, None},
		{"under the budget, hard", 4.99, 5, true, herd.ActivityWorking, None},
		{"reached, idle", 5, 5, false, herd.ActivityIdle, Stop},
		{"over, idle", 7, 5, false, herd.ActivityIdle, Stop},
		{"over, blocked (turn ended)", 7, 5, false, herd.ActivityBlocked, Stop},
		{"over, working: wait for its idle", 7, 5, false, herd.ActivityWorking, Wait},
		{"over, waiting for a person: wait", 7, 5, false, herd.ActivityWaiting, Wait},
		{"over, unknown is not idle", 7, 5, false, herd.ActivityUnknown, Wait},
		{"over, no activity yet", 7, 5, false, "", Wait},
		{"over, working, hard", 7, 5, true, herd.ActivityWorking, Stop},
		{"over, waiting, hard", 7, 5, true, herd.ActivityWaiting, Stop},
	} {
		if got := Decide(tc.spent, tc.budget, tc.hard, tc.act); got != tc.want {
			t.Errorf("[%s] expected %s, got %s", tc.name, tc.want, got)
		}
	}
}

func TestDays(t *testing.T) {
	loc := time.FixedZone("X", 5*3600)
	for _, tc := range []struct {
		now, start, next time.Time
	}{
		{time.Date(2026, 3, 1, 13, 5, 0, 0, loc), time.Date(2026, 3, 1, 0, 0, 0, 0, loc), time.Date(2026, 3, 2, 0, 0, 0, 0, loc)},
		{time.Date(2026, 3, 1, 0, 0, 0, 0, loc), time.Date(2026, 3, 1, 0, 0, 0, 0, loc), time.Date(2026, 3, 2, 0, 0, 0, 0, loc)},
		{time.Date(2026, 12, 31, 23, 59, 59, 0, loc), time.Date(2026, 12, 31, 0, 0, 0, 0, loc), time.Date(2027, 1, 1, 0, 0, 0, 0, loc)},
	} {
		if got := DayStart(tc.now); !got.Equal(tc.start) {
			t.Errorf("[%s] expected the day to start %s, got %s", tc.now, tc.start, got)
		}
		if got := NextDay(tc.now); !got.Equal(tc.next) {
			t.Errorf("[%s] expected the next day %s, got %s", tc.now, tc.next, got)
		}
	}
}
