package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"herd"
)

// fakeTmux writes a tmux that runs the real one, except that while the
// file lie exists new-session prints its content instead of the pane pid,
// and while the file hang exists list-panes hangs. It refuses control
// mode, so every call goes through it. It returns the path of the script
// and of both files.
func fakeTmux(t *testing.T) (bin, lie, hang string) {
	t.Helper()
	real, err := exec.LookPath("tmux")
	if err != nil {
		t.Skip("tmux not installed")
	}
	dir := t.TempDir()
	lie, hang = filepath.Join(dir, "lie"), filepath.Join(dir, "hang")
	bin = filepath.Join(dir, "tmux")
	script := fmt.Sprintf(`#!/bin/sh
case " $* " in *" -C "*) echo "no control mode" >&2; exit 1 ;; esac
for a in "$@"; do
  case "$a" in
    new-session)
      if [ -f %[2]q ]; then
        %[1]q "$@" >/dev/null || exit $?
        cat %[2]q
        exit 0
      fi ;;
    list-panes)
      while [ -f %[3]q ]; do sleep 0.05; done ;;
  esac
done
exec %[1]q "$@"
`, real, lie, hang)
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin, lie, hang
}

// TestLyingRuntimeNeverGetsAStrangerKilled: regression — a tmux whose
// new-session answer named another process's pid had herd record that pid
// as the agent and later SIGTERM and SIGKILL it. A pid from a runtime's
// answer is trusted only once it carries the launch's marker: the stranger
// is never signalled, by a stop or anything else.
func TestLyingRuntimeNeverGetsAStrangerKilled(t *testing.T) {
	bin, lie, _ := fakeTmux(t)
	canary := exec.Command("sleep", "300")
	if err := canary.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { canary.Process.Kill(); canary.Wait() }()
	os.WriteFile(lie, []byte(fmt.Sprintf("%d\n", canary.Process.Pid)), 0o600)

	// A bare key first belongs to the [tmux] table newEnv starts with.
	e := newEnv(t, fmt.Sprintf("binary = %q\n", bin)+fastRestart)
	e.start()
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
	bin, _, hang := fakeTmux(t)
	e := newEnv(t, fmt.Sprintf("binary = %q\n", bin)+`
[restart]
initial_backoff = "30s"
`)
	e.start()
	e.must("run", "hung", "--", "sleep", "300")
	v := e.waitState("hung-0", herd.StateRunning, 10*time.Second)
	time.Sleep(500 * time.Millisecond) // watched
	os.WriteFile(hang, nil, 0o600)
	defer os.Remove(hang)
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
}

// TestLyingLaunchAdoptedByMarker: regression — when tmux's new-session
// answer named another process, the session stayed pending for good and
// every stop (so `delete role`) was refused, leaving the agent and its
// tmux session behind. Once the launch's grace is over, the process that
// carries the launch's marker is adopted as the agent; the stranger is
// never signalled, and the role deletes cleanly.
func TestLyingLaunchAdoptedByMarker(t *testing.T) {
	bin, lie, _ := fakeTmux(t)
	canary := exec.Command("sleep", "300")
	if err := canary.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { canary.Process.Kill(); canary.Wait() }()
	os.WriteFile(lie, []byte(fmt.Sprintf("%d\n", canary.Process.Pid)), 0o600)
	e := newEnv(t, fmt.Sprintf("binary = %q\n", bin)+fastRestart)
	e.start()
	e.must("run", "liar", "--", "sleep", "300")
	// The lie told (the record alone comes before new-session answers:
	// removing the file then would cut the lie short).
	e.waitFor("liar-0 recorded with the stranger's pid", 5*time.Second, func() bool {
		v, ok := e.session("liar-0")
		return ok && v.PID == canary.Process.Pid
	})
	os.Remove(lie)
	v := e.waitState("liar-0", herd.StateRunning, 20*time.Second)
	if v.PID == canary.Process.Pid {
		t.Fatalf("expected the agent adopted, not the stranger … pid %d", v.PID)
	}
	if n := count(e.events("--session", "liar-0"), herd.EventAdopted); n != 1 {
		t.Errorf("expected one adopted event … got %d", n)
	}
	e.must("delete", "role", "liar")
	e.waitFor("nothing of liar left", 5*time.Second, func() bool {
		return len(e.agentPIDs()) == 0 && len(e.tmuxSessions()) == 0
	})
	st, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", canary.Process.Pid))
	if len(st) == 0 || strings.Contains(string(st), ") Z ") {
		t.Errorf("expected the stranger alive and untouched … stat %q", st)
	}
}
