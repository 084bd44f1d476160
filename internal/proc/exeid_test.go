package proc

import (
	"os"
	"testing"
)

// TestExeIDReal: the file a process runs is the file at its path until the
// path is replaced by a rename; then the process still runs the old file.
func TestExeIDReal(t *testing.T) {
	bin, b := sleepCopy(t)
	cmd, _ := startCmd(t, "inc-exeid", false, bin, "30")
	fs := Real()
	running, err := fs.ExeID(cmd.Process.Pid)
	if err != nil || running.Zero() {
		t.Fatalf("[fresh] expected the running file's id, got %v (%v)", running, err)
	}
	atPath, err := FileIDOf(bin)
	if err != nil || atPath != running {
		t.Fatalf("[fresh] expected the path's id %v to be the running file's %v (%v)", atPath, running, err)
	}
	tmp := bin + ".new"
	if err := os.WriteFile(tmp, b, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, bin); err != nil {
		t.Fatal(err)
	}
	if atPath, err = FileIDOf(bin); err != nil || atPath == running {
		t.Errorf("[replaced] expected the path's id to differ from the running file's %v, got %v (%v)", running, atPath, err)
	}
	if still, err := fs.ExeID(cmd.Process.Pid); err != nil || still != running {
		t.Errorf("[replaced] expected the process to run %v still, got %v (%v)", running, still, err)
	}
	if _, err := fs.ExeID(0); err == nil {
		t.Error("[pid 0] expected an error")
	}
}
