package restart

import (
	"testing"
	"testing/synctest"
	"time"

	"herd"
)

// TestCrashLoopTimeline plays a slot on a fake clock: an agent that dies
// 1s after each launch is relaunched after 10s, 20s, 40s... and fails at
// max_restarts; after a person re-arms it, a run of reset_after resets the
// streak so the next crash backs off from the start again.
func TestCrashLoopTimeline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := herd.RestartPolicy{Policy: herd.PolicyAlways, InitialBackoff: 10 * time.Second, MaxBackoff: 5 * time.Minute, ResetAfter: 10 * time.Minute, MaxRestarts: 5}
		start := time.Now()
		var tr Tracker
		var launches []time.Duration
		run := func(d time.Duration) Outcome {
			launches = append(launches, time.Since(start))
			time.Sleep(d) // the agent runs, then crashes
			o := Decide(p, tr, Ending{RanFor: d})
			tr.Restarts = o.Restarts
			if o.Decision == Relaunch {
				time.Sleep(o.Delay) // backoff
			}
			return o
		}
		var o Outcome
		for o = run(time.Second); o.Decision == Relaunch; o = run(time.Second) {
		}
		if o.Decision != Fail || len(launches) != 6 {
			t.Fatalf("expected failed after 6 launches, got %v after %d", o.Decision, len(launches))
		}
		// Launch k starts after k-1 runs of 1s and backoffs 10, 20, 40, 80, 160s.
		want := []time.Duration{0, 11, 32, 73, 154, 315}
		for i, w := range want {
			if launches[i] != w*time.Second {
				t.Errorf("[launch %d] expected at %v, got %v", i+1, w*time.Second, launches[i])
			}
		}

		// A person re-arms the slot (the daemon resets the count), and it
		// then runs stably for reset_after before crashing again.
		tr = Tracker{Restarts: 3} // streak left over from before
		o = run(10 * time.Minute)
		if o.Decision != Relaunch || o.Restarts != 1 || o.Delay != 10*time.Second {
			t.Errorf("expected a stable run to reset the streak: relaunch 1 after 10s, got %+v", o)
		}
	})
}
