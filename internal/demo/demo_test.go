package demo

import (
	"strings"
	"testing"
	"time"

	"herd"
	"herd/internal/api"
)

func TestTableHasNothingRelativeToNow(t *testing.T) {
	sig := 11
	until := time.Date(2026, 11, 22, 15, 0, 5, 0, time.Local)
	views := []api.SessionView{
		{Name: "crashloop-0", State: herd.StateBackoff, Process: herd.Dead, Activity: herd.ActivityUnknown, Restarts: 2, BackoffUntil: &until,
			Exit: &herd.Exit{Signal: &sig, Reason: herd.ReasonSignal, At: time.Now()}},
		{Name: "waiter-0", State: herd.StateRunning, Process: herd.Alive, Activity: herd.ActivityWaiting, Escalated: true},
	}
	a := Table(views)
	views[0].Exit.At = time.Now().Add(-time.Minute)
	if b := Table(views); a != b {
		t.Errorf("expected the same table for the same sessions, got\n%s\nthen\n%s", a, b)
	}
	for _, want := range []string{"backoff   dead     -         2        15:00:05       signal 11", "running!  alive    waiting"} {
		if !strings.Contains(a, want) {
			t.Errorf("expected %q in\n%s", want, a)
		}
	}
}

func TestSummary(t *testing.T) {
	sig := 11
	views := []api.SessionView{
		{Name: "crashloop-0", State: herd.StateFailed, Exit: &herd.Exit{Signal: &sig, Reason: herd.ReasonSignal}},
		{Name: "healthy-0", State: herd.StateRunning, Activity: herd.ActivityIdle},
	}
	ev := func(session, kind string, data map[string]any) herd.Event {
		return herd.Event{Session: session, Kind: kind, Data: data}
	}
	events := []herd.Event{
		ev("crashloop-0", herd.EventSpawned, nil), ev("crashloop-0", herd.EventCrashed, nil),
		ev("crashloop-0", herd.EventBackoff, map[string]any{"delay": "1s"}), ev("crashloop-0", herd.EventRestarted, nil),
		ev("crashloop-0", herd.EventCrashed, nil), ev("crashloop-0", herd.EventFailed, nil),
		ev("healthy-0", herd.EventSpawned, nil),
	}
	got := Summary(views, events)
	for _, want := range []string{
		"crashloop-0  now failed: 2 launch(es); 2 crash(es) (last: signal 11); backoff 1s; failed: restart budget spent",
		"healthy-0    now running: 1 launch(es); activity idle",
		"Events: backoff=1 crashed=2 failed=1 restarted=1 spawned=2",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("expected %q in\n%s", want, got)
		}
	}
	views[0].Exit = nil
	if got := Summary(views, events); strings.Contains(got, "(last:") {
		t.Errorf("expected no last exit named without one, got\n%s", got)
	}
}
