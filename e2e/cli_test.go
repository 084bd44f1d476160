package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"herd"
)

// TestLogsBothRuntimes: `herd logs` shows captured stdout (exec) and the
// pane (tmux), with --tail.
func TestLogsBothRuntimes(t *testing.T) {
	t.Parallel()
	hasTmux(t)
	e := newEnv(t, fastRestart)
	e.start()
	script := "for i in 1 2 3 4 5; do echo line-$i; done; sleep 300"
	e.must("run", "ex", "--runtime", "exec", "--", "sh", "-c", script)
	e.must("run", "tm", "--", "sh", "-c", script)
	for _, name := range []string{"ex-0", "tm-0"} {
		e.waitState(name, herd.StateRunning, 10*time.Second)
		e.waitFor(name+" output", 5*time.Second, func() bool {
			return strings.Contains(e.try("logs", name), "line-5")
		})
		tail := strings.TrimSpace(e.must("logs", name, "--tail", "2"))
		if !strings.HasSuffix(tail, "line-5") || strings.Contains(tail, "line-3") {
			t.Errorf("[%s] expected the last two lines, got %q", name, tail)
		}
	}
	if _, errs, code := e.herd("logs", "nosuch-0"); code == 0 || !strings.Contains(errs, "not found") {
		t.Errorf("expected a clear error for an unknown session, got %d %q", code, errs)
	}
}

// TestInjectLiteralAndLarge: text starting with '-' and text over the
// tmux command limit reach the agent literally.
func TestInjectLiteralAndLarge(t *testing.T) {
	t.Parallel()
	hasTmux(t)
	e := newEnv(t, fastRestart)
	e.start()
	dir := t.TempDir()
	out, raw := filepath.Join(dir, "typed"), filepath.Join(dir, "raw")
	// A raw terminal, as agents use: a cooked one keeps 4096 bytes a line
	// (and turns the Enter into a newline). Text typed before stty ran
	// would meet the cooked terminal: the agent says when it is raw.
	e.must("run", "cat", "--", "sh", "-c", "stty raw -echo && : > "+raw+"; cat > "+out)
	e.waitState("cat-0", herd.StateRunning, 10*time.Second)
	e.waitFor("the agent's terminal raw", 10*time.Second, func() bool {
		_, err := os.Stat(raw)
		return err == nil
	})
	e.must("inject", "cat-0", "--", "--not-a-flag; $(rm -rf /) 'quoted'")
	big := strings.Repeat("0123456789abcdef", 2500) // 40 KB
	e.must("inject", "cat-0", big)
	want := "--not-a-flag; $(rm -rf /) 'quoted'\r" + big + "\r"
	e.waitFor("the text typed into the agent", 10*time.Second, func() bool {
		b, _ := os.ReadFile(out)
		return string(b) == want
	})
	if _, errs, code := e.herd("inject", "nosuch-0", "x"); code == 0 || !strings.Contains(errs, "not found") {
		t.Errorf("expected a clear error for an unknown session, got %d %q", code, errs)
	}
}

// TestTmuxStallAndHooks: in tmux, an agent that goes silent is stalled
// (with diagnostics) and recovers; hooks move activity working → waiting.
func TestTmuxStallAndHooks(t *testing.T) {
	t.Parallel()
	hasTmux(t)
	e := newEnv(t, fastRestart+`
[watchdog]
stall_after = "2s"
stall_repeat = "1s"
liveness_timeout = "1m"
`)
	e.start()
	e.must("run", "quiet", "--", bin, "sim", "--interval", "200ms", "--silent-after", "1s")
	e.must("run", "asker", "--", bin, "sim", "--interval", "300ms", "--quiet", "--hooks", "SessionStart,PreToolUse:Bash,PostToolUse:Bash,PermissionRequest")
	e.waitState("quiet-0", herd.StateStalled, 15*time.Second)
	e.waitFor("a stall warning with diagnostics", 10*time.Second, func() bool {
		for _, ev := range e.events("--session", "quiet-0", "--kind", herd.EventStallWarning) {
			if d, ok := ev.Data["diagnostics"].(map[string]any); ok && d["proc_state"] != nil {
				return true
			}
		}
		return false
	})
	seen := map[herd.Activity]bool{}
	e.waitFor("asker waiting", 15*time.Second, func() bool {
		v, _ := e.session("asker-0")
		seen[v.Activity] = true
		return v.Activity == herd.ActivityWaiting
	})
	var kinds []string
	for _, ev := range e.events("--session", "asker-0", "--kind", herd.EventActivity) {
		kinds = append(kinds, ev.Message)
	}
	if !strings.Contains(strings.Join(kinds, ";"), "working") {
		t.Errorf("expected working before waiting, got %v", kinds)
	}
	// Waiting is not a stall, however long it lasts.
	time.Sleep(3 * time.Second)
	if v, _ := e.session("asker-0"); v.State != herd.StateRunning || v.Activity != herd.ActivityWaiting {
		t.Errorf("expected a waiting agent to stay running and waiting, got %s/%s", v.State, v.Activity)
	}
}
