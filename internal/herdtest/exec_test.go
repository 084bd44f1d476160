package herdtest

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"testing"
)

// TestAwaitExec: right after AwaitExec, a just-started process shows the
// environment it was started with, every time (without the wait, a read
// right after Start now and then came back empty).
func TestAwaitExec(t *testing.T) {
	for i := range 100 {
		cmd := exec.Command("sleep", "30")
		cmd.Env = []string{fmt.Sprintf("HERDTEST_MARK=%d", i)}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		AwaitExec(t, cmd.Process.Pid)
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", cmd.Process.Pid))
		cmd.Process.Kill()
		cmd.Wait()
		if err != nil || !bytes.Contains(b, fmt.Appendf(nil, "HERDTEST_MARK=%d\x00", i)) {
			t.Fatalf("[start %d] expected its environment after AwaitExec, got %q, %v", i, b, err)
		}
	}
	// A process gone (reaped) ends the wait at once.
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	AwaitExec(t, cmd.Process.Pid)
}
