package slots

import (
	"log/slog"
	"testing"
	"time"

	"herd"
	"herd/internal/reconcile"
)

// gateFunc is a Gate from a function.
type gateFunc func(r herd.Role, now time.Time) (time.Time, string)

func (f gateFunc) LaunchHeld(r herd.Role, now time.Time) (time.Time, string) { return f(r, now) }

func TestGate(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	byRole := func(holds map[string]time.Duration) Gate {
		return gateFunc(func(r herd.Role, now time.Time) (time.Time, string) {
			if d, ok := holds[r.Name]; ok {
				return now.Add(d), "held " + r.Name
			}
			return time.Time{}, ""
		})
	}
	roles := map[string]herd.Role{"a": {Name: "a"}, "b": {Name: "b"}, "c": {Name: "c"}}
	launches := []reconcile.Action{
		{Kind: reconcile.Relaunch, Role: "a", Session: "a-0"}, {Kind: reconcile.Launch, Role: "b", Session: "b-0"},
		{Kind: reconcile.Launch, Role: "c", Session: "c-0"},
	}
	for _, tc := range []struct {
		name      string
		gates     []Gate
		wantKept  []string
		wantOpens time.Duration // 0: none held
	}{
		{"no gates", nil, []string{"a-0", "b-0", "c-0"}, 0},
		{"nothing held", []Gate{byRole(nil)}, []string{"a-0", "b-0", "c-0"}, 0},
		{"a relaunch held", []Gate{byRole(map[string]time.Duration{"a": time.Minute})}, []string{"b-0", "c-0"}, time.Minute},
		{"earliest opening", []Gate{byRole(map[string]time.Duration{"a": time.Hour, "c": time.Minute})}, []string{"b-0"}, time.Minute},
		{"the latest of two gates on one role", []Gate{byRole(map[string]time.Duration{"a": time.Minute}), byRole(map[string]time.Duration{"a": time.Hour})},
			[]string{"b-0", "c-0"}, time.Hour},
	} {
		sl := &Slots{o: Options{Gates: tc.gates, Log: slog.New(slog.DiscardHandler)}, held: map[string]time.Time{}}
		in := append([]reconcile.Action(nil), launches...)
		kept, opens := sl.gate(roles, in, now)
		var names []string
		for _, a := range kept {
			names = append(names, a.Session)
		}
		if len(names) != len(tc.wantKept) {
			t.Errorf("[%s] expected %v launched, got %v", tc.name, tc.wantKept, names)
		} else {
			for i := range names {
				if names[i] != tc.wantKept[i] {
					t.Errorf("[%s] expected %v launched, got %v", tc.name, tc.wantKept, names)
					break
				}
			}
		}
		wantOpens := time.Time{}
		if tc.wantOpens > 0 {
			wantOpens = now.Add(tc.wantOpens)
		}
		if !opens.Equal(wantOpens) {
			t.Errorf("[%s] expected the gate to open at %s, got %s", tc.name, wantOpens, opens)
		}
		if in[0].Session != "a-0" {
			t.Errorf("[%s] expected the plan left as it was, got %v", tc.name, in)
		}
	}
}

func TestPausedForBudget(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    herd.Session
		want bool
	}{
		{"stopped for the budget", herd.Session{State: herd.StateStopped, Exit: &herd.Exit{Reason: herd.ReasonBudget}}, true},
		{"stopped by a person", herd.Session{State: herd.StateStopped, Exit: &herd.Exit{Reason: herd.ReasonUser}}, false},
		{"running", herd.Session{State: herd.StateRunning, Exit: &herd.Exit{Reason: herd.ReasonBudget}}, false},
		{"never ran", herd.Session{State: herd.StateStopped}, false},
	} {
		if got := PausedForBudget(tc.s); got != tc.want {
			t.Errorf("[%s] expected %v, got %v", tc.name, tc.want, got)
		}
	}
}
