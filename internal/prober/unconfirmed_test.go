package prober

import (
	"os"
	"os/exec"
	"sort"
	"testing"

	"herd"
	"herd/internal/herdtest"
	"herd/internal/proc"
)

// TestMarkedAll: one pass over /proc finds, by marker, every live process
// carrying one of the markers asked for, and none carrying another.
func TestMarkedAll(t *testing.T) {
	boot, err := proc.BootID()
	if err != nil {
		t.Fatal(err)
	}
	start := func(marker string) int {
		cmd := exec.Command("sleep", "60")
		cmd.Env = append(os.Environ(), herd.EnvIncarnation+"="+marker)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		herdtest.AwaitExec(t, cmd.Process.Pid)
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		return cmd.Process.Pid
	}
	a1, a2, b := start("test-marked-all-a"), start("test-marked-all-a"), start("test-marked-all-b")
	start("test-marked-all-c")
	found, err := markedAll(proc.Real(), boot, map[string]bool{"test-marked-all-a": true, "test-marked-all-b": true, "test-marked-all-none": true})
	if err != nil {
		t.Fatal(err)
	}
	pids := func(marker string) []int {
		var out []int
		for _, id := range found[marker] {
			if id.Marker != marker || id.StartTime == 0 || id.BootID != boot {
				t.Errorf("[%s] expected a full identity … got %+v", marker, id)
			}
			out = append(out, id.PID)
		}
		sort.Ints(out)
		return out
	}
	want := []int{a1, a2}
	sort.Ints(want)
	if got := pids("test-marked-all-a"); len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("[a] expected %v … got %v", want, got)
	}
	if got := pids("test-marked-all-b"); len(got) != 1 || got[0] != b {
		t.Errorf("[b] expected [%d] … got %v", b, got)
	}
	if len(found) != 2 {
		t.Errorf("expected only the markers asked for that are carried … got %d markers", len(found))
	}
}
