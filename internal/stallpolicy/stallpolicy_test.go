package stallpolicy

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"herd"
	"herd/internal/diag"
)

var cfg = Config{StallAfter: 5 * time.Minute, StallRepeat: 3 * time.Minute, LivenessTimeout: 10 * time.Minute}

func TestClassify(t *testing.T) {
	t0 := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	killCfg := cfg
	killCfg.AutoKill = true
	cases := []struct {
		name string
		cfg  Config
		in   Input
		now  time.Time
		want Verdict
	}{
		{"running, recent output", cfg,
			Input{State: herd.StateRunning, Activity: herd.ActivityWorking, LastActivity: t0}, at(time.Minute),
			Verdict{Silence: time.Minute, Threshold: 5 * time.Minute}},
		{"running, silent just under the threshold", cfg,
			Input{State: herd.StateRunning, Activity: herd.ActivityUnknown, LastActivity: t0}, at(5*time.Minute - time.Second),
			Verdict{Silence: 5*time.Minute - time.Second, Threshold: 5 * time.Minute, Sample: true}},
		{"running, near the threshold but sampled since the last activity", cfg,
			Input{State: herd.StateRunning, LastActivity: t0, LastSampleAt: at(4 * time.Minute)}, at(4*time.Minute + time.Second),
			Verdict{Silence: 4*time.Minute + time.Second, Threshold: 5 * time.Minute}},
		{"running, silent for stall_after", cfg,
			Input{State: herd.StateRunning, Activity: herd.ActivityWorking, LastActivity: t0}, at(5 * time.Minute),
			Verdict{Action: Stall, Silence: 5 * time.Minute, Threshold: 5 * time.Minute}},
		{"in a tool the threshold is longer", cfg,
			Input{State: herd.StateRunning, Activity: herd.ActivityWorking, InTool: true, LastActivity: t0}, at(6 * time.Minute),
			Verdict{Silence: 6 * time.Minute, Threshold: 15 * time.Minute}},
		{"in a tool past the longer threshold", cfg,
			Input{State: herd.StateRunning, Activity: herd.ActivityWorking, InTool: true, LastActivity: t0}, at(15 * time.Minute),
			Verdict{Action: Stall, Silence: 15 * time.Minute, Threshold: 15 * time.Minute}},
		{"waiting for input is never a stall", cfg,
			Input{State: herd.StateRunning, Activity: herd.ActivityWaiting, LastActivity: t0}, at(time.Hour),
			Verdict{Silence: time.Hour, Threshold: 5 * time.Minute}},
		{"idle after a finished turn is never a stall", cfg,
			Input{State: herd.StateRunning, Activity: herd.ActivityIdle, LastActivity: t0}, at(time.Hour),
			Verdict{Silence: time.Hour, Threshold: 5 * time.Minute}},
		{"blocked by a rate limit is never a stall", cfg,
			Input{State: herd.StateRunning, Activity: herd.ActivityBlocked, LastActivity: t0}, at(time.Hour),
			Verdict{Silence: time.Hour, Threshold: 5 * time.Minute}},
		{"no hooks (activity unknown) can stall", cfg,
			Input{State: herd.StateRunning, Activity: herd.ActivityUnknown, LastActivity: t0}, at(time.Hour),
			Verdict{Action: Stall, Silence: time.Hour, Threshold: 5 * time.Minute}},
		{"unknown state: nothing", cfg,
			Input{State: herd.StateUnknown, LastActivity: t0}, at(time.Hour),
			Verdict{Silence: time.Hour, Threshold: 5 * time.Minute}},
		{"pending: nothing", cfg,
			Input{State: herd.StatePending, LastActivity: t0}, at(time.Hour),
			Verdict{Silence: time.Hour, Threshold: 5 * time.Minute}},
		{"no known activity time: nothing", cfg,
			Input{State: herd.StateRunning}, at(time.Hour),
			Verdict{Threshold: 5 * time.Minute}},
		{"watchdog disabled", Config{},
			Input{State: herd.StateRunning, LastActivity: t0}, at(time.Hour),
			Verdict{Silence: time.Hour}},
		{"stalled, repeat not yet due", cfg,
			Input{State: herd.StateStalled, LastActivity: t0, StalledSince: at(5 * time.Minute)}, at(7 * time.Minute),
			Verdict{Silence: 7 * time.Minute, Threshold: 5 * time.Minute}},
		{"stalled, repeat due", cfg,
			Input{State: herd.StateStalled, LastActivity: t0, StalledSince: at(5 * time.Minute)}, at(8 * time.Minute),
			Verdict{Action: Warn, Silence: 8 * time.Minute, Threshold: 5 * time.Minute}},
		{"stalled, repeat counted from the last warning", cfg,
			Input{State: herd.StateStalled, LastActivity: t0, StalledSince: at(5 * time.Minute), LastWarnAt: at(8 * time.Minute)}, at(10 * time.Minute),
			Verdict{Silence: 10 * time.Minute, Threshold: 5 * time.Minute}},
		{"stalled, new activity", cfg,
			Input{State: herd.StateStalled, LastActivity: at(6 * time.Minute), StalledSince: at(5 * time.Minute)}, at(6 * time.Minute),
			Verdict{Action: Unstall, Threshold: 5 * time.Minute}},
		{"stalled, then waiting for input", cfg,
			Input{State: herd.StateStalled, Activity: herd.ActivityWaiting, LastActivity: t0, StalledSince: at(5 * time.Minute)}, at(6 * time.Minute),
			Verdict{Action: Unstall, Silence: 6 * time.Minute, Threshold: 5 * time.Minute}},
		{"stalled, auto-kill off: no kill fields", cfg,
			Input{State: herd.StateStalled, LastActivity: t0, StalledSince: at(5 * time.Minute), LastWarnAt: at(20 * time.Minute)}, at(21 * time.Minute),
			Verdict{Silence: 21 * time.Minute, Threshold: 5 * time.Minute}},
		{"auto-kill: base sample one window before the liveness timeout", killCfg,
			Input{State: herd.StateStalled, LastActivity: t0, StalledSince: at(5 * time.Minute), LastWarnAt: at(14 * time.Minute)}, at(14 * time.Minute),
			Verdict{Silence: 14 * time.Minute, Threshold: 5 * time.Minute, KillBase: true}},
		{"auto-kill: too early for a base sample", killCfg,
			Input{State: herd.StateStalled, LastActivity: t0, StalledSince: at(5 * time.Minute), LastWarnAt: at(11 * time.Minute)}, at(13 * time.Minute),
			Verdict{Silence: 13 * time.Minute, Threshold: 5 * time.Minute}},
		{"auto-kill: base from an earlier stall does not count", killCfg,
			Input{State: herd.StateStalled, LastActivity: t0, StalledSince: at(5 * time.Minute), LastWarnAt: at(14 * time.Minute), KillBaseAt: at(time.Minute)}, at(15 * time.Minute),
			Verdict{Silence: 15 * time.Minute, Threshold: 5 * time.Minute, KillBase: true}},
		{"auto-kill: check at the liveness timeout", killCfg,
			Input{State: herd.StateStalled, LastActivity: t0, StalledSince: at(5 * time.Minute), LastWarnAt: at(14 * time.Minute), KillBaseAt: at(14 * time.Minute)}, at(15 * time.Minute),
			Verdict{Silence: 15 * time.Minute, Threshold: 5 * time.Minute, KillCheck: true}},
		{"auto-kill: window not yet over", killCfg,
			Input{State: herd.StateStalled, LastActivity: t0, StalledSince: at(5 * time.Minute), LastWarnAt: at(14 * time.Minute), KillBaseAt: at(14*time.Minute + 30*time.Second)}, at(15 * time.Minute),
			Verdict{Silence: 15 * time.Minute, Threshold: 5 * time.Minute}},
	}
	for _, c := range cases {
		got := Classify(c.cfg, c.in, c.now)
		if diff := cmp.Diff(c.want, got); diff != "" {
			t.Errorf("[%s] expected %+v, got %+v (-want +got):\n%s", c.name, c.want, got, diff)
		}
	}
}

func TestKillWindow(t *testing.T) {
	cases := []struct {
		liveness, want time.Duration
	}{
		{2 * time.Second, time.Second},
		{10 * time.Minute, time.Minute},
		{5 * time.Minute, 30 * time.Second},
		{24 * time.Hour, time.Minute},
	}
	for _, c := range cases {
		if got := KillWindow(Config{LivenessTimeout: c.liveness}); got != c.want {
			t.Errorf("[liveness %s] expected %s, got %s", c.liveness, c.want, got)
		}
	}
}

func TestSafeToKill(t *testing.T) {
	on := Config{AutoKill: true}
	cases := []struct {
		name string
		cfg  Config
		f    Facts
		want bool
	}{
		{"idle and socket-free", on, Facts{Sampled: true, CPU: diag.ProgressNo}, true},
		{"auto-kill off", Config{}, Facts{Sampled: true, CPU: diag.ProgressNo}, false},
		{"unreadable tree", on, Facts{CPU: diag.ProgressNo}, false},
		{"burning CPU", on, Facts{Sampled: true, CPU: diag.ProgressYes}, false},
		{"unknown CPU counts as progress", on, Facts{Sampled: true, CPU: diag.ProgressUnknown}, false},
		{"empty CPU counts as progress", on, Facts{Sampled: true}, false},
		{"holds a TCP connection", on, Facts{Sampled: true, CPU: diag.ProgressNo, TCPEstablished: 1}, false},
	}
	for _, c := range cases {
		got, why := SafeToKill(c.cfg, c.f)
		if got != c.want || why == "" {
			t.Errorf("[%s] expected %v with a reason, got %v (%q)", c.name, c.want, got, why)
		}
	}
}

// session is a toy supervisor of one session, driven by Classify on a
// ticker the way the daemon's watchdog drives it.
type session struct {
	in      Input
	actions []string // "stall@5m0s", ...
	start   time.Time
}

func (s *session) tick(c Config, now time.Time, facts Facts) (killed bool) {
	v := Classify(c, s.in, now)
	rel := now.Sub(s.start).Round(100 * time.Millisecond)
	note := func(what string) { s.actions = append(s.actions, what+"@"+rel.String()) }
	if v.Sample {
		s.in.LastSampleAt = now
	}
	switch v.Action {
	case Stall:
		s.in.State, s.in.StalledSince, s.in.LastWarnAt = herd.StateStalled, now, now
		note("stall")
	case Warn:
		s.in.LastWarnAt = now
		note("warn")
	case Unstall:
		s.in.State = herd.StateRunning
		note("unstall")
	}
	if v.KillBase {
		s.in.KillBaseAt = now
		note("base")
	}
	if v.KillCheck {
		s.in.KillBaseAt = now
		if ok, _ := SafeToKill(c, facts); ok {
			note("kill")
			return true
		}
		note("spared")
	}
	return false
}

func TestTimeline(t *testing.T) {
	c := Config{StallAfter: time.Second, StallRepeat: time.Second, LivenessTimeout: 2 * time.Second, AutoKill: true}
	const tick = 200 * time.Millisecond
	cases := []struct {
		name  string
		facts Facts
		run   time.Duration
		want  []string
	}{
		{"idle, socket-free: killed at the liveness timeout", Facts{Sampled: true, CPU: diag.ProgressNo}, 5 * time.Second,
			[]string{"stall@1s", "warn@2s", "base@2s", "warn@3s", "kill@3s"}},
		{"holding a connection: spared, re-checked every window", Facts{Sampled: true, CPU: diag.ProgressNo, TCPEstablished: 1}, 5 * time.Second,
			[]string{"stall@1s", "warn@2s", "base@2s", "warn@3s", "spared@3s", "warn@4s", "spared@4s", "warn@5s", "spared@5s"}},
	}
	for _, tc := range cases {
		synctest.Test(t, func(t *testing.T) {
			start := time.Now()
			s := &session{start: start, in: Input{State: herd.StateRunning, Activity: herd.ActivityWorking, LastActivity: start}}
			ticker := time.NewTicker(tick)
			defer ticker.Stop()
			for time.Since(start) < tc.run {
				now := <-ticker.C
				if s.tick(c, now, tc.facts) {
					break
				}
			}
			if diff := cmp.Diff(tc.want, s.actions); diff != "" {
				t.Errorf("[%s] expected %v, got %v (-want +got):\n%s", tc.name, tc.want, s.actions, diff)
			}
		})
	}
}

func TestTimelineActivityUnstalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := Config{StallAfter: time.Second, StallRepeat: time.Second, LivenessTimeout: time.Minute}
		start := time.Now()
		s := &session{start: start, in: Input{State: herd.StateRunning, LastActivity: start}}
		ticker := time.NewTicker(100 * time.Millisecond)
		defer ticker.Stop()
		for time.Since(start) < 3*time.Second {
			now := <-ticker.C
			if now.Sub(start) == 2500*time.Millisecond {
				s.in.LastActivity = now // output again
			}
			s.tick(c, now, Facts{})
		}
		want := []string{"stall@1s", "warn@2s", "unstall@2.5s"}
		if diff := cmp.Diff(want, s.actions); diff != "" {
			t.Errorf("expected %v, got %v (-want +got):\n%s", want, s.actions, diff)
		}
		if s.in.LastSampleAt.IsZero() || s.in.LastSampleAt.After(start.Add(time.Second)) {
			t.Errorf("expected a sample ahead of the stall, got one at %v", s.in.LastSampleAt.Sub(start))
		}
	})
}
