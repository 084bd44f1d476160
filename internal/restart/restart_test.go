package restart

import (
	"testing"
	"time"

	"herd"
)

var defaults = herd.RestartPolicy{
	Policy:         herd.PolicyAlways,
	InitialBackoff: 10 * time.Second,
	MaxBackoff:     5 * time.Minute,
	ResetAfter:     10 * time.Minute,
	MaxRestarts:    5,
}

func TestBackoffSequence(t *testing.T) {
	want := []time.Duration{10, 20, 40, 80, 160, 300, 300, 300}
	for i, w := range want {
		if got := Backoff(defaults, i+1); got != w*time.Second {
			t.Errorf("[relaunch %d] expected %v, got %v", i+1, w*time.Second, got)
		}
	}
	// No overflow on huge streaks.
	if got := Backoff(defaults, 500); got != 5*time.Minute {
		t.Errorf("[relaunch 500] expected 5m, got %v", got)
	}
}

func TestDecide(t *testing.T) {
	with := func(f func(*herd.RestartPolicy)) herd.RestartPolicy { p := defaults; f(&p); return p }
	never := with(func(p *herd.RestartPolicy) { p.Policy = herd.PolicyNever })
	onFailure := with(func(p *herd.RestartPolicy) { p.Policy = herd.PolicyOnFailure })
	unlimited := with(func(p *herd.RestartPolicy) { p.MaxRestarts = 0 })
	short := 2 * time.Second

	cases := []struct {
		name string
		p    herd.RestartPolicy
		t    Tracker
		e    Ending
		want Outcome
	}{
		{"first crash", defaults, Tracker{0}, Ending{RanFor: short}, Outcome{Relaunch, 10 * time.Second, 1, ReasonBackoff}},
		{"third crash", defaults, Tracker{2}, Ending{RanFor: short}, Outcome{Relaunch, 40 * time.Second, 3, ReasonBackoff}},
		{"last allowed relaunch", defaults, Tracker{4}, Ending{RanFor: short}, Outcome{Relaunch, 160 * time.Second, 5, ReasonBackoff}},
		{"budget spent", defaults, Tracker{5}, Ending{RanFor: short}, Outcome{Fail, 0, 5, ReasonBudgetSpent}},
		{"stable run resets the streak", defaults, Tracker{5}, Ending{RanFor: 10 * time.Minute}, Outcome{Relaunch, 10 * time.Second, 1, ReasonBackoff}},
		{"just short of reset", defaults, Tracker{5}, Ending{RanFor: 10*time.Minute - time.Millisecond}, Outcome{Fail, 0, 5, ReasonBudgetSpent}},
		{"always restarts a clean exit", defaults, Tracker{0}, Ending{Success: true, RanFor: short}, Outcome{Relaunch, 10 * time.Second, 1, ReasonBackoff}},
		{"never, crash", never, Tracker{0}, Ending{RanFor: short}, Outcome{Fail, 0, 0, ReasonPolicyNever}},
		{"never, clean", never, Tracker{0}, Ending{Success: true}, Outcome{Succeed, 0, 0, ReasonExitedCleanly}},
		{"on-failure, clean", onFailure, Tracker{3}, Ending{Success: true, RanFor: short}, Outcome{Succeed, 0, 3, ReasonExitedCleanly}},
		{"on-failure, crash", onFailure, Tracker{1}, Ending{RanFor: short}, Outcome{Relaunch, 20 * time.Second, 2, ReasonBackoff}},
		{"unlimited", unlimited, Tracker{1000}, Ending{RanFor: short}, Outcome{Relaunch, 5 * time.Minute, 1001, ReasonBackoff}},
	}
	for _, c := range cases {
		if got := Decide(c.p, c.t, c.e); got != c.want {
			t.Errorf("[%s] expected %+v, got %+v", c.name, c.want, got)
		}
	}
}

// TestSaturation plays a crash loop to the end: N relaunches, then failed.
func TestSaturation(t *testing.T) {
	tr := Tracker{}
	launches := 1
	for {
		o := Decide(defaults, tr, Ending{RanFor: time.Second})
		if o.Decision == Fail {
			break
		}
		if o.Decision != Relaunch {
			t.Fatalf("expected relaunch or fail, got %v", o.Decision)
		}
		tr.Restarts = o.Restarts
		launches++
		if launches > 100 {
			t.Fatal("never failed")
		}
	}
	if launches != defaults.MaxRestarts+1 {
		t.Errorf("expected %d launches in all, got %d", defaults.MaxRestarts+1, launches)
	}
}
