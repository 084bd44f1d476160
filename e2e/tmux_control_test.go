package e2e

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"herd"
	"herd/internal/api"
	"herd/internal/runtime/tmux"
)

// controlClients lists the live tmux control-mode clients on e's socket.
func (e *env) controlClients() []int {
	entries, _ := os.ReadDir("/proc")
	want := []byte("\x00-L\x00" + e.tmuxSock + "\x00")
	var out []int
	for _, en := range entries {
		pid, err := strconv.Atoi(en.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err == nil && bytes.Contains(b, want) && bytes.Contains(b, []byte("\x00-C\x00")) {
			out = append(out, pid)
		}
	}
	return out
}

// allTmuxSessions lists every session on e's server, the control one too;
// nil when no server runs.
func (e *env) allTmuxSessions() []string {
	out, err := exec.Command("tmux", "-L", e.tmuxSock, "list-sessions", "-F", "#{session_name}").Output()
	if err != nil {
		return nil
	}
	return strings.Fields(string(out))
}

// TestTmuxControlConnection: the daemon talks to its tmux server over one
// control-mode client, attached to a session of its own that no listing,
// event or reaper sees; a killed agent is still seen and relaunched; the
// server outlives its last agent session only while the daemon runs, and
// the daemon's exit removes the control session and client.
func TestTmuxControlConnection(t *testing.T) {
	hasTmux(t)
	e := newEnv(t, fastRestart)
	e.start()
	e.must("run", "agent", "--replicas", "3", "--", "sleep", "300")
	var v api.SessionView
	for _, n := range []string{"agent-0", "agent-1", "agent-2"} {
		v = e.waitState(n, herd.StateRunning, 10*time.Second)
	}
	e.waitFor("one control client", 10*time.Second, func() bool { return len(e.controlClients()) == 1 })
	if got := e.allTmuxSessions(); !slices.Contains(got, tmux.ControlSession) || len(got) != 4 {
		t.Errorf("expected the three agents and %s … got %q", tmux.ControlSession, got)
	}
	if n := len(e.sessions()); n != 3 {
		t.Errorf("expected 3 sessions … got %d", n)
	}
	// A death over the connection: seen, accounted, relaunched.
	syscall.Kill(v.PID, syscall.SIGKILL)
	e.waitFor("agent-2 relaunched", 10*time.Second, func() bool {
		n, _ := e.session("agent-2")
		return n.State == herd.StateRunning && n.Incarnation != v.Incarnation
	})
	if evs := e.events("--session", "agent-2", "--kind", herd.EventCrashed); count(evs, herd.EventCrashed) != 1 {
		t.Errorf("expected one crash … got %+v", evs)
	}
	for _, ev := range e.events("--kind", herd.EventProbeUnknown) {
		t.Errorf("expected no probe_unknown event … got %+v", ev)
	}
	e.must("delete", "role", "agent")
	e.waitFor("the agents' sessions gone", 10*time.Second, func() bool { return len(e.tmuxSessions()) == 0 })
	if got := e.allTmuxSessions(); !slices.Equal(got, []string{tmux.ControlSession}) {
		t.Errorf("expected the server running with the control session alone … got %q", got)
	}
	if out := e.must("reap", "--dry-run"); strings.Contains(out, tmux.ControlSession) {
		t.Errorf("expected the reaper not to see the control session … got %q", out)
	}
	e.kill(syscall.SIGTERM)
	e.waitFor("the control client gone", 5*time.Second, func() bool { return len(e.controlClients()) == 0 })
	e.waitFor("the server gone with its last session", 5*time.Second, func() bool { return e.allTmuxSessions() == nil })
}

// TestTmuxServerWedgedUnderControl: the tmux server stops answering
// (SIGSTOP) while the daemon is connected to it: its sessions read
// unknown, nothing is killed, the CLI and the exec runtime go on; once the
// server answers again the session is running in the same incarnation,
// over a new connection.
func TestTmuxServerWedgedUnderControl(t *testing.T) {
	hasTmux(t)
	e := newEnv(t, "[probe]\ninterval = \"200ms\"\ntimeout = \"500ms\"\n"+fastRestart+"\n")
	e.start()
	e.must("run", "agent", "--", "sleep", "300")
	e.must("run", "side", "--runtime", "exec", "--", "sleep", "300")
	v := e.waitState("agent-0", herd.StateRunning, 10*time.Second)
	side := e.waitState("side-0", herd.StateRunning, 10*time.Second)
	e.waitFor("one control client", 10*time.Second, func() bool { return len(e.controlClients()) == 1 })
	first := e.controlClients()[0]
	out, err := exec.Command("tmux", "-L", e.tmuxSock, "display-message", "-p", "#{pid}").Output()
	if err != nil {
		t.Fatal(err)
	}
	server, _ := strconv.Atoi(strings.TrimSpace(string(out)))
	if err := syscall.Kill(server, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	wedged := time.Now()
	stopped := true
	t.Cleanup(func() {
		if stopped {
			syscall.Kill(server, syscall.SIGCONT)
		}
	})
	e.waitState("agent-0", herd.StateUnknown, 5*time.Second)
	start := time.Now()
	e.must("get", "sessions")
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("expected get sessions to answer at once while tmux is wedged … took %v", d)
	}
	syscall.Kill(side.PID, syscall.SIGKILL)
	e.waitFor("side-0 relaunched while tmux is wedged", 5*time.Second, func() bool {
		n, _ := e.session("side-0")
		return n.State == herd.StateRunning && n.Incarnation != side.Incarnation
	})
	if syscall.Kill(v.PID, 0) != nil {
		t.Fatal("the agent was killed while its runtime was unknown")
	}
	// The wedge outlasts a call's timeout (probe.timeout, 500ms) three
	// times over, so a call over the connection has timed out and the
	// connection is gone: a slow run must not end it before then.
	e.waitFor("the wedge outlasting a call's timeout", 5*time.Second, func() bool { return time.Since(wedged) > 1500*time.Millisecond })
	// A call that goes over the connection (send-keys) while the server
	// is wedged: it times out, and the connection goes. The prober's
	// quiet rounds alone (a pidfd watches the agent; the listing runs
	// every fifth round) need not have made one.
	if _, _, code := e.herd("inject", "agent-0", "--no-enter", "x"); code == 0 {
		t.Errorf("expected the inject into a wedged tmux server to fail")
	}
	syscall.Kill(server, syscall.SIGCONT)
	stopped = false
	e.waitState("agent-0", herd.StateRunning, 10*time.Second)
	if n, _ := e.session("agent-0"); n.Incarnation != v.Incarnation {
		t.Errorf("expected the same incarnation after the wedge … got %s (was %s)", n.Incarnation, v.Incarnation)
	}
	if n := count(e.events("--session", "agent-0"), herd.EventCrashed); n != 0 {
		t.Errorf("expected no crash … got %d", n)
	}
	e.waitFor("a new control client", 15*time.Second, func() bool {
		c := e.controlClients()
		return len(c) == 1 && c[0] != first
	})
}
