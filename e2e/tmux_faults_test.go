package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"herd"
	"herd/internal/api"
	"herd/internal/runtime/tmux/tmuxfault"
)

// The test binary is also the fault proxy that a faulty tmux wrapper runs
// in front of `tmux -C`.
func init() { tmuxfault.RunIfProxy() }

// transports are the two ways the daemon talks to tmux that fault tests
// cover: a tmux process per call (control mode refused), and the
// control connection production uses, faulted through the proxy.
var transports = []string{"exec", "control"}

// faultyTmux is a tmux wrapper for fault tests.
type faultyTmux struct {
	bin     string // the wrapper, for [tmux] binary
	control bool   // -C goes through the fault proxy; else it is refused
	ctlMode string // the proxy's mode file (tmuxfault kinds)
	ctlLog  string // the proxy's fault log
}

// newFaultyTmux installs a wrapper whose per-call invocations run perCall
// (a shell snippet given the real tmux's path, may return "") before the
// real tmux, and whose -C invocations go through the fault proxy when
// transport is "control", else are refused.
func newFaultyTmux(t *testing.T, transport string, perCall func(real string) string) faultyTmux {
	t.Helper()
	real, err := exec.LookPath("tmux")
	if err != nil {
		t.Skip("tmux not installed")
	}
	f := faultyTmux{control: transport == "control"}
	self := ""
	if f.control {
		if self, err = os.Executable(); err != nil {
			t.Fatal(err)
		}
	}
	before := ""
	if perCall != nil {
		before = perCall(real)
	}
	f.bin, f.ctlMode, f.ctlLog, err = tmuxfault.Install(t.TempDir(), real, self, before)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// fault sets the proxy's fault (a tmuxfault kind and its argument; ""
// clears it). Without the control transport it does nothing.
func (f faultyTmux) fault(t *testing.T, mode string) {
	t.Helper()
	if !f.control {
		return
	}
	if mode == "" {
		os.Remove(f.ctlMode)
		return
	}
	if err := os.WriteFile(f.ctlMode, []byte(mode), 0o600); err != nil {
		t.Fatal(err)
	}
}

// mustHaveInjected fails t when the control transport is on and the
// proxy injected no fault of kind: the test would have tested nothing
// on the control connection.
func (f faultyTmux) mustHaveInjected(t *testing.T, kind string) {
	t.Helper()
	if !f.control {
		return
	}
	got := tmuxfault.Injected(f.ctlLog)
	t.Logf("faults injected on the control connection: %v", got)
	if got[kind] == 0 {
		t.Errorf("expected %s faults injected on the control connection … got none: it was not tested", kind)
	}
}

// TestControlConnectionFaults: the daemon's control connection answers
// garbled, cut, empty, crossed, late, missing or no answers, or its client
// dies mid-answer, each fault for three call timeouts while two agents
// run: no agent is killed, no crash is accounted, no event says one
// stopped; once the fault ends the agents read running in the same
// incarnations, over a control connection again.
func TestControlConnectionFaults(t *testing.T) {
	f := newFaultyTmux(t, "control", nil)
	e := newEnv(t, fmt.Sprintf("binary = %q\n", f.bin)+"[probe]\ninterval = \"200ms\"\ntimeout = \"500ms\"\n"+fastRestart)
	e.start()
	e.must("run", "agent", "--replicas", "2", "--", "sleep", "300")
	want := map[string]api.SessionView{}
	for _, n := range []string{"agent-0", "agent-1"} {
		want[n] = e.waitState(n, herd.StateRunning, 10*time.Second)
	}
	connected := func() bool { return len(e.controlClients()) > 0 }
	e.waitFor("the control connection", 10*time.Second, connected)
	for _, mode := range []string{
		tmuxfault.Garble, tmuxfault.Truncate, tmuxfault.Empty, tmuxfault.Reorder,
		tmuxfault.Delay + " 1s", tmuxfault.Drop, tmuxfault.Hang, tmuxfault.Crash,
	} {
		kind := strings.Fields(mode)[0]
		f.fault(t, mode)
		start := time.Now()
		// Calls from the CLI beside the daemon's own, so answers can cross.
		var wg sync.WaitGroup
		for range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for time.Since(start) < 1500*time.Millisecond {
					e.herd("inject", "agent-1", "x", "--no-enter")
				}
			}()
		}
		for time.Since(start) < 1500*time.Millisecond {
			for n, v := range want {
				if syscall.Kill(v.PID, 0) != nil {
					t.Fatalf("[%s] %s's agent was killed", mode, n)
				}
			}
			time.Sleep(100 * time.Millisecond)
		}
		wg.Wait()
		f.fault(t, "")
		for n, v := range want {
			e.waitState(n, herd.StateRunning, 10*time.Second)
			if s, _ := e.session(n); s.Incarnation != v.Incarnation {
				t.Errorf("[%s] expected %s in the same incarnation … got %s (was %s)", mode, n, s.Incarnation, v.Incarnation)
			}
		}
		e.waitFor("the control connection back after "+mode, 10*time.Second, connected)
		if got := tmuxfault.Injected(f.ctlLog)[kind]; got == 0 {
			t.Errorf("[%s] expected faults injected … got none", mode)
		}
	}
	t.Logf("faults injected on the control connection: %v", tmuxfault.Injected(f.ctlLog))
	for _, kind := range []string{herd.EventCrashed, herd.EventKilled, herd.EventStopped, herd.EventExited} {
		if evs := e.events("--kind", kind); count(evs, kind) != 0 {
			t.Errorf("expected no %s event … got %+v", kind, evs)
		}
	}
	// The supervisor still works over the connection: a death is seen and
	// relaunched.
	v := want["agent-0"]
	syscall.Kill(v.PID, syscall.SIGKILL)
	e.waitFor("agent-0 relaunched", 10*time.Second, func() bool {
		n, _ := e.session("agent-0")
		return n.State == herd.StateRunning && n.Incarnation != v.Incarnation
	})
}
