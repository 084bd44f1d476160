package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"herd"
)

// TestTmuxSegvInLivePane: kill -SEGV of the agent inside a live pane →
// crashed with signal 11 (from the pane's dead status), a new incarnation.
func TestTmuxSegvInLivePane(t *testing.T) {
	// Alone: it bounds how soon a death is accounted (5 s).
	hasTmux(t)
	e := newEnv(t, fastRestart)
	e.start()
	e.must("run", "agent", "--", bin, "sim", "--interval", "200ms")
	v := e.waitState("agent-0", herd.StateRunning, 10*time.Second)
	if v.RuntimeKind != herd.RuntimeTmux || v.Runtime != herd.Alive || v.Process != herd.Alive {
		t.Fatalf("expected a live tmux session on both axes, got %+v", v)
	}
	e.waitOutput("agent-0")
	syscall.Kill(v.PID, syscall.SIGSEGV)
	e.waitFor("crashed with signal 11", 5*time.Second, func() bool {
		for _, ev := range e.events("--session", "agent-0", "--kind", herd.EventCrashed) {
			if sig, ok := ev.Data["signal"].(float64); ok && sig == 11 && ev.Reason == herd.ReasonSignal {
				return true
			}
		}
		return false
	})
	e.waitFor("a new incarnation", 5*time.Second, func() bool {
		n, ok := e.session("agent-0")
		return ok && n.State == herd.StateRunning && n.Incarnation != v.Incarnation
	})
}

// TestTmuxKillSessionFromOutside: the pane vanishes → pane_gone.
func TestTmuxKillSessionFromOutside(t *testing.T) {
	t.Parallel()
	hasTmux(t)
	e := newEnv(t, fastRestart)
	e.start()
	e.must("run", "agent", "--", "sleep", "300")
	e.waitState("agent-0", herd.StateRunning, 10*time.Second)
	if out, err := exec.Command("tmux", "-L", e.tmuxSock, "kill-session", "-t", "=agent-0").CombinedOutput(); err != nil {
		t.Fatalf("kill-session: %v %s", err, out)
	}
	e.waitFor("pane_gone", 5*time.Second, func() bool {
		for _, ev := range e.events("--session", "agent-0", "--kind", herd.EventCrashed) {
			if ev.Reason == herd.ReasonPaneGone {
				return true
			}
		}
		return false
	})
	e.waitState("agent-0", herd.StateRunning, 5*time.Second)
}

// TestTmuxServerKilled: every session goes through one crash each, with
// backoff — no mass restart storm.
func TestTmuxServerKilled(t *testing.T) {
	t.Parallel()
	hasTmux(t)
	e := newEnv(t, `
[restart]
initial_backoff = "500ms"
max_backoff = "2s"
`)
	e.start()
	e.must("run", "a", "--replicas", "3", "--", "sleep", "300")
	for _, n := range []string{"a-0", "a-1", "a-2"} {
		e.waitState(n, herd.StateRunning, 10*time.Second)
	}
	exec.Command("tmux", "-L", e.tmuxSock, "kill-server").Run()
	e.waitFor("all three relaunched", 10*time.Second, func() bool {
		for _, v := range e.sessions() {
			if v.Restarts > 1 {
				// One death counted twice (or relaunched twice): fail now,
				// with the story, rather than wait for a count that
				// cannot come back to 1.
				t.Fatalf("%s restarted %d times for one kill-server; events:\n%s", v.Name, v.Restarts, e.must("events"))
			}
			if v.State != herd.StateRunning || v.Restarts != 1 {
				t.Logf("not yet: %s %s restarts %d", v.Name, v.State, v.Restarts)
				return false
			}
		}
		return true
	})
	e.holds("exactly one crash and one relaunch per session (3 each)", time.Second, func() bool {
		events := e.events()
		return count(events, herd.EventCrashed) == 3 && count(events, herd.EventRestarted) == 3
	})
}

// TestTmuxHungListing: tmux.binary points at a script that hangs forever on
// list-panes. Ticks keep their period, sessions go unknown with a
// probe_unknown event, nothing is killed, and the CLI answers at once.
func TestTmuxHungListing(t *testing.T) {
	t.Parallel()
	hasTmux(t)
	dir := t.TempDir()
	flag := filepath.Join(dir, "hang")
	script := filepath.Join(dir, "tmux")
	real, _ := exec.LookPath("tmux")
	pids := filepath.Join(dir, "hung.pids")
	os.WriteFile(script, []byte("#!/bin/sh\ncase \" $* \" in *\" -C \"*) exit 1 ;; esac\nfor a in \"$@\"; do\n  if [ \"$a\" = list-panes ] && [ -e "+flag+" ]; then echo $$ >> "+pids+"; exec sleep 3600; fi\ndone\nexec "+real+" \"$@\"\n"), 0o755)
	e := newEnv(t, "[probe]\ninterval = \"200ms\"\ntimeout = \"500ms\"\n"+fastRestart+"\n")
	// The binary is a tmux key: rewrite the config's [tmux] section.
	cfgPath := filepath.Join(e.dir, "herd.toml")
	b, _ := os.ReadFile(cfgPath)
	os.WriteFile(cfgPath, []byte(strings.Replace(string(b), "[tmux]\n", "[tmux]\nbinary = \""+script+"\"\n", 1)), 0o600)
	e.start()
	e.must("run", "agent", "--", "sleep", "300")
	e.must("run", "side", "--runtime", "exec", "--", "sleep", "300")
	v := e.waitState("agent-0", herd.StateRunning, 10*time.Second)
	side := e.waitState("side-0", herd.StateRunning, 10*time.Second)

	os.WriteFile(flag, nil, 0o600)
	e.waitState("agent-0", herd.StateUnknown, 5*time.Second)
	if n := count(e.events("--session", "agent-0", "--kind", herd.EventProbeUnknown), herd.EventProbeUnknown); n < 1 {
		t.Errorf("expected a probe_unknown event")
	}
	start := time.Now()
	e.must("get", "sessions")
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("expected get sessions to answer at once while tmux hangs, took %v", d)
	}
	// Supervision of the other runtime goes on: a crash is accounted and
	// relaunched while every tmux listing hangs.
	syscall.Kill(side.PID, syscall.SIGKILL)
	e.waitFor("side-0 relaunched while tmux hangs", 5*time.Second, func() bool {
		n, _ := e.session("side-0")
		return n.State == herd.StateRunning && n.Incarnation != side.Incarnation
	})
	e.holds("the agent alive and no crash counted while its runtime is unknown", 2*time.Second, func() bool {
		return syscall.Kill(v.PID, 0) == nil && count(e.events("--session", "agent-0"), herd.EventCrashed) == 0
	})
	// The hang ends: the session is running again, the same incarnation.
	os.Remove(flag)
	// Only this test's hung calls: other tests' agents run sleeps too.
	b, _ = os.ReadFile(pids)
	for _, f := range strings.Fields(string(b)) {
		if pid, err := strconv.Atoi(f); err == nil {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	e.waitState("agent-0", herd.StateRunning, 10*time.Second)
	if n, _ := e.session("agent-0"); n.Incarnation != v.Incarnation {
		t.Errorf("expected the same incarnation after the hang, got %s (was %s)", n.Incarnation, v.Incarnation)
	}
}

// TestTmuxUnmanagedSessionReported: a herd-named tmux session with no
// record is reported (an event) and shown, never adopted or killed by the prober.
func TestTmuxUnmanagedSessionReported(t *testing.T) {
	t.Parallel()
	hasTmux(t)
	e := newEnv(t, fastRestart)
	e.start()
	e.must("run", "agent", "--", "sleep", "300")
	e.waitState("agent-0", herd.StateRunning, 10*time.Second)
	if out, err := exec.Command("tmux", "-L", e.tmuxSock, "new-session", "-d", "-s", "ghost-7", "sleep", "300").CombinedOutput(); err != nil {
		t.Fatalf("new-session: %v %s", err, out)
	}
	e.waitFor("an event about ghost-7", 5*time.Second, func() bool {
		for _, ev := range e.events("--session", "ghost-7") {
			if ev.Kind == herd.EventProbeUnknown && ev.Reason == "unmanaged" {
				return true
			}
		}
		return false
	})
	v, ok := e.session("ghost-7")
	if !ok || !v.Unmanaged {
		t.Fatalf("expected ghost-7 listed as unmanaged, got %+v", v)
	}
	if out := e.must("get", "sessions", "-o", "wide"); !strings.Contains(out, "unmanaged") {
		t.Errorf("expected -o wide to show it, got:\n%s", out)
	}
	time.Sleep(500 * time.Millisecond)
	if n := len(e.events("--session", "ghost-7")); n != 1 {
		t.Errorf("expected exactly one event, got %d", n)
	}
}
