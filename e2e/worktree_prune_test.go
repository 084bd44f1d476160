package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"herd"
	"herd/internal/api"
)

// git runs git in dir and fails the test on an error.
func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@e"}, args...)...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// TestWorktreePrune: the worktrees delete role kept — one dirty, one with
// a commit of its own — are pruned on request: the clean one goes (its
// branch and commit stay), the dirty one stays and says why until
// --force; the reaper removes a reaped session's clean worktree.
func TestWorktreePrune(t *testing.T) {
	t.Parallel()
	repo := gitRepo(t)
	e := newEnv(t, fastRestart)
	e.start()
	roles := filepath.Join(e.dir, "roles.toml")
	os.WriteFile(roles, []byte(fmt.Sprintf(`
[[role]]
name = "wt"
replicas = 2
command = ["sleep", "300"]
workdir = %q
runtime = "exec"
worktree = true
`, repo)), 0o600)
	e.must("apply", "-f", roles)
	paths := map[string]string{}
	for i := range 2 {
		name := fmt.Sprintf("wt-%d", i)
		e.waitState(name, herd.StateRunning, 20*time.Second)
		paths[name] = filepath.Join(repo, ".herd", "worktrees", name)
	}
	os.WriteFile(filepath.Join(paths["wt-0"], "notes.txt"), []byte("work\n"), 0o600)
	os.WriteFile(filepath.Join(paths["wt-1"], "done.txt"), []byte("done\n"), 0o600)
	git(t, paths["wt-1"], "add", "done.txt")
	git(t, paths["wt-1"], "commit", "-q", "-m", "done")

	// Views show each worktree: path, branch, dirty, ahead.
	e.waitFor("the worktrees' state in get sessions", 20*time.Second, func() bool {
		w0, w1 := e.worktreeOf("wt-0"), e.worktreeOf("wt-1")
		return w0 != nil && w1 != nil && w0.Dirty && w0.Ahead == 0 && !w1.Dirty && w1.Ahead == 1
	})
	if w := e.worktreeOf("wt-1"); w.Path != paths["wt-1"] || w.Branch != "herd/wt-1" {
		t.Errorf("[get sessions -o json] expected wt-1's worktree path and branch … got %+v", w)
	}
	wide := e.must("get", "sessions", "-o", "wide")
	if !strings.Contains(wide, "herd/wt-0,dirty") || !strings.Contains(wide, "herd/wt-1,+1") {
		t.Errorf("[-o wide] expected a WORKTREE column with dirty and ahead … got\n%s", wide)
	}
	if d := e.must("describe", "session", "wt-0"); !strings.Contains(d, "Worktree:") || !strings.Contains(d, paths["wt-0"]+" on herd/wt-0, uncommitted changes") {
		t.Errorf("[describe] expected the worktree line … got\n%s", d)
	}

	e.must("delete", "role", "wt")
	for _, p := range paths {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("expected delete role to keep %s: %v", p, err)
		}
	}

	out := e.must("worktree", "prune")
	if !strings.Contains(out, "removed "+paths["wt-1"]) || !strings.Contains(out, "herd/wt-1 has 1 commit") {
		t.Errorf("[prune] expected wt-1 removed with its branch kept for its commit … got\n%s", out)
	}
	if !strings.Contains(out, "kept "+paths["wt-0"]) || !strings.Contains(out, "uncommitted changes") {
		t.Errorf("[prune] expected wt-0 kept for its uncommitted changes … got\n%s", out)
	}
	if _, err := os.Stat(paths["wt-1"]); !os.IsNotExist(err) {
		t.Errorf("[prune] expected %s gone … %v", paths["wt-1"], err)
	}
	if !strings.Contains(git(t, repo, "branch", "--list", "herd/wt-1"), "herd/wt-1") {
		t.Errorf("[prune] expected branch herd/wt-1 and its commit kept")
	}
	if _, err := os.Stat(filepath.Join(paths["wt-0"], "notes.txt")); err != nil {
		t.Errorf("[prune] expected the dirty worktree kept: %v", err)
	}

	out = e.must("worktree", "prune", "--force")
	if !strings.Contains(out, "removed "+paths["wt-0"]) {
		t.Errorf("[prune --force] expected wt-0 removed … got\n%s", out)
	}
	if _, err := os.Stat(paths["wt-0"]); !os.IsNotExist(err) {
		t.Errorf("[prune --force] expected %s gone … %v", paths["wt-0"], err)
	}
	if out := e.must("worktree", "prune"); !strings.Contains(out, "No kept worktrees.") {
		t.Errorf("[prune again] expected nothing left … got\n%s", out)
	}

	// A reaped session's clean worktree goes with it.
	os.WriteFile(roles, []byte(fmt.Sprintf(`
[[role]]
name = "rp"
command = ["sleep", "300"]
workdir = %q
runtime = "exec"
worktree = true
`, repo)), 0o600)
	e.must("apply", "-f", roles)
	e.waitState("rp-0", herd.StateRunning, 20*time.Second)
	rp := filepath.Join(repo, ".herd", "worktrees", "rp-0")
	if _, err := os.Stat(rp); err != nil {
		t.Fatal(err)
	}
	e.must("archive", "rp-0")
	e.must("reap")
	e.waitState("rp-0", herd.StateStopped, 20*time.Second)
	e.waitFor("the reaped session's worktree removed", 10*time.Second, func() bool {
		_, err := os.Stat(rp)
		return os.IsNotExist(err)
	})
	ev := e.events("--session", "rp-0", "--kind", herd.EventWorktree)
	if len(ev) != 1 || ev[0].Reason != "removed" {
		t.Errorf("[reap] expected one worktree removed event … got %+v", ev)
	}
}

// worktreeOf is a session's worktree as get sessions -o json shows it.
func (e *env) worktreeOf(name string) *api.Worktree {
	var views []api.SessionView
	if err := json.Unmarshal([]byte(e.must("get", "sessions", name, "-o", "json")), &views); err != nil || len(views) != 1 {
		e.t.Fatalf("get sessions %s: %v", name, err)
	}
	return views[0].Worktree
}
