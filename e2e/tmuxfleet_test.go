package e2e

import (
	"syscall"
	"testing"
	"time"

	"herd"
)

// TestTmuxFleetLaunchAndAdopt: launching many tmux agents at once reports
// none of them as an unmanaged tmux session (each exists a moment before
// its record); `get sessions` lists every one with its pid; after a
// daemon restart each is adopted with exactly one adopted event, and a
// SIGKILL of one is a crash of that one only.
func TestTmuxFleetLaunchAndAdopt(t *testing.T) {
	hasTmux(t)
	const n = 30
	e := newEnv(t, fastRestart)
	e.start()
	e.must("run", "fleet", "--", "sleep", "300")
	e.must("scale", "fleet", "--replicas", "30")
	e.waitFor("every fleet session running", 60*time.Second, func() bool {
		running := 0
		for _, v := range e.sessions() {
			if v.Role == "fleet" && v.State == herd.StateRunning && v.PID > 0 {
				running++
			}
		}
		return running == n
	})
	for _, ev := range e.events("--kind", herd.EventProbeUnknown) {
		if ev.Reason == "unmanaged" {
			t.Errorf("[launch] expected no unmanaged report of a launching session, got one for %s: %s", ev.Session, ev.Message)
		}
	}

	e.kill(syscall.SIGTERM)
	e.start()
	e.waitFor("every fleet session adopted", 60*time.Second, func() bool {
		return len(e.events("--kind", herd.EventAdopted)) >= n
	})
	adopted := map[string]int{}
	for _, ev := range e.events("--kind", herd.EventAdopted) {
		adopted[ev.Session]++
	}
	if len(adopted) != n {
		t.Errorf("[adopt] expected %d sessions adopted, got %d", n, len(adopted))
	}
	for name, c := range adopted {
		if c != 1 {
			t.Errorf("[adopt] expected one adopted event for %s, got %d", name, c)
			for _, ev := range e.events("--session", name) {
				t.Logf("%s: %s %s %s %s", name, ev.Time.Format("15:04:05.000"), ev.Kind, ev.Reason, ev.Message)
			}
		}
	}

	v, ok := e.session("fleet-7")
	if !ok || v.PID == 0 {
		t.Fatalf("expected fleet-7 with a pid, got %+v", v)
	}
	if err := syscall.Kill(v.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	e.waitFor("fleet-7 crashed", 10*time.Second, func() bool {
		return count(e.events("--session", "fleet-7"), herd.EventCrashed) == 1
	})
	if got := count(e.events("--kind", herd.EventCrashed), herd.EventCrashed); got != 1 {
		t.Errorf("expected one crash in the fleet, got %d", got)
	}
}
