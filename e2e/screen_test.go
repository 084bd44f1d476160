package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"herd"
	"herd/internal/api"
)

// replayScript plays, in a pane, frames captured from a real agent CLI
// (internal/agents/testdata/<agent>/<version>, captured by
// scripts/real-agents.sh --capture) and sends the hooks captured from it,
// as the CLI would. The pane is first sized as the frames were captured.
//
//	sh replay.sh DIR MODE WORK_A WORK_B START_HOOK START_EVENT PROMPT_HOOK PROMPT_EVENT
//
//	hung:  the start and prompt hooks, then the two working frames of one
//	       turn alternate for ever (a hung API call: only the timer moves)
//	esc:   the same for 1s, then the frame after Esc, and no hook
//	trust: the trust dialog, before any hook
const replayScript = `
dir=$1 mode=$2
tmux resize-window -x 120 -y 40 2>/dev/null
frame() { printf '\033[H\033[2J%s' "$(cat "$dir/$1")"; }
hook() { "$HERD_E2E_BIN" hook "$2" < "$dir/$1"; }
spin() {
  n=0
  while [ "$1" = 0 ] || [ $n -lt $(( $1 * 4 )) ]; do
    if [ $((n % 2)) = 0 ]; then frame "$3"; else frame "$4"; fi
    sleep 0.25
    n=$((n + 1))
  done
}
case "$mode" in
hung) hook "$5" "$6"; hook "$7" "$8"; spin 0 "" "$3" "$4" ;;
esc) hook "$5" "$6"; hook "$7" "$8"; spin 1 "" "$3" "$4"; frame screen-after-esc.txt ;;
trust) frame screen-trust.txt ;;
esac
while :; do sleep 3600; done
`

// replayed is an agent CLI whose captured frames and hooks a pane replays.
type replayed struct {
	agent        string // herd's agent kind
	dir          string // the captured version's directory
	workA, workB string // two frames of one turn, only its timer moved
	start, event string // the session's first hook and its event
	prompt, sent string // the prompt's hook and its event
}

// capturedAgents lists every captured version of every agent CLI with
// screen frames.
func capturedAgents(t *testing.T) []replayed {
	t.Helper()
	kinds := []replayed{
		{agent: herd.AgentClaude, workA: "screen-spinner-timer-a.txt", workB: "screen-spinner-timer-b.txt",
			start: "hook-session-start-startup.json", event: "SessionStart", prompt: "hook-user-prompt-submit.json", sent: "UserPromptSubmit"},
		{agent: herd.AgentCodex, workA: "screen-working-a.txt", workB: "screen-working-b.txt",
			start: "hook-session-start.json", event: "SessionStart", prompt: "hook-user-prompt-submit.json", sent: "UserPromptSubmit"},
		{agent: herd.AgentGemini, workA: "screen-working-a.txt", workB: "screen-working-b.txt",
			start: "hook-sessionstart.json", event: "SessionStart", prompt: "hook-beforeagent.json", sent: "BeforeAgent"},
	}
	var out []replayed
	for _, k := range kinds {
		root, err := filepath.Abs(filepath.Join("..", "internal", "agents", "testdata", k.agent))
		if err != nil {
			t.Fatal(err)
		}
		ents, _ := os.ReadDir(root)
		for _, en := range ents {
			if _, err := os.Stat(filepath.Join(root, en.Name(), k.workA)); err == nil {
				r := k
				r.dir = filepath.Join(root, en.Name())
				out = append(out, r)
			}
		}
	}
	if len(out) == 0 {
		t.Fatal("no captured agent screens under internal/agents/testdata")
	}
	return out
}

// TestScreenTellsAHungTurnFromAnEndedOne replays the captured screens of
// the real agent CLIs (every captured version of Claude Code, Codex and
// Gemini CLI) in panes of the real daemon: a hung API call (the spinner
// redrawing every 250ms moves window_activity all the time) becomes
// stalled within stall_after and a few ticks and stays stalled; a turn
// interrupted with Esc (no hook) ends idle and never stalls; a trust
// dialog is waiting with reason startup_prompt.
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
	script := filepath.Join(t.TempDir(), "replay.sh")
	if err := os.WriteFile(script, []byte(replayScript), 0o644); err != nil {
		t.Fatal(err)
	}
	agents := capturedAgents(t)
	name := func(i int, mode string) string { return fmt.Sprintf("%s%d-%s", agents[i].agent, i, mode) }
	// Each session's captures are bounded by its own lifetime: the
	// launches of every captured version, one after the other, take a
	// while on a busy machine, and the first panes are watched meanwhile.
	launched := map[string]time.Time{}
	for i, a := range agents {
		t.Logf("%s: replaying %s", name(i, "*"), a.dir)
		for _, mode := range []string{"hung", "esc", "trust"} {
			launched[herd.SessionName(name(i, mode), 0)] = time.Now()
			e.must("run", name(i, mode), "--agent", a.agent, "--agent-process", "sh", "--env", "HERD_E2E_BIN="+bin, "--",
				"sh", script, a.dir, mode, a.workA, a.workB, a.start, a.event, a.prompt, a.sent)
		}
	}
	started := time.Now()

	for i := range agents {
		hung := herd.SessionName(name(i, "hung"), 0)
		v := e.waitState(hung, herd.StateStalled, 3*stallAfter)
		stalledAfter := time.Since(started)
		if v.Activity != herd.ActivityWorking {
			t.Errorf("[%s] expected stalled while working, got %s/%s", hung, v.State, v.Activity)
		}
		// The spinner never stopped: the stall must come from the screen,
		// not from silence of the pane.
		if stalledAfter > stallAfter+3*time.Second {
			t.Errorf("[%s] expected stalled within stall_after (%s) and a few ticks, took %s", hung, stallAfter, stalledAfter)
		}
		t.Logf("%s: hung API call stalled %s after the prompt (stall_after %s)", hung, stalledAfter.Round(10*time.Millisecond), stallAfter)
	}
	var quiet []string
	for i := range agents {
		esc, trust := herd.SessionName(name(i, "esc"), 0), herd.SessionName(name(i, "trust"), 0)
		quiet = append(quiet, esc, trust)
		e.waitFor(esc+" idle", 3*stallAfter, func() bool {
			v, _ := e.session(esc)
			return v.Activity == herd.ActivityIdle
		})
		e.waitFor(trust+" waiting", 3*stallAfter, func() bool {
			v, _ := e.session(trust)
			return v.Activity == herd.ActivityWaiting
		})
	}
	// Three stall_afters more: the idle and the waiting agents never stall,
	// the hung ones never unstall (the spinner is no progress).
	deadline := time.Now().Add(3 * stallAfter)
	for time.Now().Before(deadline) {
		for _, n := range quiet {
			if v, _ := e.session(n); v.State != herd.StateRunning {
				t.Fatalf("[%s] expected running, got %s/%s", n, v.State, v.Activity)
			}
		}
		time.Sleep(250 * time.Millisecond) // sampling the state, not waiting for a condition
	}
	for _, n := range quiet {
		if got := len(e.events("--session", n, "--kind", herd.EventStalled)); got != 0 {
			t.Errorf("[%s] expected no stall, got %d", n, got)
		}
	}
	for i := range agents {
		hung := herd.SessionName(name(i, "hung"), 0)
		if n := len(e.events("--session", hung, "--kind", herd.EventUnstalled)); n != 0 {
			t.Errorf("[%s] expected no unstall while only the spinner moves, got %d", hung, n)
		}
		esc, trust := herd.SessionName(name(i, "esc"), 0), herd.SessionName(name(i, "trust"), 0)
		// Captures stay bounded: at most one a tick while the spinner
		// moves, one per stall_after/4 once quiet, over each pane's own
		// life (read after its count: it lived at least that long).
		perSecond := map[string]float64{hung: 5, esc: 1, trust: 1} // a tick (200ms); stall_after/4 once quiet
		slack := map[string]int{hung: 2, esc: 10, trust: 5}        // the first look, the esc turn's frames
		for _, n := range []string{hung, esc, trust} {
			got := screenCaptures(t, e, n)
			lived := time.Since(launched[n])
			limit := int(lived.Seconds()*perSecond[n]) + slack[n]
			t.Logf("%s: %d captures in %s", n, got, lived.Round(time.Second))
			if got > limit || got == 0 {
				t.Errorf("[%s] expected 1..%d captures, got %d", n, limit, got)
			}
		}
		var escIdle, trustWaiting bool
		for _, ev := range e.events("--session", esc, "--kind", herd.EventActivity) {
			if ev.Data["to"] == string(herd.ActivityIdle) && ev.Data["source"] == "screen" {
				escIdle = true
			}
		}
		for _, ev := range e.events("--session", trust, "--kind", herd.EventActivity) {
			if ev.Data["to"] == string(herd.ActivityWaiting) && ev.Reason == "startup_prompt" {
				trustWaiting = true
			}
		}
		// The pane shows the captured frame, at the size it was captured
		// at (a smaller pane would wrap and scroll it).
		frame, _ := os.ReadFile(filepath.Join(agents[i].dir, "screen-trust.txt"))
		if shown := e.try("logs", trust); !sameScreen(string(frame), shown) {
			t.Errorf("[%s] expected the pane to show the captured frame … got\n%s\n--- frame:\n%s", trust, shown, frame)
		}
		size, _ := exec.Command("tmux", "-L", e.tmuxSock, "display-message", "-p", "-t", "="+trust+":", "#{window_width}x#{window_height}").Output()
		if got := strings.TrimSpace(string(size)); got != "120x40" {
			t.Errorf("[%s] expected the pane sized as the frames were captured, 120x40 … got %q", trust, got)
		}
		if !escIdle {
			t.Errorf("[%s] expected an activity event to idle from the screen, got %v", esc, e.events("--session", esc, "--kind", herd.EventActivity))
		}
		if !trustWaiting {
			t.Errorf("[%s] expected waiting with reason startup_prompt, got %v", trust, e.events("--session", trust, "--kind", herd.EventActivity))
		}
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

// sameScreen reports whether two captures of a screen show the same
// lines, trailing blanks aside.
func sameScreen(a, b string) bool {
	lines := func(s string) []string {
		var out []string
		for _, l := range strings.Split(s, "\n") {
			out = append(out, strings.TrimRight(l, " \r"))
		}
		for len(out) > 0 && out[len(out)-1] == "" {
			out = out[:len(out)-1]
		}
		return out
	}
	return slices.Equal(lines(a), lines(b))
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
