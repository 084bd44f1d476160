// Package liveness decides, purely, what two independent probes (runtime and process) say about an agent.
package liveness

import "herd"

// Runtime is what one tmux listing says about a session's pane.
type Runtime struct {
	// Axis: alive (pane present, running), dead (pane dead, or missing from
	// two good listings in a row), unknown (listing failed or row garbled).
	Axis herd.Axis
	// MissingOnce: absent from one good listing only; not yet evidence.
	MissingOnce bool
	// Status and Signal are the dead pane's exit status, when tmux gave one.
	Status, Signal *int
	// Behind: the pane's own process is the agent, it is gone, and tmux
	// has not reported the pane dead yet. Within a short grace that is
	// tmux catching up (its exit status is on the way), not a live
	// wrapper: the verdict waits for it.
	Behind bool
}

// Action is what the supervisor must do after a verdict.
type Action string

// Actions.
const (
	// None: record the state, nothing else.
	None Action = "none"
	// Crash: the agent is dead; account the crash (the single function) and
	// kill whatever is left of the pane.
	Crash Action = "crash"
	// Reprobe: the evidence is not yet enough; read again soon.
	Reprobe Action = "reprobe"
)

// Verdict is the decision for one session.
type Verdict struct {
	State   herd.State
	Runtime herd.Axis
	Process herd.Axis
	Action  Action
	// Exit is set for Crash.
	Exit herd.Exit
}

// The recorded state is kept when a verdict's State is empty.

// Decide maps runtime × process (× whether the agent was ever identified)
// to a verdict:
//
//	alive/alive   → running
//	alive/dead    → crash, process_gone (the wrapper or pane lives on);
//	                while tmux is Behind, re-probe with the state unchanged
//	dead/alive    → unknown, re-probe: never launch a second copy beside a live agent
//	dead/dead     → crash: the pane's exit status when known, else pane_gone
//	any unknown   → unknown, nothing destructive
//
// A pane missing from one listing only is not evidence: unknown and re-probe.
// identified is false while the agent under a wrapper has not been seen;
// a live pane then means pending.
func Decide(rt Runtime, process herd.Axis, identified bool) Verdict {
	v := Verdict{Runtime: rt.Axis, Process: process, Action: None}
	if rt.MissingOnce {
		v.Runtime = herd.Unknown
		v.State, v.Action = herd.StateUnknown, Reprobe
		return v
	}
	if !identified && rt.Axis == herd.Alive {
		v.State = herd.StatePending
		return v
	}
	switch {
	case rt.Axis == herd.Alive && process == herd.Alive:
		v.State = herd.StateRunning
	case rt.Axis == herd.Alive && process == herd.Dead && rt.Behind:
		v.Action = Reprobe // State "": keep the recorded state
	case rt.Axis == herd.Alive && process == herd.Dead:
		v.State, v.Action = herd.StateCrashed, Crash
		v.Exit = herd.Exit{Reason: herd.ReasonProcessGone}
	case rt.Axis == herd.Dead && process == herd.Alive:
		v.State, v.Action = herd.StateUnknown, Reprobe
	case rt.Axis == herd.Dead && (process == herd.Dead || !identified):
		v.State, v.Action = herd.StateCrashed, Crash
		v.Exit = paneExit(rt)
	default:
		v.State = herd.StateUnknown
	}
	return v
}

func paneExit(rt Runtime) herd.Exit {
	switch {
	case rt.Signal != nil && *rt.Signal > 0:
		return herd.Exit{Signal: rt.Signal, Reason: herd.ReasonSignal}
	case rt.Status != nil:
		return herd.Exit{Code: rt.Status, Reason: herd.ReasonExitCode}
	}
	return herd.Exit{Reason: herd.ReasonPaneGone}
}
