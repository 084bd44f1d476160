package proc

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
)

func TestParseExe(t *testing.T) {
	cases := []struct {
		target, path string
		deleted      bool
	}{
		{"/usr/bin/claude", "/usr/bin/claude", false},
		{"/usr/bin/claude (deleted)", "/usr/bin/claude", true},
		{"/opt/my (deleted) dir/agent", "/opt/my (deleted) dir/agent", false},
		{"", "", false},
	}
	for _, c := range cases {
		p, d := ParseExe(c.target)
		if p != c.path || d != c.deleted {
			t.Errorf("[%q] expected (%q, %v), got (%q, %v)", c.target, c.path, c.deleted, p, d)
		}
	}
}

func TestExeDeletedReal(t *testing.T) {
	// A copy of sleep that is replaced while it runs, as an update does.
	bin, b := sleepCopy(t)
	cmd, _ := startCmd(t, "inc-exe", false, bin, "30")
	fs := Real()
	path, deleted, err := fs.Exe(cmd.Process.Pid)
	if err != nil || path != bin || deleted {
		t.Fatalf("[fresh] expected (%s, false), got (%q, %v, %v)", bin, path, deleted, err)
	}
	// Replace the file by a rename, the way package managers and
	// self-updaters do.
	tmp := bin + ".new"
	if err := os.WriteFile(tmp, b, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, bin); err != nil {
		t.Fatal(err)
	}
	path, deleted, err = fs.Exe(cmd.Process.Pid)
	if err != nil || path != bin || !deleted {
		t.Fatalf("[replaced] expected (%s, true), got (%q, %v, %v)", bin, path, deleted, err)
	}
	if _, _, err := fs.Exe(1 << 30); !isNoProcess(err) {
		t.Errorf("[absent pid] expected ErrNoProcess, got %v", err)
	}
	pids, err := fs.PIDs()
	if err != nil || !slices.Contains(pids, cmd.Process.Pid) || !slices.Contains(pids, os.Getpid()) {
		t.Errorf("expected PIDs to list the child and this process, got %d pids (%v)", len(pids), err)
	}
}

// sleepCopy copies the sleep binary to a file of the test's own, which a
// test may replace (with content) while a process runs it, as an update
// does.
func sleepCopy(t *testing.T) (path string, content []byte) {
	t.Helper()
	src, err := exec.LookPath("sleep")
	if err != nil {
		t.Skipf("no sleep binary: %v", err)
	}
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "agent")
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return bin, b
}
