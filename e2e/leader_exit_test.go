package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"herd"
	"herd/internal/proc"
)

// envLeaderExits makes the test binary an agent whose main thread exits
// once the file it names exists, while its other threads run on: its
// thread-group leader then reads 'Z' in /proc although the agent lives,
// as a Go agent's does for a moment when it execs from another thread
// (herd's own cgexec in front of every tmux agent does). Before it waits,
// it appends "pid start-time" to the file named by envLeaderPIDs.
const (
	envLeaderExits = "HERD_E2E_LEADER_EXITS"
	envLeaderPIDs  = "HERD_E2E_LEADER_PIDS"
)

func init() {
	// Package init runs on the main thread (the runtime locks it there).
	file := os.Getenv(envLeaderExits)
	if file == "" {
		return
	}
	st, err := proc.Real().Stat(os.Getpid())
	if err != nil {
		os.Exit(3)
	}
	if f, err := os.OpenFile(os.Getenv(envLeaderPIDs), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600); err == nil {
		fmt.Fprintf(f, "%d %d\n", st.PID, st.StartTime)
		f.Close()
	}
	go func() {
		for {
			time.Sleep(time.Hour)
		}
	}()
	for {
		if _, err := os.Stat(file); err == nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	unix.RawSyscall(unix.SYS_EXIT, 0, 0, 0) // this thread alone
}

// TestLiveAgentWithExitedLeaderAdopted: regression — an agent whose
// thread-group leader has exited while its other threads run is alive,
// and a restarted daemon adopts it once and leaves it running. Before,
// /proc's 'Z' was read as its exit: the tmux watcher reported a death the
// pane never confirmed, accounted 2 s later as "its pidfd fired; tmux did
// not report its pane", and the exec prober accounted it at once; either
// way the live agent was killed and relaunched. Its SIGKILL is still one
// crash.
func TestLiveAgentWithExitedLeaderAdopted(t *testing.T) {
	t.Parallel()
	for _, rt := range []string{herd.RuntimeTmux, herd.RuntimeExec} {
		t.Run(rt, func(t *testing.T) {
			if rt == herd.RuntimeTmux {
				hasTmux(t)
			}
			testExitedLeader(t, rt)
		})
	}
}

func testExitedLeader(t *testing.T, rt string) {
	boot, err := proc.BootID()
	if err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// Registered before the env's cleanup, so run after it: once the
	// daemon is gone, nothing relaunches an agent after this kill.
	pidsFile := filepath.Join(t.TempDir(), "leader-pids")
	t.Cleanup(func() { killLeaderAgents(pidsFile, boot) })
	e := newEnv(t, fastRestart)
	exitFile := filepath.Join(e.dir, "leader-exit")
	roles := filepath.Join(e.dir, "roles.toml")
	os.WriteFile(roles, []byte(fmt.Sprintf(`
[[role]]
name = "lead"
command = [%q, "-test.run=^$"]
runtime = %q
env = { %s = %q, %s = %q }
`, self, rt, envLeaderExits, exitFile, envLeaderPIDs, pidsFile)), 0o600)
	e.start()
	e.must("apply", "-f", roles)
	v := e.waitState("lead-0", herd.StateRunning, 20*time.Second)

	// The agent was identified with its marker; now its main thread exits.
	if err := os.WriteFile(exitFile, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	e.waitFor("the agent's leader thread to exit", 10*time.Second, func() bool {
		st, err := proc.Real().Stat(v.PID)
		return err == nil && st.State == 'Z'
	})
	if st, _ := proc.Real().Stat(v.PID); st.NumThreads < 2 {
		t.Fatalf("expected the agent to live on in other threads, got %+v", st)
	}

	e.kill(syscall.SIGTERM)
	e.start()
	e.waitFor("lead-0 adopted (or accounted dead)", 20*time.Second, func() bool {
		evs := e.events("--session", "lead-0")
		return count(evs, herd.EventAdopted) >= 1 || count(evs, herd.EventCrashed) >= 1
	})
	// A wrongful death came within 2 s of the adoption (tmux) or at once
	// (exec): watch the agent well past that.
	deadline := time.Now().Add(4 * time.Second)
	for time.Now().Before(deadline) {
		n, ok := e.session("lead-0")
		if crashed := e.events("--session", "lead-0", "--kind", herd.EventCrashed); len(crashed) > 0 {
			t.Fatalf("expected the live agent never accounted dead, got %s: %s", crashed[0].Reason, crashed[0].Message)
		}
		if !ok || n.State != herd.StateRunning || n.PID != v.PID || n.Restarts != 0 {
			t.Fatalf("expected lead-0 left running as pid %d, got %s pid %d, %d restart(s), exit %+v", v.PID, n.State, n.PID, n.Restarts, n.Exit)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if got := count(e.events("--session", "lead-0"), herd.EventAdopted); got != 1 {
		t.Errorf("expected one adopted event, got %d", got)
	}

	if err := syscall.Kill(v.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	e.waitFor("lead-0 crashed", 15*time.Second, func() bool {
		return count(e.events("--session", "lead-0"), herd.EventCrashed) == 1
	})
	for _, ev := range e.events("--session", "lead-0", "--kind", herd.EventCrashed) {
		if strings.Contains(ev.Message, "tmux did not report its pane") {
			t.Errorf("expected the crash read from the pane or the process, got %q", ev.Message)
		}
	}
}

// killLeaderAgents ends the agents the helper recorded, each verified by
// its pid and start time (their environment cannot be read once their
// leader exited, so the harness's sweep by environment misses them).
func killLeaderAgents(pidsFile, boot string) {
	b, _ := os.ReadFile(pidsFile)
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Fields(line)
		if len(f) != 2 {
			continue
		}
		pid, _ := strconv.Atoi(f[0])
		start, _ := strconv.ParseUint(f[1], 10, 64)
		_ = proc.Signal(proc.Real(), herd.Identity{BootID: boot, PID: pid, StartTime: start}, boot, unix.SIGKILL)
	}
}
