package herdtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
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

// undoFile is where a run lists what its reaper undoes when the run does
// not finish (OnUnfinished): a JSON argv a line.
func undoFile(run string) string { return filepath.Join(os.TempDir(), "herdtest-"+run+".undo") }

// OnUnfinished has the run's reaper run argv (with a timeout, no shell)
// if the run does not finish: for what a test makes outside any process
// and removes in its own cleanup, which an unfinished run never gets to
// (a network namespace, a veth pair). A run that finishes runs none.
func OnUnfinished(tb testing.TB, argv ...string) {
	tb.Helper()
	line, err := json.Marshal(argv)
	if err != nil {
		tb.Fatal(err)
	}
	undoMu.Lock()
	defer undoMu.Unlock()
	f, err := os.OpenFile(undoFile(Run), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		tb.Fatalf("herdtest: %v", err)
	}
	defer f.Close()
	if _, err := f.Write(append(line, '\n')); err != nil {
		tb.Fatalf("herdtest: %v", err)
	}
}

// undoMu serializes the writes of parallel tests to the undo file.
var undoMu sync.Mutex

// undo runs what run listed to undo (OnUnfinished), and removes the list.
func undo(run string) {
	path := undoFile(run)
	b, err := os.ReadFile(path)
	if err != nil {
		return
	}
	defer os.Remove(path)
	for line := range strings.Lines(string(b)) {
		var argv []string
		if json.Unmarshal([]byte(line), &argv) != nil || len(argv) == 0 {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		out, err := exec.CommandContext(ctx, argv[0], argv[1:]...).CombinedOutput()
		cancel()
		fmt.Fprintf(os.Stderr, "herdtest: undid for the run %s: %s (%v) %s\n", run, strings.Join(argv, " "), err, bytes.TrimSpace(out))
	}
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
		// A clean end: nothing to undo (each test's cleanup did), and the
		// reaper finds nothing and exits.
		os.Remove(undoFile(Run))
		w.Close()
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
	undo(run)
	if killed > 0 {
		return 1
	}
	return 0
}
