package e2e

import (
	"os"
	"os/exec"
	"testing"

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
