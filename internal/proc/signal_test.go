package proc

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"herd"
)

// realBoot returns the current boot id or skips the test.
func realBoot(t *testing.T) string {
	t.Helper()
	boot, err := BootID()
	if err != nil {
		t.Skipf("no boot id: %v", err)
	}
	return boot
}

// identify records the identity of pid or fails the test.
func identify(t *testing.T, pid int, boot string) herd.Identity {
	t.Helper()
	id, err := Real().Identify(pid, boot)
	if err != nil {
		t.Fatalf("identify %d: %v", pid, err)
	}
	return id
}

// isMismatch reports whether err refuses to signal for identity reasons.
func isMismatch(err error) bool { return errors.Is(err, ErrIdentityMismatch) }

func TestSignalRefusesMismatch(t *testing.T) {
	boot := realBoot(t)
	fs := Real()
	cmd, reaped := startCmd(t, "inc-a", true, "sleep", "30")
	id := identify(t, cmd.Process.Pid, boot)

	wrongStart, wrongMarker, wrongBoot := id, id, id
	wrongStart.StartTime++
	wrongMarker.Marker = "inc-b"
	wrongBoot.BootID = "earlier-boot"
	cases := []struct {
		name string
		fs   FS
		id   herd.Identity
	}{
		{"other start time", fs, wrongStart},
		{"other marker", fs, wrongMarker},
		{"other boot", fs, wrongBoot},
		{"proc unreadable", FS{Root: filepath.Join(t.TempDir(), "missing")}, id},
	}
	for _, c := range cases {
		if err := Signal(c.fs, c.id, boot, unix.SIGKILL); !isMismatch(err) {
			t.Errorf("[%s] Signal: expected ErrIdentityMismatch, got %v", c.name, err)
		}
		if err := SignalGroup(c.fs, c.id, boot, unix.SIGKILL); !isMismatch(err) {
			t.Errorf("[%s] SignalGroup: expected ErrIdentityMismatch, got %v", c.name, err)
		}
		if err := WaitExit(t.Context(), c.fs, c.id, boot); !isMismatch(err) {
			t.Errorf("[%s] WaitExit: expected ErrIdentityMismatch, got %v", c.name, err)
		}
	}
	select {
	case <-reaped:
		t.Fatal("expected the process to survive refused signals, it exited")
	default:
	}
	if got := fs.Check(id, boot); got != herd.Alive {
		t.Fatalf("expected the process alive after refused signals, got %s", got)
	}

	// The right identity is signalled.
	if err := Signal(fs, id, boot, unix.SIGTERM); err != nil {
		t.Fatalf("signal: %v", err)
	}
	select {
	case <-reaped:
	case <-time.After(10 * time.Second):
		t.Fatal("expected the process to exit after SIGTERM")
	}
	if err := Signal(fs, id, boot, unix.SIGTERM); !isNoProcess(err) {
		t.Errorf("[gone] expected ErrNoProcess, got %v", err)
	}
}

func TestSignalGroupReal(t *testing.T) {
	boot := realBoot(t)
	fs := Real()
	cmd, reaped := startCmd(t, "inc-g", true, "sh", "-c", "sleep 60 & sleep 60")
	leader := cmd.Process.Pid

	var kids []int
	waitFor(t, "two sleeps under sh", func() bool {
		var err error
		kids, err = fs.Children(leader)
		if err != nil || len(kids) != 2 {
			return false
		}
		for _, k := range kids {
			if st, err := fs.Stat(k); err != nil || st.Comm != "sleep" {
				return false
			}
		}
		return true
	})
	leaderID := identify(t, leader, boot)
	ids := []herd.Identity{identify(t, kids[0], boot), identify(t, kids[1], boot)}

	if err := SignalGroup(fs, leaderID, boot, unix.SIGTERM); err != nil {
		t.Fatalf("signal group: %v", err)
	}
	select {
	case <-reaped:
	case <-time.After(10 * time.Second):
		t.Fatal("expected the group leader to exit")
	}
	// The sleeps are not our children; once orphaned they are dead or
	// zombies, both of which Check reports as dead.
	for _, id := range ids {
		waitFor(t, "sleep to die", func() bool { return fs.Check(id, boot) == herd.Dead })
	}
}

func TestSignalGroupNotLeader(t *testing.T) {
	boot := realBoot(t)
	fs := Real()
	cmd, reaped := startCmd(t, "inc-n", true, "sh", "-c", "sleep 60 & exec sleep 61")
	leader := cmd.Process.Pid

	var bg int
	waitFor(t, "background sleep", func() bool {
		kids, err := fs.Children(leader)
		if err != nil || len(kids) != 1 {
			return false
		}
		st, err := fs.Stat(kids[0])
		bg = kids[0]
		return err == nil && st.Comm == "sleep"
	})
	// Wait until the shell has exec'd, so its comm is final.
	waitFor(t, "exec of sleep 61", func() bool {
		argv, err := fs.Cmdline(leader)
		return err == nil && len(argv) == 2 && argv[1] == "61"
	})
	bgID := identify(t, bg, boot)
	leaderID := identify(t, leader, boot)

	// bg is in the leader's group but leads none: only bg may be signalled.
	if err := SignalGroup(fs, bgID, boot, unix.SIGTERM); err != nil {
		t.Fatalf("signal: %v", err)
	}
	waitFor(t, "background sleep to die", func() bool { return fs.Check(bgID, boot) == herd.Dead })
	select {
	case <-reaped:
		t.Fatal("expected the group leader to survive, it exited")
	default:
	}
	if got := fs.Check(leaderID, boot); got != herd.Alive {
		t.Errorf("expected the group leader alive, got %s", got)
	}
}

// TestKillGroupFallback covers the kill(-pgid) path used on kernels
// without PIDFD_SIGNAL_PROCESS_GROUP.
func TestKillGroupFallback(t *testing.T) {
	boot := realBoot(t)
	fs := Real()
	cmd, reaped := startCmd(t, "inc-f", true, "sh", "-c", "sleep 60 & sleep 60")
	leader := cmd.Process.Pid
	var kids []int
	waitFor(t, "two children", func() bool {
		var err error
		kids, err = fs.Children(leader)
		return err == nil && len(kids) == 2
	})
	ids := []herd.Identity{identify(t, kids[0], boot), identify(t, kids[1], boot)}

	pidfd, st, err := openVerified(fs, identify(t, leader, boot), boot)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	defer unix.Close(pidfd)
	if st.PGRP != leader {
		t.Fatalf("expected pgid %d, got %d", leader, st.PGRP)
	}
	if err := killGroup(pidfd, st.PGRP, unix.SIGTERM); err != nil {
		t.Fatalf("kill group: %v", err)
	}
	<-reaped
	for _, id := range ids {
		waitFor(t, "sleep to die", func() bool { return fs.Check(id, boot) == herd.Dead })
	}
	// The leader has exited: the pidfd is readable, so the group is not
	// signalled again.
	if err := killGroup(pidfd, st.PGRP, unix.SIGTERM); !isNoProcess(err) {
		t.Errorf("[leader gone] expected ErrNoProcess, got %v", err)
	}
}

func TestWaitExitReal(t *testing.T) {
	waits := []struct {
		name string
		wait func(context.Context, FS, herd.Identity, string) error
	}{
		{"netpoll", WaitExit},
		{"polling", waitPolling},
	}
	for _, w := range waits {
		t.Run(w.name, func(t *testing.T) { testWaitExit(t, w.wait) })
	}
}

func testWaitExit(t *testing.T, waitExit func(context.Context, FS, herd.Identity, string) error) {
	boot := realBoot(t)
	fs := Real()
	cmd, _ := startCmd(t, "inc-w", false, "sleep", "30")
	id := identify(t, cmd.Process.Pid, boot)

	// Cancellation is honoured while the process lives.
	ctx, cancel := context.WithTimeout(t.Context(), 150*time.Millisecond)
	defer cancel()
	if err := waitExit(ctx, fs, id, boot); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("[cancelled] expected deadline exceeded, got %v", err)
	}

	done := make(chan error, 1)
	go func() { done <- waitExit(t.Context(), fs, id, boot) }()
	// Make sure WaitExit is blocked in its poll loop before the kill.
	select {
	case err := <-done:
		t.Fatalf("expected WaitExit to block while the process lives, got %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	killed := time.Now()
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("expected nil after exit, got %v", err)
		}
		if d := time.Since(killed); d > time.Second {
			t.Errorf("expected WaitExit to return within 1s of the kill, took %v", d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("expected WaitExit to return after the kill")
	}

	// Already gone: returns at once.
	if err := waitExit(t.Context(), fs, id, boot); err != nil {
		t.Errorf("[gone] expected nil, got %v", err)
	}
}

// TestParkChild returns once the child exits, after which its wait(2)
// does not block.
func TestParkChild(t *testing.T) {
	cmd, _ := startCmd(t, "inc-p", false, "sleep", "0.2")
	start := time.Now()
	if err := ParkChild(cmd.Process.Pid); err != nil {
		t.Fatalf("park: %v", err)
	}
	if d := time.Since(start); d < 100*time.Millisecond {
		t.Errorf("expected ParkChild to block while the child lives, returned after %v", d)
	}
}
