package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"herd"
	"herd/internal/api"
)

// screenScript stands in for Claude Code's TUI in a pane: the same
// spinner, prompt box and trust dialog the real one draws (see
// internal/agents/testdata), and herd's hooks as Claude sends them.
//
//	hung:  SessionStart, UserPromptSubmit, then the spinner redraws for ever
//	       (a hung API call: the timer and glyph move, nothing else)
//	esc:   the same for 1s, then the prompt comes back with the
//	       interrupted text in it, and no hook (what Esc does)
//	trust: the trust dialog, before any hook
const screenScript = `
box=────────────────────────────────────────
frame() { printf '\033[H\033[2J%s\n\n%s\n❯ %s\n%s\n  %s\n' "$1" "$box" "$2" "$box" "$3"; }
hook() { printf '{"hook_event_name":"%s","session_id":"7d3c1f0e-2b4a-4c5d-9e8f-0a1b2c3d4e5f","source":"startup"}' "$1" | "$HERD_E2E_BIN" hook "$1"; }
spin() {
  n=0
  while [ "$1" = 0 ] || [ $n -lt $(( $1 * 4 )) ]; do
    case $((n % 4)) in 0) g=✶ ;; 1) g=✢ ;; 2) g=✳ ;; *) g=✻ ;; esac
    frame "$g Thinking… ($((n / 4))s · ↓ $((n * 7)) tokens)" "" "esc to interrupt"
    sleep 0.25
    n=$((n + 1))
  done
}
case "$1" in
hung) hook SessionStart; hook UserPromptSubmit; spin 0 ;;
esc) hook SessionStart; hook UserPromptSubmit; spin 1; frame "● Partial answer." "please hang now" "⏸ manual mode on" ;;
trust) printf '\033[H\033[2J Accessing workspace:\n\n Do you trust the files in this folder?\n\n ❯ 1. Yes, I trust this folder\n   2. No, exit\n' ;;
esac
while :; do sleep 3600; done
`

// TestScreenTellsAHungTurnFromAnEndedOne drives three Claude-like panes
// through the real daemon: a hung API call (the spinner redrawing every
// 250ms moves window_activity all the time) becomes stalled within
// stall_after and a few ticks and stays stalled; a turn interrupted with Esc
// (no hook) ends idle and never stalls; a trust dialog is waiting with
// reason startup_prompt.
func TestScreenTellsAHungTurnFromAnEndedOne(t *testing.T) {
	hasTmux(t)
	const stallAfter = 4 * time.Second
	e := newEnv(t, fastRestart+`
[watchdog]
stall_after = "4s"
stall_repeat = "1h"
liveness_timeout = "1h"
`)
	e.start()
	script := filepath.Join(t.TempDir(), "claude.sh")
	if err := os.WriteFile(script, []byte(screenScript), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{"hung", "esc", "trust"} {
		e.must("run", mode, "--agent", "claude", "--agent-process", "sh", "--env", "HERD_E2E_BIN="+bin, "--", "sh", script, mode)
	}
	started := time.Now()

	v := e.waitState("hung-0", herd.StateStalled, 3*stallAfter)
	stalledAfter := time.Since(started)
	if v.Activity != herd.ActivityWorking {
		t.Errorf("[hung] expected stalled while working, got %s/%s", v.State, v.Activity)
	}
	// The spinner never stopped: the stall must come from the screen, not
	// from silence of the pane.
	if stalledAfter > stallAfter+3*time.Second {
		t.Errorf("[hung] expected stalled within stall_after (%s) and a few ticks, took %s", stallAfter, stalledAfter)
	}
	t.Logf("hung API call stalled %s after the prompt (stall_after %s)", stalledAfter.Round(10*time.Millisecond), stallAfter)

	e.waitFor("esc-0 idle", 3*stallAfter, func() bool {
		v, _ := e.session("esc-0")
		return v.Activity == herd.ActivityIdle
	})
	e.waitFor("trust-0 waiting", 3*stallAfter, func() bool {
		v, _ := e.session("trust-0")
		return v.Activity == herd.ActivityWaiting
	})
	// Three stall_afters more: the idle and the waiting agents never stall,
	// the hung one never unstalls (the spinner is no progress).
	deadline := time.Now().Add(3 * stallAfter)
	for time.Now().Before(deadline) {
		for _, name := range []string{"esc-0", "trust-0"} {
			if v, _ := e.session(name); v.State != herd.StateRunning {
				t.Fatalf("[%s] expected running, got %s/%s", name, v.State, v.Activity)
			}
		}
		time.Sleep(250 * time.Millisecond) // sampling the state, not waiting for a condition
	}
	for _, name := range []string{"esc-0", "trust-0"} {
		if n := len(e.events("--session", name, "--kind", herd.EventStalled)); n != 0 {
			t.Errorf("[%s] expected no stall, got %d", name, n)
		}
	}
	if n := len(e.events("--session", "hung-0", "--kind", herd.EventUnstalled)); n != 0 {
		t.Errorf("[hung] expected no unstall while only the spinner moves, got %d", n)
	}

	// Captures stay bounded: at most one a tick while the spinner moves,
	// one per stall_after/4 once quiet.
	elapsed := time.Since(started)
	limits := map[string]int{
		"hung-0":  int(elapsed/(200*time.Millisecond)) + 2, // a tick (200ms)
		"esc-0":   int(elapsed/time.Second) + 10,           // stall_after/4 once quiet
		"trust-0": int(elapsed/time.Second) + 5,
	}
	for name, limit := range limits {
		n := screenCaptures(t, e, name)
		t.Logf("%s: %d captures in %s", name, n, elapsed.Round(time.Second))
		if n > limit || n == 0 {
			t.Errorf("[%s] expected 1..%d captures, got %d", name, limit, n)
		}
	}

	var escIdle, trustWaiting bool
	for _, ev := range e.events("--session", "esc-0", "--kind", herd.EventActivity) {
		if ev.Data["to"] == string(herd.ActivityIdle) && ev.Data["source"] == "screen" {
			escIdle = true
		}
	}
	for _, ev := range e.events("--session", "trust-0", "--kind", herd.EventActivity) {
		if ev.Data["to"] == string(herd.ActivityWaiting) && ev.Reason == "startup_prompt" {
			trustWaiting = true
		}
	}
	if !escIdle {
		t.Errorf("[esc] expected an activity event to idle from the screen, got %v", e.events("--session", "esc-0", "--kind", herd.EventActivity))
	}
	if !trustWaiting {
		t.Errorf("[trust] expected waiting with reason startup_prompt, got %v", e.events("--session", "trust-0", "--kind", herd.EventActivity))
	}
}

// TestInjectClearsTheInputLine: text left on an agent's input line (an
// interrupted prompt) is emptied before inject types, unless --no-clear.
// The simulated agent reads a cooked terminal, where C-u empties the line.
func TestInjectClearsTheInputLine(t *testing.T) {
	hasTmux(t)
	e := newEnv(t, fastRestart)
	e.start()
	e.must("run", "talk", "--agent", "claude", "--agent-process", "herd", "--", bin, "sim", "--wait-input", "--interval", "200ms")
	e.waitFor("the prompt", 10*time.Second, func() bool { return strings.Contains(e.try("logs", "talk-0"), "waiting for your input") })

	e.must("inject", "--no-enter", "talk-0", "leftover words")
	e.must("inject", "talk-0", "the real prompt")
	e.waitFor("the prompt read", 10*time.Second, func() bool {
		return strings.Contains(e.try("logs", "talk-0"), `You said: the real prompt"`)
	})
	if logs := e.try("logs", "talk-0"); strings.Contains(logs, "You said: leftover") {
		t.Errorf("[clear] expected the leftover text emptied, got:\n%s", logs)
	}

	e.must("inject", "--no-enter", "talk-0", "abc")
	e.must("inject", "--no-clear", "talk-0", "def")
	e.waitFor("the kept text read", 10*time.Second, func() bool {
		return strings.Contains(e.try("logs", "talk-0"), `You said: abcdef"`)
	})

	// An empty inject clears nothing: it submits what was typed.
	e.must("inject", "--no-enter", "talk-0", "typed then sent")
	e.must("inject", "talk-0", "")
	e.waitFor("the typed text sent by an empty inject", 10*time.Second, func() bool {
		return strings.Contains(e.try("logs", "talk-0"), `You said: typed then sent"`)
	})
}

// screenCaptures is how many times the watchdog captured a session's pane.
func screenCaptures(t *testing.T, e *env, name string) int {
	t.Helper()
	var det api.SessionDetail
	if err := json.Unmarshal([]byte(e.must("describe", "session", name, "-o", "json")), &det); err != nil {
		t.Fatal(err)
	}
	m, _ := det.ActivityDetail.(map[string]any)
	n, _ := m["screen_captures"].(float64)
	return int(n)
}
