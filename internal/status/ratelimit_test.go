package status

import (
	"context"
	"testing"
	"time"

	"herd"
)

// TestDeathOnRateLimitIsNoCrash: an agent that ends blocked on a rate
// limit of its own with a named reset relaunches at the reset with its
// restart count untouched and no crashed event; one blocked by another
// session's limit on its account, or with the reset past, crashes as
// ever.
func TestDeathOnRateLimitIsNoCrash(t *testing.T) {
	for _, tc := range []struct {
		name    string
		source  string
		resetIn time.Duration
		crash   bool
	}{
		{"own limit, reset ahead", "hook", time.Hour, false},
		{"own limit from the stream", "output", time.Hour, false},
		{"the account's limit", "account", time.Hour, true},
		{"reset past", "hook", -time.Minute, true},
	} {
		m := newManager(t)
		ctx := context.Background()
		reset := time.Now().Add(tc.resetIn).UTC().Truncate(time.Second)
		if _, err := m.Activity(ctx, Seen{Session: "w-0", Incarnation: "inc-1", Activity: herd.ActivityBlocked, Source: tc.source,
			Reason: reasonRateLimited, Data: map[string]any{"reset_at": reset.Format(time.RFC3339)}}); err != nil {
			t.Fatal(err)
		}
		code := 1
		if _, err := m.RecordDeath(ctx, Death{Session: "w-0", Incarnation: "inc-1", Exit: herd.Exit{Reason: herd.ReasonExitCode, Code: &code}}); err != nil {
			t.Fatal(err)
		}
		s, err := m.Session(ctx, "w-0")
		if err != nil {
			t.Fatal(err)
		}
		crashed := len(events(t, m, herd.EventCrashed))
		if !tc.crash {
			if s.State != herd.StateBackoff || s.Restarts != 0 || s.BackoffUntil == nil || !s.BackoffUntil.Equal(reset) || s.LastCrashAt != nil || crashed != 0 {
				t.Errorf("[%s] expected a wait for the reset %s with no crash counted, got %s restarts %d until %v crashed events %d",
					tc.name, reset, s.State, s.Restarts, s.BackoffUntil, crashed)
			}
			if b := events(t, m, herd.EventBackoff); len(b) != 1 || b[0].Reason != reasonRateLimited {
				t.Errorf("[%s] expected one backoff event with reason rate_limited, got %+v", tc.name, b)
			}
			continue
		}
		if s.Restarts != 1 || crashed != 1 {
			t.Errorf("[%s] expected a crash counted, got restarts %d crashed events %d", tc.name, s.Restarts, crashed)
		}
	}
}

// witnessSaw is a watchdog that saw the given summary.
type witnessSaw map[string]any

func (w witnessSaw) Summary(string) map[string]any { return w }

// TestDeathOnRateLimitSeenAtDeath: a run too short for the watchdog to
// record its blocked turn before it ended is judged by what the watchdog
// read at its death.
func TestDeathOnRateLimitSeenAtDeath(t *testing.T) {
	for _, tc := range []struct {
		name  string
		seen  map[string]any
		crash bool
	}{
		{"rate limit with a reset", map[string]any{"activity": herd.ActivityBlocked, "error": "API Error: 429 rate limit exceeded. Please try again in 60 seconds."}, false},
		{"rate limit, no reset named", map[string]any{"activity": herd.ActivityBlocked, "error": "API Error: 429 rate limit exceeded."}, true},
		{"another error", map[string]any{"activity": herd.ActivityBlocked, "error": "API Error: 529 overloaded. Try again in 60 seconds."}, true},
		{"not blocked", map[string]any{"activity": herd.ActivityWorking, "error": "rate limit; try again in 60 seconds"}, true},
	} {
		m := newManager(t)
		m.SetWitness(witnessSaw(tc.seen))
		ctx := context.Background()
		code := 1
		before := time.Now()
		if _, err := m.RecordDeath(ctx, Death{Session: "w-0", Incarnation: "inc-1", Exit: herd.Exit{Reason: herd.ReasonExitCode, Code: &code}}); err != nil {
			t.Fatal(err)
		}
		s, err := m.Session(ctx, "w-0")
		if err != nil {
			t.Fatal(err)
		}
		if tc.crash {
			if s.Restarts != 1 {
				t.Errorf("[%s] expected a crash counted, got restarts %d", tc.name, s.Restarts)
			}
			continue
		}
		if s.Restarts != 0 || s.BackoffUntil == nil || s.BackoffUntil.Before(before.Add(59*time.Second)) || s.BackoffUntil.After(time.Now().Add(61*time.Second)) {
			t.Errorf("[%s] expected a wait of 60 s with no crash counted, got restarts %d until %v", tc.name, s.Restarts, s.BackoffUntil)
		}
	}
}
