package worktree

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"herd/internal/gitx"
)

var git gitx.Client

// run runs git in dir or fails the test.
func run(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := git.Line(t.Context(), dir, args...)
	if err != nil {
		t.Fatalf("git %v: %v", args, err)
	}
	return out
}

// write writes a file under dir.
func write(t *testing.T, dir, name, content string) {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// newRepo makes a repository with one commit on main and an untracked,
// ignored .env.
func newRepo(t *testing.T) string {
	t.Helper()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	run(t, dir, "init", "-q", "-b", "main")
	write(t, dir, "README", "hello\n")
	write(t, dir, ".gitignore", ".env\n")
	write(t, dir, "app/main.go", "package main\n")
	run(t, dir, "add", ".")
	run(t, dir, "commit", "-qm", "first")
	write(t, dir, ".env", "TOKEN=x\n")
	return dir
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

func branchExists(t *testing.T, repo, branch string) bool {
	t.Helper()
	ok, err := git.Exit(t.Context(), repo, "show-ref", "--verify", "--quiet", "refs/heads/"+branch)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

func TestThreeWorktreesRemoveAndKeep(t *testing.T) {
	repo := newRepo(t)
	var m Manager
	ctx := t.Context()
	opts := func(s string) Options {
		return Options{Workdir: repo, Session: s, Include: []string{".env", "*.local"}}
	}
	sessions := []string{"worker-0", "worker-1", "worker-2"}
	wts := map[string]Worktree{}
	for _, s := range sessions {
		wt, err := m.Ensure(ctx, opts(s))
		if err != nil {
			t.Fatalf("ensure %s: %v", s, err)
		}
		want := filepath.Join(repo, ".herd", "worktrees", s)
		if wt.Path != want || wt.Dir != want || wt.Branch != "herd/"+s || wt.Base != "main" || !wt.Created {
			t.Fatalf("[%s] expected path %s branch herd/%s base main created, got %+v", s, want, s, wt)
		}
		if got := run(t, wt.Path, "branch", "--show-current"); got != "herd/"+s {
			t.Errorf("[%s] expected checked-out branch herd/%s, got %q", s, s, got)
		}
		if b, err := os.ReadFile(filepath.Join(wt.Path, ".env")); err != nil || string(b) != "TOKEN=x\n" {
			t.Errorf("[%s] expected .env copied in, got %q (%v)", s, b, err)
		}
		wts[s] = wt
	}
	exclude, _ := os.ReadFile(filepath.Join(repo, ".git", "info", "exclude"))
	if strings.Count(string(exclude), "/.herd/\n") != 1 {
		t.Errorf("expected /.herd/ once in info/exclude, got %q", exclude)
	}
	if st := run(t, repo, "status", "--porcelain"); st != "" {
		t.Errorf("expected the main checkout clean (worktrees excluded), got %q", st)
	}
	for _, s := range sessions {
		st, err := m.Status(ctx, opts(s))
		if err != nil || st.Dirty || st.Ahead != 0 || st.Branch != "herd/"+s {
			t.Errorf("[%s] expected clean, ahead 0 (copied .env is not dirt), got %+v (%v)", s, st, err)
		}
	}

	// worker-1: uncommitted work. worker-2: a commit of its own.
	write(t, wts["worker-1"].Path, "notes.txt", "draft\n")
	write(t, wts["worker-2"].Path, "feature.go", "package main\n")
	run(t, wts["worker-2"].Path, "add", "feature.go")
	run(t, wts["worker-2"].Path, "commit", "-qm", "feature")

	if st, _ := m.Status(ctx, opts("worker-1")); !st.Dirty || st.Ahead != 0 {
		t.Errorf("[worker-1] expected dirty, ahead 0, got %+v", st)
	}
	if st, _ := m.Status(ctx, opts("worker-2")); st.Dirty || st.Ahead != 1 {
		t.Errorf("[worker-2] expected clean, ahead 1, got %+v", st)
	}

	cases := []struct {
		session    string
		removed    bool
		reasonHas  []string
		branchLeft bool
	}{
		{"worker-0", true, nil, false},
		{"worker-1", false, []string{"uncommitted changes", wts["worker-1"].Path}, true},
		{"worker-2", false, []string{"1 commit(s) not in main", wts["worker-2"].Path}, true},
	}
	for _, c := range cases {
		res, err := m.Remove(ctx, opts(c.session))
		if err != nil {
			t.Fatalf("[%s] remove: %v", c.session, err)
		}
		if res.Removed != c.removed || exists(wts[c.session].Path) == c.removed {
			t.Errorf("[%s] expected removed=%v, got %+v (dir exists: %v)", c.session, c.removed, res, exists(wts[c.session].Path))
		}
		for _, s := range c.reasonHas {
			if !strings.Contains(res.Reason, s) {
				t.Errorf("[%s] expected reason to contain %q, got %q", c.session, s, res.Reason)
			}
		}
		if c.reasonHas == nil && res.Reason != "" {
			t.Errorf("[%s] expected no reason, got %q", c.session, res.Reason)
		}
		if got := branchExists(t, repo, "herd/"+c.session); got != c.branchLeft {
			t.Errorf("[%s] expected branch left=%v, got %v", c.session, c.branchLeft, got)
		}
	}
	if res, err := m.Remove(ctx, opts("worker-0")); err != nil || !res.Absent {
		t.Errorf("[worker-0 again] expected absent, got %+v (%v)", res, err)
	}

	// Merged into main, worker-2 goes.
	run(t, repo, "merge", "-q", "--no-edit", "herd/worker-2")
	if res, err := m.Remove(ctx, opts("worker-2")); err != nil || !res.Removed || branchExists(t, repo, "herd/worker-2") {
		t.Errorf("[worker-2 merged] expected removed with its branch, got %+v (%v)", res, err)
	}

	// Prune keeps the dirty one without force and the in-use rule holds.
	pruned, err := m.Prune(ctx, PruneOptions{Workdir: repo})
	if err != nil || len(pruned) != 1 || pruned[0].Removed || !strings.Contains(pruned[0].Reason, "uncommitted") {
		t.Fatalf("[prune] expected worker-1 kept as dirty, got %+v (%v)", pruned, err)
	}
	pruned, err = m.Prune(ctx, PruneOptions{Workdir: repo, Force: true, InUse: func(s string) bool { return s == "worker-1" }})
	if err != nil || len(pruned) != 0 || !exists(wts["worker-1"].Path) {
		t.Fatalf("[prune in use] expected worker-1 left alone, got %+v (%v)", pruned, err)
	}
	pruned, err = m.Prune(ctx, PruneOptions{Workdir: repo, Force: true})
	if err != nil || len(pruned) != 1 || !pruned[0].Removed || exists(wts["worker-1"].Path) {
		t.Fatalf("[prune --force] expected worker-1 removed, got %+v (%v)", pruned, err)
	}
	if exists(filepath.Join(repo, ".herd")) {
		t.Errorf("expected the empty .herd directory removed")
	}
	if list := run(t, repo, "worktree", "list", "--porcelain"); strings.Count(list, "worktree ") != 1 {
		t.Errorf("expected only the main worktree registered, got %q", list)
	}
}

func TestPruneKeepsBranchWithCommits(t *testing.T) {
	repo := newRepo(t)
	var m Manager
	opts := Options{Workdir: repo, Session: "w-0"}
	wt, err := m.Ensure(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	write(t, wt.Path, "x", "x\n")
	run(t, wt.Path, "add", "x")
	run(t, wt.Path, "commit", "-qm", "x")
	pruned, err := m.Prune(t.Context(), PruneOptions{Workdir: repo})
	if err != nil || len(pruned) != 1 || !pruned[0].Removed || !strings.Contains(pruned[0].Reason, "kept branch herd/w-0") {
		t.Fatalf("expected the directory removed and the branch kept, got %+v (%v)", pruned, err)
	}
	if !branchExists(t, repo, "herd/w-0") || exists(wt.Path) {
		t.Fatalf("expected branch herd/w-0 kept and %s gone", wt.Path)
	}
	// Ensure again continues on the kept branch.
	again, err := m.Ensure(t.Context(), opts)
	if err != nil || !exists(filepath.Join(again.Path, "x")) {
		t.Fatalf("expected the worktree back on the kept branch with its commit, got %+v (%v)", again, err)
	}
}

func TestEnsureReusesAndRunsSetupOnce(t *testing.T) {
	repo := newRepo(t)
	counter := filepath.Join(t.TempDir(), "count")
	var m Manager
	opts := Options{Workdir: filepath.Join(repo, "app"), Session: "dev-0",
		Setup: []string{"sh", "-c", `echo ran >> "$1"; pwd; echo set up`, "sh", counter}}
	wt, err := m.Ensure(t.Context(), opts)
	if err != nil {
		t.Fatalf("ensure: %v", err)
	}
	wantDir := filepath.Join(repo, ".herd", "worktrees", "dev-0", "app")
	if wt.Dir != wantDir || !strings.Contains(wt.Output, wantDir) || !strings.Contains(wt.Output, "set up") {
		t.Fatalf("expected setup run in %s with its output returned, got dir %s output %q", wantDir, wt.Dir, wt.Output)
	}
	write(t, wt.Dir, "scratch", "work in progress\n")

	again, err := m.Ensure(t.Context(), opts)
	if err != nil {
		t.Fatalf("ensure again: %v", err)
	}
	if again.Created || again.Path != wt.Path || again.Dir != wt.Dir || again.Base != "main" {
		t.Fatalf("expected the same worktree reused, got %+v", again)
	}
	if !exists(filepath.Join(again.Dir, "scratch")) {
		t.Fatal("expected the session's files to survive a reuse")
	}
	if b, _ := os.ReadFile(counter); string(b) != "ran\n" {
		t.Fatalf("expected setup to run once, got %q", b)
	}
}

func TestSetupFailureLeavesNothing(t *testing.T) {
	repo := newRepo(t)
	var m Manager
	opts := Options{Workdir: repo, Session: "w-1", Include: []string{".env"},
		Setup: []string{"sh", "-c", "echo installing; echo boom >&2; exit 3"}}
	wt, err := m.Ensure(t.Context(), opts)
	if !errors.Is(err, ErrSetup) {
		t.Fatalf("expected ErrSetup, got %v", err)
	}
	for _, s := range []string{"boom", "installing", "exit status 3"} {
		if !strings.Contains(err.Error(), s) || !strings.Contains(wt.Output+"exit status 3", s) {
			t.Errorf("expected %q in the error and output, got %v / %q", s, err, wt.Output)
		}
	}
	if exists(filepath.Join(repo, ".herd")) {
		t.Error("expected no .herd directory left")
	}
	if branchExists(t, repo, "herd/w-1") {
		t.Error("expected no branch left")
	}
	if list := run(t, repo, "worktree", "list", "--porcelain"); strings.Count(list, "worktree ") != 1 {
		t.Errorf("expected only the main worktree registered, got %q", list)
	}
	// A missing setup binary fails the same way.
	opts.Setup = []string{"/nonexistent/setup"}
	if _, err := m.Ensure(t.Context(), opts); !errors.Is(err, ErrSetup) || exists(filepath.Join(repo, ".herd")) {
		t.Errorf("expected ErrSetup and nothing left for a missing setup binary, got %v", err)
	}
}

func TestHalfCreatedIsMadeAgain(t *testing.T) {
	repo := newRepo(t)
	var m Manager
	opts := Options{Workdir: repo, Session: "w-0"}
	wt, err := m.Ensure(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	// As if the daemon died during setup: the ready mark is missing.
	priv := run(t, wt.Path, "rev-parse", "--absolute-git-dir")
	if err := os.Remove(filepath.Join(priv, readyFile)); err != nil {
		t.Fatal(err)
	}
	// Setup's partial output (not ignored) makes it dirty; it goes anyway.
	write(t, wt.Path, "node_modules/partial", "x\n")
	opts.Setup = []string{"true"}
	again, err := m.Ensure(t.Context(), opts)
	if err != nil || !again.Created || exists(filepath.Join(again.Path, "node_modules")) {
		t.Fatalf("expected the half-made worktree made again from scratch, got %+v (%v)", again, err)
	}

	// Half-made but with a commit of its own: somebody's work, used as is.
	write(t, again.Path, "work.go", "package main\n")
	run(t, again.Path, "add", "work.go")
	run(t, again.Path, "commit", "-qm", "work")
	if err := os.Remove(filepath.Join(priv, readyFile)); err != nil {
		t.Fatal(err)
	}
	third, err := m.Ensure(t.Context(), opts)
	if err != nil || third.Created || !exists(filepath.Join(third.Path, "work.go")) {
		t.Fatalf("expected the worktree with a commit kept as it is, got %+v (%v)", third, err)
	}
}

func TestBadStates(t *testing.T) {
	var m Manager
	ctx := t.Context()

	notRepo := t.TempDir()
	detached := newRepo(t)
	run(t, detached, "checkout", "-q", "--detach")
	locked := newRepo(t)
	write(t, locked, ".git/index.lock", "")
	empty := t.TempDir()
	run(t, empty, "init", "-q", "-b", "main")
	ok := newRepo(t)
	taken := newRepo(t)
	write(t, taken, ".herd/worktrees/w-0/file", "not a worktree\n")

	cases := []struct {
		name string
		opts Options
		want error
	}{
		{"workdir not in a repo", Options{Workdir: notRepo, Session: "w-0"}, ErrNotRepo},
		{"workdir missing", Options{Workdir: filepath.Join(notRepo, "gone"), Session: "w-0"}, os.ErrNotExist},
		{"detached HEAD", Options{Workdir: detached, Session: "w-0"}, ErrDetached},
		{"locked index", Options{Workdir: locked, Session: "w-0"}, ErrLocked},
		{"no commits", Options{Workdir: empty, Session: "w-0"}, ErrNoCommits},
		{"missing base", Options{Workdir: ok, Session: "w-0", Base: "no-such-branch"}, ErrNoBase},
		{"option as base", Options{Workdir: ok, Session: "w-0", Base: "--orphan"}, ErrNoBase},
		{"bad session name", Options{Workdir: ok, Session: "../escape"}, ErrBadSession},
		{"path taken", Options{Workdir: taken, Session: "w-0"}, ErrPathTaken},
		{"include outside", Options{Workdir: ok, Session: "w-1", Include: []string{"../x"}}, nil},
	}
	for _, c := range cases {
		_, err := m.Ensure(ctx, c.opts)
		if err == nil {
			t.Errorf("[%s] expected an error, got nil", c.name)
			continue
		}
		if c.want != nil && !errors.Is(err, c.want) {
			t.Errorf("[%s] expected %v, got %v", c.name, c.want, err)
		}
	}
	// Detached HEAD with an explicit base works.
	if _, err := m.Ensure(ctx, Options{Workdir: detached, Session: "w-0", Base: "main"}); err != nil {
		t.Errorf("[detached with base] expected success, got %v", err)
	}
	// Nothing was left by the failed attempts on ok.
	if branchExists(t, ok, "herd/w-1") || exists(filepath.Join(ok, ".herd", "worktrees", "w-1")) {
		t.Error("[include outside] expected nothing left behind")
	}
}

func TestBaseBranch(t *testing.T) {
	repo := newRepo(t)
	run(t, repo, "checkout", "-q", "-b", "feature")
	write(t, repo, "f", "f\n")
	run(t, repo, "add", "f")
	run(t, repo, "commit", "-qm", "f")
	var m Manager
	wt, err := m.Ensure(t.Context(), Options{Workdir: repo, Session: "a-0"})
	if err != nil || wt.Base != "feature" || !exists(filepath.Join(wt.Path, "f")) {
		t.Fatalf("expected a worktree from the current branch feature, got %+v (%v)", wt, err)
	}
	wt, err = m.Ensure(t.Context(), Options{Workdir: repo, Session: "b-0", Base: "main"})
	if err != nil || wt.Base != "main" || exists(filepath.Join(wt.Path, "f")) {
		t.Fatalf("expected a worktree from main without f, got %+v (%v)", wt, err)
	}
	// Outside root: no exclude line needed, still works.
	outside := filepath.Join(t.TempDir(), "trees")
	wt, err = m.Ensure(t.Context(), Options{Workdir: repo, Session: "c-0", Root: outside})
	if err != nil || wt.Path != filepath.Join(outside, "c-0") {
		t.Fatalf("expected a worktree under %s, got %+v (%v)", outside, wt, err)
	}
	if res, err := m.Remove(t.Context(), Options{Workdir: repo, Session: "c-0", Root: outside}); err != nil || !res.Removed {
		t.Fatalf("expected the outside worktree removed, got %+v (%v)", res, err)
	}
	if !exists(outside) {
		t.Error("expected a configured root to stay")
	}
}

func TestConcurrentEnsure(t *testing.T) {
	repo := newRepo(t)
	var m Manager
	const n = 6
	errs := make(chan error, n)
	for i := range n {
		go func() {
			_, err := m.Ensure(t.Context(), Options{Workdir: repo, Session: fmt.Sprintf("w-%d", i),
				Include: []string{".env"}, Setup: []string{"true"}})
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Errorf("expected concurrent creation to succeed, got %v", err)
		}
	}
	if list := run(t, repo, "worktree", "list", "--porcelain"); strings.Count(list, "worktree ") != n+1 {
		t.Errorf("expected %d worktrees, got %q", n+1, list)
	}
	exclude, _ := os.ReadFile(filepath.Join(repo, ".git", "info", "exclude"))
	if strings.Count(string(exclude), "/.herd/\n") != 1 {
		t.Errorf("expected /.herd/ once in info/exclude, got %q", exclude)
	}
}
