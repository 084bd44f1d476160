package bench

import (
	"time"

	"golang.org/x/sys/unix"
)

// exitWatch starts watching pid through a pidfd of the benchmark's own
// and returns a function that waits (up to limit) for the process to have
// exited and returns when it was first seen exited (zero when it was
// not): the earliest any observer, herd included, could know of the
// death. On a loaded machine the killed process itself waits for a CPU to
// run its exit, and that share of a SIGKILL -> crashed figure is the
// machine's, not herd's.
func exitWatch(pid int, limit time.Duration) func() time.Time {
	done := make(chan time.Time, 1)
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		done <- time.Time{}
		return func() time.Time { return <-done }
	}
	go func() {
		defer unix.Close(fd)
		deadline := time.Now().Add(limit)
		for {
			fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
			n, err := unix.Poll(fds, int(time.Until(deadline).Milliseconds()))
			if err == unix.EINTR && time.Now().Before(deadline) {
				continue
			}
			if err != nil || n == 0 {
				done <- time.Time{}
				return
			}
			done <- time.Now()
			return
		}
	}()
	return func() time.Time { return <-done }
}
