package watchdog

import (
	"time"

	"herd"
	"herd/internal/agents"
)

// confirmIdle is how long a screen showing the agent back at its prompt
// must stay unchanged, on two captures, before a turn counts as ended
// without a hook: a capture between Enter and the spinner's first frame
// shows the prompt too.
const confirmIdle = 2 * time.Second

// screenSource names the screen as the source of an activity change.
const screenSource = "screen"

// screenFacts is what the watchdog knows when it reads one capture of an
// agent's pane.
type screenFacts struct {
	// Screen is the classified capture.
	Screen agents.Screen
	// Current is the activity in force and its reason.
	Current herd.Activity
	Reason  string
	// HooksSeen: the agent reports through hooks, which then drive its
	// activity; the screen only corrects what hooks cannot say.
	HooksSeen bool
	// LastHookAt is when the last hook report was applied.
	LastHookAt time.Time
	// Since is when this very screen (same normalised hash) was first
	// captured.
	Since time.Time
	Now   time.Time
}

// screenActivity decides the activity one capture proves, or ok=false to
// leave it as it is. It is pure.
//
//   - A startup dialog (trust, onboarding, API key, login) is waiting with
//     reason startup_prompt, hooks or not: no hook runs before it is
//     answered.
//   - An agent without hooks is read from its screen alone: a spinner is
//     working, a dialog waiting, the prompt back (unchanged for
//     confirmIdle) idle.
//   - With hooks, the screen ends a turn hooks cannot end: the prompt back
//     with no spinner, first seen after the last hook and unchanged for
//     confirmIdle, turns working into idle (Esc sends no hook). It also
//     ends a waiting it set itself (a startup dialog answered).
func screenActivity(f screenFacts) (act herd.Activity, reason string, ok bool) {
	sc := f.Screen
	if sc.Activity == "" {
		return "", "", false
	}
	if sc.Dialog == agents.DialogStartup {
		if f.Current == herd.ActivityWaiting && f.Reason == agents.ReasonStartupPrompt {
			return "", "", false
		}
		return herd.ActivityWaiting, agents.ReasonStartupPrompt, true
	}
	confirmed := !f.Since.IsZero() && f.Now.Sub(f.Since) >= confirmIdle
	fromStartup := f.Current == herd.ActivityWaiting && f.Reason == agents.ReasonStartupPrompt
	if !f.HooksSeen || fromStartup {
		if sc.Activity == f.Current && sc.Reason == f.Reason {
			return "", "", false
		}
		if sc.Activity == herd.ActivityIdle && !confirmed {
			return "", "", false
		}
		return sc.Activity, sc.Reason, true
	}
	if sc.Activity != herd.ActivityIdle || !agents.CanStall(f.Current) || !confirmed || !f.Since.After(f.LastHookAt) {
		return "", "", false
	}
	return herd.ActivityIdle, "", true
}

// screenKind reports whether herd can read kind's screen.
func screenKind(kind string) bool {
	return kind == herd.AgentClaude || kind == herd.AgentCodex || kind == herd.AgentGemini
}

// captureGap is the least time between two captures of one agent's pane
// while its window shows output: a spinner redraws every second, and a
// stall is judged over stall_after, so a fortieth of it (at least one
// probe interval, at most 10s) is fine enough.
func captureGap(stallAfter, interval time.Duration) time.Duration {
	return min(max(stallAfter/40, interval), 10*time.Second)
}

// quietCaptureEvery is how often a quiet agent's pane is captured anyway:
// a dialog or the prompt can come back without output after it.
func quietCaptureEvery(stallAfter, interval time.Duration) time.Duration {
	if stallAfter <= 0 {
		return max(time.Minute, interval)
	}
	return max(stallAfter/4, interval)
}
