package herdtest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestMain(m *testing.M) { Main(m, nil) }

// envPanicHelper makes TestReaperHelper start a process of its run, write
// its pid to the file named, and panic.
const envPanicHelper = "HERDTEST_PANIC_HELPER"

// TestReaperHelper is the run that does not finish, for
// TestReaperEndsAnUnfinishedRun.
func TestReaperHelper(t *testing.T) {
	file := os.Getenv(envPanicHelper)
	if file == "" {
		t.Skip("the run TestReaperEndsAnUnfinishedRun starts")
	}
	OnUnfinished(t, "rm", "-f", file+".left")
	if err := os.WriteFile(file+".left", nil, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sleep", "300")
	cmd.Env = append(os.Environ(), EnvSandbox+"="+Run+"/1")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte(strconv.Itoa(cmd.Process.Pid)), 0o600); err != nil {
		t.Fatal(err)
	}
	panic("a test that panics: the run ends without its cleanups")
}

// TestReaperEndsAnUnfinishedRun: a run that panics (as one past -timeout
// does) runs no cleanup; its reaper still kills what it started.
func TestReaperEndsAnUnfinishedRun(t *testing.T) {
	file := filepath.Join(t.TempDir(), "pid")
	cmd := exec.Command(os.Args[0], "-test.run=^TestReaperHelper$", "-test.count=1")
	cmd.Env = append(os.Environ(), envPanicHelper+"="+file)
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "a test that panics") {
		t.Fatalf("expected the helper run to panic, got %v:\n%s", err, out)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("the helper run started nothing: %v\n%s", err, out)
	}
	pid, _ := strconv.Atoi(string(b))
	WaitFor(t, fmt.Sprintf("pid %d, left by the run, to be killed", pid), 10*time.Second, func() bool {
		// Not our child: once killed it is reaped by init, and gone.
		return syscall.Kill(pid, 0) == syscall.ESRCH
	})
	// What the run listed to undo is undone (a file here; a network
	// namespace in the partition test).
	WaitFor(t, "the run's undo list run", 10*time.Second, func() bool {
		_, err := os.Stat(file + ".left")
		return os.IsNotExist(err)
	})
}

// TestUndoRunsTheList: what a run listed is run, a line that is not an
// argv is skipped, and the list is removed.
func TestUndoRunsTheList(t *testing.T) {
	run := Run + "u"
	path := undoFile(run)
	t.Cleanup(func() { os.Remove(path) })
	left := filepath.Join(t.TempDir(), "left")
	if err := os.WriteFile(left, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(`["rm","-f","`+left+`"]`+"\n"+"garbage\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	undo(run)
	if _, err := os.Stat(left); !os.IsNotExist(err) {
		t.Errorf("expected the listed command run, got %v", err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("expected the list removed, got %v", err)
	}
}

func TestReapKillsTheRunsProcesses(t *testing.T) {
	run := Run + "x"
	mine := exec.Command("sleep", "300")
	mine.Env = append(os.Environ(), EnvSandbox+"="+run+"/7")
	other := exec.Command("sleep", "300")
	other.Env = append(os.Environ(), EnvSandbox+"="+run+"y/7") // another run's
	for _, c := range []*exec.Cmd{mine, other} {
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Process.Kill(); c.Wait() })
	}
	// Until the environment of the new program is there, the marker
	// cannot be seen (see the proc package's awaitExec).
	WaitFor(t, "the marked process's environment", 5*time.Second, func() bool { return len(runProcesses(run)) == 1 })
	if code := reap(run, strings.NewReader("")); code != 1 {
		t.Errorf("expected exit 1 after a kill, got %d", code)
	}
	if err := mine.Wait(); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Errorf("expected the run's process killed, got %v", err)
	}
	if err := other.Process.Signal(syscall.Signal(0)); err != nil {
		t.Errorf("expected another run's process untouched, got %v", err)
	}
	if code := reap(run, strings.NewReader("")); code != 0 {
		t.Errorf("expected exit 0 with nothing left, got %d", code)
	}
}
