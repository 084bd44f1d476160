package liveness

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"herd"
)

func TestDecide(t *testing.T) {
	eleven, three := 11, 3
	axes := []herd.Axis{herd.Alive, herd.Dead, herd.Unknown}
	// Every combination of the two axes, for an identified agent.
	want := map[[2]herd.Axis]Verdict{
		{herd.Alive, herd.Alive}:     {State: herd.StateRunning, Action: None},
		{herd.Alive, herd.Dead}:      {State: herd.StateCrashed, Action: Crash, Exit: herd.Exit{Reason: herd.ReasonProcessGone}},
		{herd.Alive, herd.Unknown}:   {State: herd.StateUnknown, Action: None},
		{herd.Dead, herd.Alive}:      {State: herd.StateUnknown, Action: Reprobe},
		{herd.Dead, herd.Dead}:       {State: herd.StateCrashed, Action: Crash, Exit: herd.Exit{Reason: herd.ReasonPaneGone}},
		{herd.Dead, herd.Unknown}:    {State: herd.StateUnknown, Action: None},
		{herd.Unknown, herd.Alive}:   {State: herd.StateUnknown, Action: None},
		{herd.Unknown, herd.Dead}:    {State: herd.StateUnknown, Action: None},
		{herd.Unknown, herd.Unknown}: {State: herd.StateUnknown, Action: None},
	}
	for _, r := range axes {
		for _, p := range axes {
			w := want[[2]herd.Axis{r, p}]
			w.Runtime, w.Process = r, p
			got := Decide(Runtime{Axis: r}, p, true)
			if diff := cmp.Diff(w, got); diff != "" {
				t.Errorf("[runtime %s, process %s] (-expected +got):\n%s", r, p, diff)
			}
		}
	}

	cases := []struct {
		name       string
		rt         Runtime
		process    herd.Axis
		identified bool
		want       Verdict
	}{
		{"dead pane with signal", Runtime{Axis: herd.Dead, Signal: &eleven}, herd.Dead, true,
			Verdict{State: herd.StateCrashed, Runtime: herd.Dead, Process: herd.Dead, Action: Crash, Exit: herd.Exit{Signal: &eleven, Reason: herd.ReasonSignal}}},
		{"dead pane with status", Runtime{Axis: herd.Dead, Status: &three}, herd.Dead, true,
			Verdict{State: herd.StateCrashed, Runtime: herd.Dead, Process: herd.Dead, Action: Crash, Exit: herd.Exit{Code: &three, Reason: herd.ReasonExitCode}}},
		{"the pane's own process gone, tmux behind: wait for its exit status", Runtime{Axis: herd.Alive, Behind: true}, herd.Dead, true,
			Verdict{Runtime: herd.Alive, Process: herd.Dead, Action: Reprobe}},
		{"behind means nothing while the process lives", Runtime{Axis: herd.Alive, Behind: true}, herd.Alive, true,
			Verdict{State: herd.StateRunning, Runtime: herd.Alive, Process: herd.Alive, Action: None}},
		{"missing once is not evidence, even with the process dead", Runtime{Axis: herd.Dead, MissingOnce: true}, herd.Dead, true,
			Verdict{State: herd.StateUnknown, Runtime: herd.Unknown, Process: herd.Dead, Action: Reprobe}},
		{"missing once, process alive", Runtime{Axis: herd.Dead, MissingOnce: true}, herd.Alive, true,
			Verdict{State: herd.StateUnknown, Runtime: herd.Unknown, Process: herd.Alive, Action: Reprobe}},
		{"wrapper pane alive, agent not seen yet", Runtime{Axis: herd.Alive}, herd.Unknown, false,
			Verdict{State: herd.StatePending, Runtime: herd.Alive, Process: herd.Unknown, Action: None}},
		{"pane dead before the agent was ever seen", Runtime{Axis: herd.Dead, Status: &three}, herd.Unknown, false,
			Verdict{State: herd.StateCrashed, Runtime: herd.Dead, Process: herd.Unknown, Action: Crash, Exit: herd.Exit{Code: &three, Reason: herd.ReasonExitCode}}},
		{"unreadable listing, agent never seen", Runtime{Axis: herd.Unknown}, herd.Unknown, false,
			Verdict{State: herd.StateUnknown, Runtime: herd.Unknown, Process: herd.Unknown, Action: None}},
	}
	for _, c := range cases {
		if diff := cmp.Diff(c.want, Decide(c.rt, c.process, c.identified)); diff != "" {
			t.Errorf("[%s] (-expected +got):\n%s", c.name, diff)
		}
	}
}
