package herdtest

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// envReaper, set in the environment of a test binary started again as its
// run's reaper, names the run whose leftovers it kills.
const envReaper = "HERDTEST_REAPER"

// Main runs the tests of m and exits: for the TestMain of a package whose
// sandboxes start daemons, tmux servers and agents. At the end it checks
// that none is left (CheckLeftovers). A run that never gets there — a
// test past -timeout panics, a panic in a test, a SIGKILL — still ends
// every process it started: a reaper, this binary started again in a
// session of its own, waits for the run to exit (its end of a pipe closes
// with the run, however it ends) and then kills what carries the run's
// marker. setup, when not nil, runs first and returns its cleanup (e.g.
// building the binary under test); it returns the exit code to use when it
// fails.
func Main(m *testing.M, setup func() (cleanup func(), code int)) {
	if run := os.Getenv(envReaper); run != "" {
		os.Exit(reap(run, os.Stdin))
	}
	stop := startReaper()
	code := 0
	if setup != nil {
		var cleanup func()
		if cleanup, code = setup(); code == 0 {
			code = CheckLeftovers(m.Run())
		}
		if cleanup != nil {
			cleanup()
		}
	} else {
		code = CheckLeftovers(m.Run())
	}
	stop()
	os.Exit(code)
}

// startReaper starts this run's reaper and returns what ends it once the
// run has cleaned up after itself. A reaper that cannot start is reported
// and the run goes on: only a run that does not finish needs it.
func startReaper() (stop func()) {
	r, w, err := os.Pipe()
	if err != nil {
		fmt.Fprintln(os.Stderr, "herdtest: no reaper for this run:", err)
		return func() {}
	}
	self, err := os.Executable()
	if err != nil {
		self = os.Args[0]
	}
	cmd := exec.Command(self)
	cmd.Env = append(Scrub(os.Environ()), envReaper+"="+Run)
	cmd.Stdin = r
	cmd.Stderr = os.Stderr // only written once the run is gone
	// Its own session: a signal to the run's process group (a terminal's
	// ^C, go test's kill) leaves it to do its work.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		r.Close()
		w.Close()
		fmt.Fprintln(os.Stderr, "herdtest: no reaper for this run:", err)
		return func() {}
	}
	r.Close()
	return func() {
		w.Close() // a clean end: the reaper finds nothing and exits
		cmd.Wait()
	}
}

// reap waits until the run's end of in closes, then kills every live
// process of the run, looking again until a look finds none (a process
// can fork between a look and its kill), and returns 0, or 1 after naming
// on stderr what it killed.
func reap(run string, in io.Reader) int {
	io.Copy(io.Discard, in) // until the run exits, however it does
	killed := 0
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		left := runProcesses(run)
		if len(left) == 0 {
			break
		}
		for _, p := range left {
			if syscall.Kill(p.PID, syscall.SIGKILL) == nil {
				killed++
				fmt.Fprintf(os.Stderr, "herdtest: killed a process the run %s left: %s\n", run, p)
			}
		}
	}
	if killed > 0 {
		return 1
	}
	return 0
}
