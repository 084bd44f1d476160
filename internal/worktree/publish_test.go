package worktree

import (
	"os"
	"path/filepath"
	"testing"

	"herd"
)

// TestPublishAndFetch: a task's branch published from one clone of a
// repository (one host) is fetched into a task worktree in another clone
// (another host), commits and all; a repository with no remote publishes
// nothing and makes a fresh branch; a remote without the branch too.
func TestPublishAndFetch(t *testing.T) {
	m := &Manager{}
	src := newRepo(t)
	origin := filepath.Join(t.TempDir(), "origin.git")
	run(t, src, "clone", "-q", "--bare", src, origin)
	clone := func() string {
		dir := filepath.Join(t.TempDir(), "app")
		run(t, filepath.Dir(dir), "clone", "-q", origin, dir)
		return dir
	}
	a, b := clone(), clone()
	task := herd.Task{ID: "t-1", Base: "main"}

	// Host a works on the task and publishes its branch.
	task.Repo = a
	wa, err := m.Ensure(t.Context(), TaskOptions(herd.Role{}, task))
	if err != nil {
		t.Fatal(err)
	}
	write(t, wa.Dir, "WORK.md", "done on a\n")
	run(t, wa.Dir, "add", "WORK.md")
	run(t, wa.Dir, "-c", "user.name=a", "-c", "user.email=a@e", "commit", "-qm", "on a")
	tip := run(t, a, "rev-parse", "herd/t-1")
	if ok, err := m.Publish(t.Context(), a, "herd/t-1"); !ok || err != nil {
		t.Fatalf("[publish] expected pushed, got %v, %v", ok, err)
	}

	// Host b goes on with it: its worktree starts from the published tip.
	task.Repo = b
	wb, err := m.Ensure(t.Context(), TaskOptions(herd.Role{}, task))
	if err != nil {
		t.Fatal(err)
	}
	if got := run(t, wb.Dir, "rev-parse", "HEAD"); got != tip {
		t.Errorf("[fetch] expected b's worktree at a's tip %s, got %s", tip, got)
	}
	if b, err := os.ReadFile(filepath.Join(wb.Dir, "WORK.md")); err != nil || string(b) != "done on a\n" {
		t.Errorf("[fetch] expected a's work in b's worktree, got %q (%v)", b, err)
	}

	// Another task the remote never saw: a fresh branch from the base.
	task.ID = "t-2"
	w2, err := m.Ensure(t.Context(), TaskOptions(herd.Role{}, task))
	if err != nil {
		t.Fatal(err)
	}
	if got, base := run(t, w2.Dir, "rev-parse", "HEAD"), run(t, b, "rev-parse", "main"); got != base {
		t.Errorf("[not published] expected a fresh branch at main %s, got %s", base, got)
	}

	// No remote at all: nothing published, nothing fetched.
	lone := newRepo(t)
	if ok, err := m.Publish(t.Context(), lone, "main"); ok || err != nil {
		t.Errorf("[no remote] expected nothing pushed and no error, got %v, %v", ok, err)
	}
	task.Repo, task.ID = lone, "t-3"
	if _, err := m.Ensure(t.Context(), TaskOptions(herd.Role{}, task)); err != nil || !branchExists(t, lone, "herd/t-3") {
		t.Errorf("[no remote] expected a fresh branch, got %v", err)
	}
}
