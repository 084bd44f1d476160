package proc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"herd"
)

// Why the pidfd makes signalling safe: the process recorded as id started
// before the first check (its start time matches) and is still the holder
// of id.PID at the second check, which comes after pidfd_open. So it held
// the pid during the whole interval, and the pidfd, opened inside it, refers
// to this very process. A pidfd never follows a reused pid: once the process
// exits, signals through it fail with ESRCH instead of hitting a newcomer.

// Signal sends sig to the process recorded as id after verifying its
// identity twice, the second time while a pidfd pins the process. It
// returns an error wrapping ErrIdentityMismatch when the pid is not (or
// cannot be shown to be) the recorded process, one wrapping ErrNoProcess
// when the process is gone, and nil once the signal is sent.
func Signal(fs FS, id herd.Identity, bootID string, sig unix.Signal) error {
	pidfd, _, err := openVerified(fs, id, bootID)
	if err != nil {
		return fmt.Errorf("proc: signal %v: %w", sig, err)
	}
	defer unix.Close(pidfd)
	if err := sendPidfd(pidfd, sig, 0); err != nil {
		return fmt.Errorf("proc: signal %v to pid %d: %w", sig, id.PID, err)
	}
	return nil
}

// SignalGroup sends sig to the process group led by the process recorded
// as id, verified as in Signal. When that process does not lead its own
// group (its pgid differs from its pid), only the process is signalled.
//
// The group is signalled through the leader's pidfd with
// PIDFD_SIGNAL_PROCESS_GROUP where the kernel supports it (Linux 6.9+):
// the kernel then targets the group of that very pid, so no reused pgid
// can be hit. Older kernels get kill(-pgid) after checking, while holding
// the pidfd, that the leader has not exited; this is safe because a pgid
// is a pid number that the kernel does not hand out again while any
// process still uses it as pid, pgid or sid, and the live leader uses it.
func SignalGroup(fs FS, id herd.Identity, bootID string, sig unix.Signal) error {
	pidfd, st, err := openVerified(fs, id, bootID)
	if err != nil {
		return fmt.Errorf("proc: signal group %v: %w", sig, err)
	}
	defer unix.Close(pidfd)
	if st.PGRP != id.PID {
		if err := sendPidfd(pidfd, sig, 0); err != nil {
			return fmt.Errorf("proc: signal %v to pid %d (not a group leader): %w", sig, id.PID, err)
		}
		return nil
	}
	err = sendPidfd(pidfd, sig, unix.PIDFD_SIGNAL_PROCESS_GROUP)
	if !errors.Is(err, unix.EINVAL) {
		if err != nil {
			return fmt.Errorf("proc: signal %v to group %d: %w", sig, st.PGRP, err)
		}
		return nil
	}
	if err := killGroup(pidfd, st.PGRP, sig); err != nil {
		return fmt.Errorf("proc: signal %v to group %d: %w", sig, st.PGRP, err)
	}
	return nil
}

// killGroup signals group pgid with kill(2) after confirming, through the
// pidfd of the group leader, that the leader has not exited.
func killGroup(pidfd, pgid int, sig unix.Signal) error {
	exited, err := pidfdExited(pidfd, 0)
	if err != nil {
		return err
	}
	if exited {
		return ErrNoProcess
	}
	if err := unix.Kill(-pgid, sig); err != nil {
		if errors.Is(err, unix.ESRCH) {
			return fmt.Errorf("%w: %w", ErrNoProcess, err)
		}
		return err
	}
	return nil
}

// openVerified checks id, opens a pidfd for it and checks it again. On
// success the caller owns the pidfd and gets the stat read by the second
// check.
func openVerified(fs FS, id herd.Identity, bootID string) (int, Stat, error) {
	if _, err := fs.verify(id, bootID); err != nil {
		return -1, Stat{}, err
	}
	pidfd, err := unix.PidfdOpen(id.PID, 0)
	if err != nil {
		if errors.Is(err, unix.ESRCH) {
			return -1, Stat{}, fmt.Errorf("proc: pid %d: %w", id.PID, ErrNoProcess)
		}
		return -1, Stat{}, fmt.Errorf("proc: pidfd_open %d: %w", id.PID, err)
	}
	obs := fs.observe(id)
	if _, err := decide(id, bootID, obs); err != nil {
		unix.Close(pidfd)
		return -1, Stat{}, err
	}
	return pidfd, obs.stat, nil
}

// openWaitable opens a pidfd on the process recorded as id, to learn of
// its exit. The identity is checked before and after pidfd_open, as for a
// signal, except that whether the process has exited is never taken from
// /proc: a thread-group leader reads Z there while its process lives on
// (see Stat.Zombie), and a live agent must never be accounted dead. Its
// exit is proven by the pidfd turning readable, or here by pidfd_open
// finding no such pid: then the error wraps ErrNoProcess. A pid /proc does
// not list that pidfd_open finds is refused (nothing showed it to be the
// recorded process).
func openWaitable(fs FS, id herd.Identity, bootID string, flags int) (int, error) {
	before, err := waitable(fs, id, bootID)
	if err != nil {
		return -1, err
	}
	pidfd, err := unix.PidfdOpen(id.PID, flags)
	if err != nil {
		if errors.Is(err, unix.ESRCH) {
			return -1, fmt.Errorf("proc: pid %d: %w", id.PID, ErrNoProcess)
		}
		return -1, fmt.Errorf("proc: pidfd_open %d: %w", id.PID, err)
	}
	after, err := waitable(fs, id, bootID)
	if err == nil && !before && !after {
		err = fmt.Errorf("%w: pid %d is not in /proc, yet pidfd_open found it", ErrIdentityMismatch, id.PID)
	}
	if err != nil {
		unix.Close(pidfd)
		return -1, err
	}
	// Shown after the open, the recorded process held the pid from its
	// start until then, so the pidfd is its own. Shown only before, the
	// pidfd is its own or, had it exited in between, that of a successor
	// gone again by the second check: either way it fires once the
	// recorded process is gone, not before.
	return pidfd, nil
}

// waitable reads the identity of id for a waiter: shown is true when /proc
// shows the recorded process, alive or exited (a zombie keeps its pid and
// start time); false with no error when /proc does not list the pid. The
// error says the pid is another process, or cannot be shown to be ours.
func waitable(fs FS, id herd.Identity, bootID string) (shown bool, err error) {
	var obs observation
	if id.PID > 0 && bootID != "" && id.BootID == bootID {
		obs = fs.observe(id)
	}
	_, err = decide(id, bootID, obs)
	switch {
	case err == nil:
		return true, nil
	case !errors.Is(err, ErrNoProcess):
		return false, err
	case obs.statErr != nil:
		return false, nil // not listed
	}
	return true, nil // exited, unreaped: the pidfd says so at once
}

// sendPidfd sends sig through pidfd, mapping "already exited" to
// ErrNoProcess.
func sendPidfd(pidfd int, sig unix.Signal, flags int) error {
	err := unix.PidfdSendSignal(pidfd, sig, nil, flags)
	if errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("%w: %w", ErrNoProcess, err)
	}
	return err
}

// pidfdExited polls pidfd for up to timeoutMS milliseconds; a pidfd turns
// readable once its process has exited (it may still be a zombie).
func pidfdExited(pidfd, timeoutMS int) (bool, error) {
	fds := []unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(fds, timeoutMS)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return false, fmt.Errorf("poll pidfd: %w", err)
		}
		return n > 0 && fds[0].Revents != 0, nil
	}
}

// waitTick is how long one poll of waitPolling blocks before it looks at
// ctx.
const waitTick = 100 // milliseconds

// WaitExit blocks until the process recorded as id exits or ctx is done.
// It returns nil once the process has exited (also when it was already
// gone), an error wrapping ErrIdentityMismatch when the pid is not the
// recorded process, and ctx.Err() when ctx is done first. It notices the
// death of processes that are not herd's children at once. An exit is
// only ever reported proven: by the pidfd, or by pidfd_open finding no
// such pid, never on /proc's word (see openWaitable).
//
// The pidfd is opened non-blocking and parked on Go's netpoller: a waiter
// holds no OS thread and wakes only when its process exits or ctx ends,
// so thousands of waiters cost nothing while their processes live. A
// kernel without PIDFD_NONBLOCK (before 5.10), or a pidfd the netpoller
// cannot take, is polled on a timer instead.
func WaitExit(ctx context.Context, fs FS, id herd.Identity, bootID string) error {
	pidfd, err := openWaitable(fs, id, bootID, unix.PIDFD_NONBLOCK)
	if errors.Is(err, unix.EINVAL) {
		return waitPolling(ctx, fs, id, bootID)
	}
	if errors.Is(err, ErrNoProcess) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("proc: wait: %w", err)
	}
	f := os.NewFile(uintptr(pidfd), "pidfd")
	defer f.Close()
	if err := f.SetReadDeadline(time.Time{}); err != nil {
		// Not pollable: keep the pidfd (the identity stays pinned) and
		// poll it on a timer.
		return pollPidfd(ctx, int(f.Fd()), id)
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return fmt.Errorf("proc: wait pid %d: %w", id.PID, err)
	}
	// A deadline in the past wakes the parked read when ctx ends.
	stop := context.AfterFunc(ctx, func() { f.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()
	var pollErr error
	err = rc.Read(func(fd uintptr) bool {
		exited, err := pidfdExited(int(fd), 0)
		if err != nil {
			pollErr = err
			return true
		}
		return exited
	})
	switch {
	case pollErr != nil:
		return fmt.Errorf("proc: wait pid %d: %w", id.PID, pollErr)
	case errors.Is(err, os.ErrDeadlineExceeded) && ctx.Err() != nil:
		return ctx.Err()
	case err != nil:
		return fmt.Errorf("proc: wait pid %d: %w", id.PID, err)
	}
	return nil
}

// ParkChild blocks until this process's own child pid has exited, parked
// on the netpoller, so that a wait(2) that follows returns at once instead
// of holding an OS thread for the child's whole life. An unreaped child's
// pid cannot be reused, so the pid is identity enough. It returns an error
// when the child cannot be parked on (the caller then just waits).
func ParkChild(pid int) error {
	pidfd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	if err != nil {
		return fmt.Errorf("proc: pidfd_open %d: %w", pid, err)
	}
	f := os.NewFile(uintptr(pidfd), "pidfd")
	defer f.Close()
	rc, err := f.SyscallConn()
	if err != nil {
		return fmt.Errorf("proc: park on pid %d: %w", pid, err)
	}
	var pollErr error
	err = rc.Read(func(fd uintptr) bool {
		exited, err := pidfdExited(int(fd), 0)
		if err != nil {
			pollErr = err
			return true
		}
		return exited
	})
	if pollErr != nil {
		err = pollErr
	}
	if err != nil {
		return fmt.Errorf("proc: park on pid %d: %w", pid, err)
	}
	return nil
}

// waitPolling is WaitExit on a blocking pidfd polled every waitTick: one
// goroutine holding one OS thread per waiter, woken ten times a second.
// Only kernels without PIDFD_NONBLOCK need it.
func waitPolling(ctx context.Context, fs FS, id herd.Identity, bootID string) error {
	pidfd, err := openWaitable(fs, id, bootID, 0)
	if errors.Is(err, ErrNoProcess) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("proc: wait: %w", err)
	}
	defer unix.Close(pidfd)
	return pollPidfd(ctx, pidfd, id)
}

// pollPidfd polls pidfd every waitTick until its process exits or ctx is
// done.
func pollPidfd(ctx context.Context, pidfd int, id herd.Identity) error {
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		exited, err := pidfdExited(pidfd, waitTick)
		if err != nil {
			return fmt.Errorf("proc: wait pid %d: %w", id.PID, err)
		}
		if exited {
			return nil
		}
	}
}
