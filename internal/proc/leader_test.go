package proc

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"herd"
)

// envLeaderExits turns the test binary into a process whose main thread
// exits (after a byte on stdin) while its other threads run on: its
// thread-group leader then reads 'Z' in /proc although the process lives,
// as a Go program's does for a moment when it execs from another thread.
const envLeaderExits = "HERD_TEST_LEADER_EXITS"

func init() {
	if os.Getenv(envLeaderExits) != "" {
		// main, and so TestMain, runs on the leader thread.
		runtime.LockOSThread()
	}
}

func TestMain(m *testing.M) {
	if os.Getenv(envLeaderExits) != "" {
		leaderExits()
	}
	os.Exit(m.Run())
}

// leaderExits ends the calling (main) thread alone, not the process.
func leaderExits() {
	go func() {
		for {
			time.Sleep(time.Hour)
		}
	}()
	var b [1]byte
	_, _ = os.Stdin.Read(b[:])
	unix.RawSyscall(unix.SYS_EXIT, 0, 0, 0)
}

// startLeaderExits starts the helper, records its identity, and has its
// main thread exit; it returns once /proc shows the leader as 'Z'.
func startLeaderExits(t *testing.T, boot string) (*exec.Cmd, herd.Identity, <-chan struct{}) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envLeaderExits+"=1", herd.EnvIncarnation+"=inc-leader")
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	reaped := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(reaped)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-reaped
	})
	pid := cmd.Process.Pid
	var id herd.Identity
	waitFor(t, "the helper's marker", func() bool {
		id, err = Real().Identify(pid, boot)
		return err == nil && id.Marker == "inc-leader"
	})
	if _, err := in.Write([]byte{1}); err != nil {
		t.Fatal(err)
	}
	var st Stat
	waitFor(t, "the leader thread to exit", func() bool {
		st, err = Real().Stat(pid)
		return err == nil && st.State == 'Z'
	})
	if st.NumThreads < 2 {
		t.Fatalf("expected the helper to live on in other threads, got %+v", st)
	}
	return cmd, id, reaped
}

// TestLeaderExitedIsAlive: a process whose thread-group leader has exited
// while other threads run reads 'Z' in /proc, yet it lives: it is alive to
// Check and Signal, and WaitExit waits for its real end (before, /proc's
// 'Z' was taken for an exit and WaitExit returned at once: a live tmux
// agent mid-exec was accounted dead, then killed).
func TestLeaderExitedIsAlive(t *testing.T) {
	boot := realBoot(t)
	fs := Real()
	cmd, id, reaped := startLeaderExits(t, boot)

	if got := fs.Check(id, boot); got != herd.Alive {
		t.Errorf("[leader exited] expected Check alive, got %s", got)
	}
	if err := Signal(fs, id, boot, 0); err != nil {
		t.Errorf("[leader exited] expected signal 0 delivered, got %v", err)
	}
	waits := []struct {
		name string
		wait func(context.Context, FS, herd.Identity, string) error
	}{
		{"netpoll", WaitExit},
		{"polling", waitPolling},
	}
	for _, w := range waits {
		ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
		err := w.wait(ctx, fs, id, boot)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("[%s, leader exited] expected WaitExit to wait (deadline exceeded), got %v", w.name, err)
		}
	}

	done := make(chan error, 1)
	go func() { done <- WaitExit(t.Context(), fs, id, boot) }()
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("[killed] expected WaitExit nil, got %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("[killed] expected WaitExit to return after the kill")
	}
	<-reaped
	if got := fs.Check(id, boot); got != herd.Dead {
		t.Errorf("[killed] expected Check dead, got %s", got)
	}
}

// TestWaitExitTrustsOnlyThePidfd: what /proc says of a process that lives
// never ends a wait; only its pidfd does (or pidfd_open finding no such
// pid). The fixture tree lies about a live process.
func TestWaitExitTrustsOnlyThePidfd(t *testing.T) {
	boot := realBoot(t)
	cmd, _ := startCmd(t, "inc-f", false, "sleep", "30")
	pid := cmd.Process.Pid
	real := identify(t, pid, boot)

	zombie := newFakeProc(t)
	zombie.proc(fakeStat{pid: pid, ppid: 1, comm: "sleep", state: 'Z', start: real.StartTime, marker: "inc-f"})
	absent := newFakeProc(t)
	absent.file(1, "stat", "") // the root exists; pid does not

	cases := []struct {
		name string
		fs   FS
		want error
	}{
		{"proc reads it as a zombie", zombie.fs(), context.DeadlineExceeded},
		{"proc does not list it", absent.fs(), ErrIdentityMismatch},
	}
	for _, c := range cases {
		ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
		err := WaitExit(ctx, c.fs, real, boot)
		cancel()
		if !errors.Is(err, c.want) {
			t.Errorf("[%s] expected %v, got %v", c.name, c.want, err)
		}
	}
}
