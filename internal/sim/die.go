package sim

import (
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// parseSignal accepts SEGV, SIGSEGV, segv or 11.
func parseSignal(name string) (syscall.Signal, error) {
	s := strings.ToUpper(strings.TrimSpace(name))
	if n, err := strconv.Atoi(s); err == nil {
		if n < 1 || n > 64 {
			return 0, fmt.Errorf("sim: signal %d out of range", n)
		}
		return syscall.Signal(n), nil
	}
	if !strings.HasPrefix(s, "SIG") {
		s = "SIG" + s
	}
	if sig := unix.SignalNum(s); sig != 0 {
		return sig, nil
	}
	return 0, fmt.Errorf("sim: unknown signal %q", name)
}

// raise sends sig to this process with the kernel's default action in
// place, so a parent's wait status shows death by sig (SIGSEGV shows as
// signal 11, not as a Go panic exit). The Go runtime handles SEGV, ABRT,
// QUIT, ... itself and exits with status 2, and signal.Reset only restores
// that runtime handler; so the action is set to SIG_DFL with rt_sigaction
// directly. Core dumps are disabled first: a simulated crash must not leave
// core files behind. For signals whose default action is to ignore or
// stop, raise returns and the process goes on, as a real one would.
func raise(sig syscall.Signal) {
	signal.Reset(sig)
	_ = unix.Setrlimit(unix.RLIMIT_CORE, &unix.Rlimit{})
	setDefaultAction(sig)
	_ = unix.Kill(os.Getpid(), sig)
}

// setDefaultAction sets the action of sig to SIG_DFL. The kernel's struct
// sigaction is all zeros for SIG_DFL with no flags and an empty mask,
// whatever its layout; the buffer is larger than any architecture's.
// Errors (SIGKILL and SIGSTOP cannot be changed) are ignored.
func setDefaultAction(sig syscall.Signal) {
	var act [16]uint64
	for _, setSize := range []uintptr{8, 16} { // sizeof(sigset_t): 8 on most architectures, 16 on mips
		_, _, errno := unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(sig),
			uintptr(unsafe.Pointer(&act)), 0, setSize, 0, 0)
		if errno != unix.EINVAL {
			return
		}
	}
}
