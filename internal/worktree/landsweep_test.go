package worktree

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"herd/internal/proc"
)

func TestStaleLanding(t *testing.T) {
	boot, err := proc.BootID()
	if err != nil {
		t.Fatal(err)
	}
	fs := proc.Real()
	self, err := fs.Stat(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	reason := func(pid int, start uint64, boot string) string {
		return fmt.Sprintf("herd landing: pid %d start %d boot %s", pid, start, boot)
	}
	for _, c := range []struct {
		name   string
		reason string
		boot   string
		want   bool
	}{
		{"made by this process", landLock(), boot, false},
		{"its pid alive, same start", reason(os.Getpid(), self.StartTime, boot), boot, false},
		{"its pid reused", reason(os.Getpid(), self.StartTime+1, boot), boot, true},
		{"its pid gone", reason(gone.Process.Pid, 1, boot), boot, true},
		{"an earlier boot", reason(os.Getpid(), self.StartTime, "another-boot"), boot, true},
		{"this boot unknown", reason(gone.Process.Pid, 1, boot), "", false},
		{"a lock not of herd's", "a person's lock", boot, false},
		{"a garbled reason", "herd landing: pid x start 1 boot b", boot, false},
		{"no reason", "", boot, false},
	} {
		if got := staleLanding(c.reason, fs, c.boot); got != c.want {
			t.Errorf("[%s] expected stale %v … got %v (%q)", c.name, c.want, got, c.reason)
		}
	}
}

// TestLandSweepsLeftovers: a landing worktree a killed daemon left
// (registered, locked by a process that is gone) is removed by the next
// landing in its repository; one locked by a live process (a landing
// under way), a person's locked worktree and the task's own are kept.
func TestLandSweepsLeftovers(t *testing.T) {
	repo := newRepo(t)
	var m Manager
	wt := task(t, &m, repo, "t-1", [2]string{"a.txt", "a\n"})
	boot, err := proc.BootID()
	if err != nil {
		t.Fatal(err)
	}
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	add := func(reason string) string {
		dir, err := os.MkdirTemp("", landPrefix)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		run(t, repo, "worktree", "add", "--quiet", "--detach", "--lock", "--reason", reason, dir, "main")
		return dir
	}
	left := add(fmt.Sprintf("herd landing: pid %d start 1 boot %s", gone.Process.Pid, boot))
	underWay := add(landLock())
	person := filepath.Join(t.TempDir(), landPrefix+"mine")
	run(t, repo, "worktree", "add", "--quiet", "--detach", "--lock", "--reason", "mine", person, "main")

	if _, err := m.Land(t.Context(), LandOptions{Repo: wt.Path, Branch: "herd/t-1", Base: "main", Message: "land t-1"}); err != nil {
		t.Fatalf("land: %v", err)
	}
	now := worktrees(t, repo)
	if slices.Contains(now, left) {
		t.Errorf("expected the leftover landing %s removed … still registered: %v", left, now)
	}
	if _, err := os.Stat(left); !os.IsNotExist(err) {
		t.Errorf("expected the leftover landing's directory removed … %v", err)
	}
	for _, keep := range []string{underWay, person, wt.Path} {
		if !slices.Contains(now, keep) {
			t.Errorf("expected %s kept … registered: %v", keep, now)
		}
	}
}
