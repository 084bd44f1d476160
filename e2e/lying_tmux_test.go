package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"herd"
	"herd/internal/runtime/tmux/tmuxfault"
)

// fakeTmux writes a tmux that runs the real one, except that while the
// file lie exists new-session prints its content instead of the pane pid,
// and while the file hang exists list-panes hangs. With the exec
// transport it refuses control mode, so every call goes through it; with
// control, the daemon's control connection goes through the fault proxy,
// set to the same faults by lieTo and hangOn. It returns the wrapper and
// both files.
func fakeTmux(t *testing.T, transport string) (f faultyTmux, lie, hang string) {
	t.Helper()
	dir := t.TempDir()
	lie, hang = filepath.Join(dir, "lie"), filepath.Join(dir, "hang")
	f = newFaultyTmux(t, transport, func(real string) string {
		return fmt.Sprintf(`for a in "$@"; do
  case "$a" in
    new-session)
      l="$(cat %[2]q 2>/dev/null)"
      if [ -n "$l" ]; then
        %[1]q "$@" >/dev/null || exit $?
        echo "$l"
        echo lie >> %[2]q.told
        exit 0
      fi ;;
    list-panes)
      while [ -f %[3]q ]; do sleep 0.05; done ;;
  esac
done`, real, lie, hang)
	})
	return f, lie, hang
}

// lieTo makes new-session answer pid, on both transports.
func (f faultyTmux) lieTo(t *testing.T, lie string, pid int) {
	t.Helper()
	os.WriteFile(lie, []byte(fmt.Sprintf("%d\n", pid)), 0o600)
	f.fault(t, fmt.Sprintf("%s %d", tmuxfault.Lie, pid))
}

// waitLied waits until a launch was answered with the lie, on either
// transport.
func (f faultyTmux) waitLied(e *env, lie string) {
	e.t.Helper()
	e.waitFor("a launch answered with the lie", 10*time.Second, func() bool {
		_, err := os.Stat(lie + ".told")
		return err == nil || tmuxfault.Injected(f.ctlLog)[tmuxfault.Lie] > 0
	})
}

// warmControl, with the control transport, starts a server (a role of
// its own) and waits for the daemon's control connection, so that what
// follows goes over it.
func (f faultyTmux) warmControl(e *env) {
	e.t.Helper()
	if !f.control {
		return
	}
	e.must("run", "warm", "--", "sleep", "300")
	e.waitState("warm-0", herd.StateRunning, 10*time.Second)
	e.waitFor("the control connection", 10*time.Second, func() bool { return len(e.controlClients()) > 0 })
}

// TestLyingRuntimeNeverGetsAStrangerKilled: regression — a tmux whose
// new-session answer named another process's pid had herd record that pid
// as the agent and later SIGTERM and SIGKILL it. A pid from a runtime's
// answer is trusted only once it carries the launch's marker: the stranger
// is never signalled, by a stop or anything else.
func TestLyingRuntimeNeverGetsAStrangerKilled(t *testing.T) {
	t.Parallel()
	for _, transport := range transports {
		t.Run(transport, func(t *testing.T) { testLyingRuntimeNeverGetsAStrangerKilled(t, transport) })
	}
}

func testLyingRuntimeNeverGetsAStrangerKilled(t *testing.T, transport string) {
	f, lie, _ := fakeTmux(t, transport)
	canary := exec.Command("sleep", "300")
	if err := canary.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { canary.Process.Kill(); canary.Wait() }()

	// A bare key first belongs to the [tmux] table newEnv starts with.
	e := newEnv(t, fmt.Sprintf("binary = %q\n", f.bin)+fastRestart)
	e.start()
	f.warmControl(e)
	f.lieTo(t, lie, canary.Process.Pid)
	e.must("run", "liar", "--", "sleep", "300")
	// The lie told and a probe round over it: before, a stop would only
	// meet a launch not yet answered (pid 0), and the test would prove
	// nothing. Well within the launch's grace (10 s), after which the
	// marked agent is adopted.
	e.waitFor("liar-0 recorded with the stranger's pid and probed", 5*time.Second, func() bool {
		v, ok := e.session("liar-0")
		return ok && v.PID == canary.Process.Pid && v.Runtime == herd.Alive
	})
	_, stderr, code := e.herd("stop", "liar-0")
	if code == 0 || !strings.Contains(stderr, "not signalled") {
		t.Errorf("expected the stop refused, nothing signalled … got %d %q", code, stderr)
	}
	e.herd("delete", "role", "liar")
	f.mustHaveInjected(t, tmuxfault.Lie)
	if err := canary.Process.Signal(syscall.Signal(0)); err != nil {
		t.Fatalf("expected the canary alive … %v", err)
	}
	st, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", canary.Process.Pid))
	if strings.Contains(string(st), ") Z ") || strings.Contains(string(st), ") T ") {
		t.Errorf("expected the canary untouched … stat %s", st)
	}
}

// TestDeathProvenWhileTmuxHangs: regression — an agent SIGKILLed while
// every tmux listing hung stayed unknown until tmux answered, though its
// pidfd had proven the death. The process axis stands on its own: the
// crash is accounted while tmux still hangs.
func TestDeathProvenWhileTmuxHangs(t *testing.T) {
	t.Parallel()
	for _, transport := range transports {
		t.Run(transport, func(t *testing.T) { testDeathProvenWhileTmuxHangs(t, transport) })
	}
}

func testDeathProvenWhileTmuxHangs(t *testing.T, transport string) {
	f, _, hang := fakeTmux(t, transport)
	e := newEnv(t, fmt.Sprintf("binary = %q\n", f.bin)+`
[restart]
initial_backoff = "30s"
`)
	e.start()
	e.must("run", "hung", "--", "sleep", "300")
	v := e.waitState("hung-0", herd.StateRunning, 10*time.Second)
	if f.control {
		e.waitFor("the control connection", 10*time.Second, func() bool { return len(e.controlClients()) > 0 })
	}
	time.Sleep(500 * time.Millisecond) // watched
	os.WriteFile(hang, nil, 0o600)
	f.fault(t, tmuxfault.Hang)
	defer os.Remove(hang)
	defer f.fault(t, "")
	start := time.Now()
	syscall.Kill(v.PID, syscall.SIGKILL)
	e.waitFor("the death accounted while tmux hangs", 10*time.Second, func() bool {
		s, ok := e.session("hung-0")
		return ok && s.State == herd.StateBackoff
	})
	took := time.Since(start)
	t.Logf("SIGKILL -> backoff with tmux hung: %s", took)
	if _, err := os.Stat(hang); err != nil {
		t.Fatal("tmux stopped hanging before the death was accounted")
	}
	if took > 2*time.Second {
		t.Errorf("expected the death accounted promptly … took %s", took)
	}
	s, _ := e.session("hung-0")
	if s.Exit == nil || s.Exit.Reason != herd.ReasonProcessGone {
		t.Errorf("expected process_gone … got %+v", s.Exit)
	}
	f.mustHaveInjected(t, tmuxfault.Hang)
}

// TestLyingLaunchAdoptedByMarker: regression — when tmux's new-session
// answer named another process, the session stayed pending for good and
// every stop (so `delete role`) was refused, leaving the agent and its
// tmux session behind. Once the launch's grace is over, the process that
// carries the launch's marker is adopted as the agent; the stranger is
// never signalled, and the role deletes cleanly.
func TestLyingLaunchAdoptedByMarker(t *testing.T) {
	t.Parallel()
	// The control connection's lie is TestLyingRuntimeNeverGetsAStrangerKilled's;
	// what follows it (the launch grace, the adoption) does not depend on
	// how the lie came, and takes 10s.
	testLyingLaunchAdoptedByMarker(t, "exec")
}

func testLyingLaunchAdoptedByMarker(t *testing.T, transport string) {
	f, lie, _ := fakeTmux(t, transport)
	canary := exec.Command("sleep", "300")
	if err := canary.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { canary.Process.Kill(); canary.Wait() }()
	e := newEnv(t, fmt.Sprintf("binary = %q\n", f.bin)+fastRestart)
	e.start()
	f.warmControl(e)
	f.lieTo(t, lie, canary.Process.Pid)
	e.must("run", "liar", "--", "sleep", "300")
	e.waitFor("liar-0 recorded", 10*time.Second, func() bool { _, ok := e.session("liar-0"); return ok })
	f.waitLied(e, lie)
	os.Remove(lie)
	f.fault(t, "")
	f.mustHaveInjected(t, tmuxfault.Lie)
	v := e.waitState("liar-0", herd.StateRunning, 20*time.Second)
	if v.PID == canary.Process.Pid {
		t.Fatalf("expected the agent adopted, not the stranger … pid %d", v.PID)
	}
	if n := count(e.events("--session", "liar-0"), herd.EventAdopted); n != 1 {
		t.Errorf("expected one adopted event … got %d", n)
	}
	e.must("delete", "role", "liar")
	e.waitFor("nothing of liar left", 5*time.Second, func() bool {
		return len(e.agentPIDs()) == len(e.tmuxSessions()) && !slices.Contains(e.tmuxSessions(), "liar-0")
	})
	st, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", canary.Process.Pid))
	if len(st) == 0 || strings.Contains(string(st), ") Z ") {
		t.Errorf("expected the stranger alive and untouched … stat %q", st)
	}
}
