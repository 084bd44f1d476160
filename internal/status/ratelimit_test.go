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
