package worktree

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// task makes the worktree of session on a branch from main and commits
// each file (name, content) in it, one commit per file.
func task(t *testing.T, m *Manager, repo, session string, files ...[2]string) Worktree {
	t.Helper()
	wt, err := m.Ensure(t.Context(), Options{Workdir: repo, Session: session, Base: "main"})
	if err != nil {
		t.Fatalf("ensure %s: %v", session, err)
	}
	for _, f := range files {
		commit(t, wt.Path, f[0], f[1])
	}
	return wt
}

// commit writes one file in dir and commits it.
func commit(t *testing.T, dir, name, content string) {
	t.Helper()
	write(t, dir, name, content)
	run(t, dir, "add", name)
	run(t, dir, "commit", "-qm", "change "+name)
}

// worktrees returns the paths git has registered in repo.
func worktrees(t *testing.T, repo string) []string {
	t.Helper()
	var out []string
	for _, l := range strings.Split(run(t, repo, "worktree", "list", "--porcelain"), "\n") {
		if p, ok := strings.CutPrefix(l, "worktree "); ok {
			out = append(out, p)
		}
	}
	return out
}

// show returns the content of name at rev, "" when it has none.
func show(t *testing.T, repo, rev, name string) string {
	t.Helper()
	out, err := git.Run(t.Context(), repo, "show", rev+":"+name)
	if err != nil {
		return ""
	}
	return string(out)
}

func TestLandModes(t *testing.T) {
	for _, mode := range []string{"", ModeMerge, ModeSquash, ModeRebase} {
		t.Run("mode="+mode, func(t *testing.T) {
			repo := newRepo(t)
			var m Manager
			wt := task(t, &m, repo, "t-1", [2]string{"a.txt", "a\n"}, [2]string{"app/main.go", "package main // changed\n"})
			tip := run(t, repo, "rev-parse", "herd/t-1")
			commit(t, repo, "other.txt", "main moved on\n") // the base has a commit the branch lacks
			old := run(t, repo, "rev-parse", "main")
			before := worktrees(t, repo)

			res, err := m.Land(t.Context(), LandOptions{Repo: wt.Path, Branch: "herd/t-1", Base: "main", Mode: mode, Message: "land t-1"})
			if err != nil {
				t.Fatalf("land: %v", err)
			}
			now := run(t, repo, "rev-parse", "main")
			if res.Old != old || res.New != now || res.Synced != repo {
				t.Fatalf("expected old %s new %s synced %s, got %+v", old, now, repo, res)
			}
			for name, want := range map[string]string{"a.txt": "a\n", "app/main.go": "package main // changed\n", "other.txt": "main moved on\n"} {
				if got := show(t, repo, "main", name); got != want {
					t.Errorf("expected main:%s %q, got %q", name, want, got)
				}
				if b, _ := os.ReadFile(filepath.Join(repo, name)); string(b) != want {
					t.Errorf("expected the checkout of main synced: %s %q, got %q", name, want, b)
				}
			}
			if st := run(t, repo, "status", "--porcelain"); st != "" {
				t.Errorf("expected the checkout of main clean, got %q", st)
			}
			parents := strings.Fields(run(t, repo, "rev-list", "--parents", "-n1", "main"))[1:]
			switch mode {
			case "", ModeMerge:
				if !slices.Equal(parents, []string{old, tip}) {
					t.Errorf("expected a merge of %s and %s, got parents %v", old, tip, parents)
				}
				if msg := run(t, repo, "log", "-1", "--format=%s", "main"); msg != "land t-1" {
					t.Errorf("expected message %q, got %q", "land t-1", msg)
				}
			case ModeSquash:
				if !slices.Equal(parents, []string{old}) {
					t.Errorf("expected one commit on %s, got parents %v", old, parents)
				}
				if files := run(t, repo, "diff", "--name-only", old, "main"); files != "a.txt\napp/main.go" {
					t.Errorf("expected the combined change of a.txt and app/main.go, got %q", files)
				}
				if msg := run(t, repo, "log", "-1", "--format=%s", "main"); msg != "land t-1" {
					t.Errorf("expected message %q, got %q", "land t-1", msg)
				}
			case ModeRebase:
				if merges := run(t, repo, "rev-list", "--merges", old+"..main"); merges != "" {
					t.Errorf("expected linear history, got merges %q", merges)
				}
				if n := run(t, repo, "rev-list", "--count", old+"..main"); n != "2" {
					t.Errorf("expected the 2 commits replayed on %s, got %s", old, n)
				}
				if got := run(t, repo, "rev-parse", "main~2"); got != old {
					t.Errorf("expected main~2 = %s, got %s", old, got)
				}
			}
			if got := run(t, repo, "rev-parse", "herd/t-1"); got != tip {
				t.Errorf("expected the branch untouched at %s, got %s", tip, got)
			}
			if after := worktrees(t, repo); !slices.Equal(after, before) {
				t.Errorf("expected worktrees %v, got %v", before, after)
			}
		})
	}
}

func TestLandConflict(t *testing.T) {
	for _, mode := range []string{ModeMerge, ModeSquash, ModeRebase} {
		t.Run(mode, func(t *testing.T) {
			repo := newRepo(t)
			var m Manager
			task(t, &m, repo, "t-1", [2]string{"ok.txt", "fine\n"}, [2]string{"README", "from the branch\n"})
			commit(t, repo, "README", "from main\n")
			run(t, repo, "checkout", "-q", "--detach") // the ref path, not the checkout
			old, tip := run(t, repo, "rev-parse", "main"), run(t, repo, "rev-parse", "herd/t-1")
			before := worktrees(t, repo)

			_, err := m.Land(t.Context(), LandOptions{Repo: repo, Branch: "herd/t-1", Base: "main", Mode: mode})
			var ce *ConflictError
			if !errors.Is(err, ErrConflict) || !errors.As(err, &ce) || !slices.Equal(ce.Files, []string{"README"}) {
				t.Fatalf("expected ErrConflict on README, got %v", err)
			}
			if !strings.Contains(err.Error(), "README") {
				t.Errorf("expected the file named in %q", err)
			}
			if run(t, repo, "rev-parse", "main") != old || run(t, repo, "rev-parse", "herd/t-1") != tip {
				t.Error("expected base and branch unchanged")
			}
			if after := worktrees(t, repo); !slices.Equal(after, before) {
				t.Errorf("expected worktrees %v, got %v", before, after)
			}
		})
	}
}

func TestLandCheck(t *testing.T) {
	repo := newRepo(t)
	var m Manager
	task(t, &m, repo, "t-1", [2]string{"a.txt", "a\n"})
	commit(t, repo, "other.txt", "o\n")
	old := run(t, repo, "rev-parse", "main")
	before := worktrees(t, repo)

	// The check sees the merge result: the branch's file and the base's.
	var sawDir string
	seen := func(ctx context.Context, dir string) error {
		sawDir = dir
		for _, f := range []string{"a.txt", "other.txt"} {
			if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
				return err
			}
		}
		return nil
	}
	refuse := errors.New("tests failed")
	_, err := m.Land(t.Context(), LandOptions{Repo: repo, Branch: "herd/t-1", Base: "main",
		Check: func(ctx context.Context, dir string) error {
			if err := seen(ctx, dir); err != nil {
				return err
			}
			return refuse
		}})
	if !errors.Is(err, ErrCheckFailed) || !errors.Is(err, refuse) {
		t.Fatalf("expected ErrCheckFailed wrapping the check's error, got %v", err)
	}
	if run(t, repo, "rev-parse", "main") != old || exists(filepath.Join(repo, "a.txt")) {
		t.Error("expected the base untouched")
	}
	if exists(sawDir) {
		t.Errorf("expected the check's directory %s removed", sawDir)
	}
	if after := worktrees(t, repo); !slices.Equal(after, before) {
		t.Errorf("expected worktrees %v, got %v", before, after)
	}

	res, err := m.Land(t.Context(), LandOptions{Repo: repo, Branch: "herd/t-1", Base: "main", Check: seen})
	if err != nil || res.Old != old || run(t, repo, "rev-parse", "main") != res.New {
		t.Fatalf("expected a passing check to land, got %+v (%v)", res, err)
	}

	// A panicking check still leaves no worktree behind.
	task(t, &m, repo, "t-2", [2]string{"b.txt", "b\n"})
	before = worktrees(t, repo)
	func() {
		defer func() { _ = recover() }()
		_, _ = m.Land(t.Context(), LandOptions{Repo: repo, Branch: "herd/t-2", Base: "main",
			Check: func(ctx context.Context, dir string) error { sawDir = dir; panic("boom") }})
	}()
	if after := worktrees(t, repo); !slices.Equal(after, before) || exists(sawDir) {
		t.Errorf("expected worktrees %v after a panic, got %v", before, after)
	}
	// And the repository is not left locked.
	if _, err := m.Land(t.Context(), LandOptions{Repo: repo, Branch: "herd/t-2", Base: "main"}); err != nil {
		t.Errorf("expected landing after the panic, got %v", err)
	}
}

func TestLandBaseMoved(t *testing.T) {
	for _, checkedOut := range []bool{false, true} {
		t.Run(fmt.Sprintf("checked-out=%v", checkedOut), func(t *testing.T) {
			repo := newRepo(t)
			var m Manager
			task(t, &m, repo, "t-1", [2]string{"a.txt", "a\n"})
			if !checkedOut {
				run(t, repo, "checkout", "-q", "--detach")
			}
			var other string
			_, err := m.Land(t.Context(), LandOptions{Repo: repo, Branch: "herd/t-1", Base: "main",
				Check: func(ctx context.Context, dir string) error {
					// Somebody else moves main meanwhile.
					if checkedOut {
						commit(t, repo, "other.txt", "o\n")
						other = run(t, repo, "rev-parse", "HEAD")
						return nil
					}
					tree := run(t, repo, "rev-parse", "main^{tree}")
					other = run(t, repo, "commit-tree", "-p", "main", "-m", "other", tree)
					run(t, repo, "update-ref", "refs/heads/main", other)
					return nil
				}})
			if !errors.Is(err, ErrBaseMoved) {
				t.Fatalf("expected ErrBaseMoved, got %v", err)
			}
			if got := run(t, repo, "rev-parse", "main"); got != other {
				t.Errorf("expected main kept at the other commit %s, got %s", other, got)
			}
			if show(t, repo, "main", "a.txt") != "" {
				t.Error("expected nothing landed")
			}
		})
	}
}

func TestLandIntoCheckout(t *testing.T) {
	repo := newRepo(t)
	var m Manager
	task(t, &m, repo, "t-1", [2]string{"app/main.go", "package main // t-1\n"})
	task(t, &m, repo, "t-2", [2]string{"new.txt", "from t-2\n"})
	task(t, &m, repo, "t-3", [2]string{"b.txt", "b\n"})

	// An uncommitted change to a file the landing does not touch survives.
	write(t, repo, "README", "my edit\n")
	res, err := m.Land(t.Context(), LandOptions{Repo: repo, Branch: "herd/t-3", Base: "main"})
	if err != nil || res.Synced != repo {
		t.Fatalf("expected a landing synced into %s, got %+v (%v)", repo, res, err)
	}
	if b, _ := os.ReadFile(filepath.Join(repo, "README")); string(b) != "my edit\n" {
		t.Errorf("expected the uncommitted README kept, got %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(repo, "b.txt")); string(b) != "b\n" {
		t.Errorf("expected b.txt in the checkout, got %q", b)
	}

	// A change to a file it touches (tracked, or untracked in its way) refuses it.
	write(t, repo, "app/main.go", "package main // mine\n")
	write(t, repo, "new.txt", "mine too\n")
	for _, branch := range []string{"herd/t-1", "herd/t-2"} {
		old := run(t, repo, "rev-parse", "main")
		_, err := m.Land(t.Context(), LandOptions{Repo: repo, Branch: branch, Base: "main"})
		if !errors.Is(err, ErrDirtyBase) || !strings.Contains(err.Error(), repo) || !strings.Contains(err.Error(), "overwritten") {
			t.Fatalf("[%s] expected ErrDirtyBase naming %s and git's message, got %v", branch, repo, err)
		}
		if run(t, repo, "rev-parse", "main") != old {
			t.Errorf("[%s] expected main unmoved", branch)
		}
	}
	for name, want := range map[string]string{"app/main.go": "package main // mine\n", "new.txt": "mine too\n", "README": "my edit\n"} {
		if b, _ := os.ReadFile(filepath.Join(repo, name)); string(b) != want {
			t.Errorf("expected %s kept as %q, got %q", name, want, b)
		}
	}
}

func TestLandBadInput(t *testing.T) {
	repo := newRepo(t)
	var m Manager
	task(t, &m, repo, "t-1", [2]string{"a.txt", "a\n"})
	task(t, &m, repo, "t-2") // no commits of its own
	cases := []struct {
		name string
		o    LandOptions
		want error
	}{
		{"missing base", LandOptions{Repo: repo, Branch: "herd/t-1", Base: "nope"}, ErrNoBase},
		{"revision as base", LandOptions{Repo: repo, Branch: "herd/t-1", Base: "main~0"}, ErrNoBase},
		{"missing branch", LandOptions{Repo: repo, Branch: "herd/t-9", Base: "main"}, ErrNoBranch},
		{"option as branch", LandOptions{Repo: repo, Branch: "--help", Base: "main"}, ErrNoBranch},
		{"bad mode", LandOptions{Repo: repo, Branch: "herd/t-1", Base: "main", Mode: "octopus"}, ErrBadMode},
		{"not a repo", LandOptions{Repo: t.TempDir(), Branch: "herd/t-1", Base: "main"}, ErrNotRepo},
		{"nothing to land", LandOptions{Repo: repo, Branch: "herd/t-2", Base: "main"}, ErrEmpty},
		{"into itself", LandOptions{Repo: repo, Branch: "main", Base: "main"}, nil},
	}
	old := run(t, repo, "rev-parse", "main")
	for _, c := range cases {
		_, err := m.Land(t.Context(), c.o)
		if err == nil || c.want != nil && !errors.Is(err, c.want) {
			t.Errorf("[%s] expected %v, got %v", c.name, c.want, err)
		}
	}
	if run(t, repo, "rev-parse", "main") != old {
		t.Error("expected main unmoved")
	}

	// A squash whose change is already in the base is empty.
	commit(t, repo, "a.txt", "a\n")
	if _, err := m.Land(t.Context(), LandOptions{Repo: repo, Branch: "herd/t-1", Base: "main", Mode: ModeSquash}); !errors.Is(err, ErrEmpty) {
		t.Errorf("[empty squash] expected ErrEmpty, got %v", err)
	}
}

func TestLandWithoutIdentity(t *testing.T) {
	repo := newRepo(t)
	var m Manager
	task(t, &m, repo, "t-1", [2]string{"a.txt", "a\n"})
	run(t, repo, "checkout", "-q", "--detach")
	for _, k := range []string{"GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL", "EMAIL"} {
		t.Setenv(k, "")
		os.Unsetenv(k)
	}
	t.Setenv("HOME", t.TempDir())
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	t.Setenv("GIT_CONFIG_GLOBAL", os.DevNull)
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	if _, err := git.Run(t.Context(), repo, "var", "GIT_COMMITTER_IDENT"); err == nil {
		t.Skip("git finds an identity on this machine anyway")
	}
	for _, mode := range []string{ModeSquash, ModeMerge} {
		res, err := m.Land(t.Context(), LandOptions{Repo: repo, Branch: "herd/t-1", Base: "main", Mode: mode})
		if err != nil {
			t.Fatalf("[%s] expected a landing with herd's identity, got %v", mode, err)
		}
		if who := run(t, repo, "log", "-1", "--format=%cn <%ce>", res.New); who != "herd <herd@localhost>" {
			t.Errorf("[%s] expected committer herd <herd@localhost>, got %q", mode, who)
		}
		run(t, repo, "update-ref", "refs/heads/main", res.Old)
	}
	// The repository's own user.name is kept.
	run(t, repo, "config", "user.name", "Repo User")
	res, err := m.Land(t.Context(), LandOptions{Repo: repo, Branch: "herd/t-1", Base: "main"})
	if err != nil {
		t.Fatal(err)
	}
	if who := run(t, repo, "log", "-1", "--format=%cn <%ce>", res.New); who != "Repo User <herd@localhost>" {
		t.Errorf("expected committer Repo User <herd@localhost>, got %q", who)
	}
}

func TestCommitsAndDiff(t *testing.T) {
	repo := newRepo(t)
	var m Manager
	ctx := t.Context()
	lines := strings.Repeat("a line of the change\n", 100)
	task(t, &m, repo, "t-1", [2]string{"a.txt", lines}, [2]string{"b.txt", "b\n"})
	commit(t, repo, "other.txt", "main only\n")

	if n, err := m.Commits(ctx, repo, "main", "herd/t-1"); err != nil || n != 2 {
		t.Errorf("expected 2 commits, got %d (%v)", n, err)
	}
	if n, err := m.Commits(ctx, repo, "gone", "herd/t-1"); err != nil || n != -1 {
		t.Errorf("expected -1 for a missing base, got %d (%v)", n, err)
	}
	if _, err := m.Commits(ctx, repo, "main", "herd/t-9"); !errors.Is(err, ErrNoBranch) {
		t.Errorf("expected ErrNoBranch, got %v", err)
	}

	diff, cut, err := m.Diff(ctx, repo, "main", "herd/t-1", 0)
	if err != nil || cut || !strings.Contains(diff, "+a line of the change") || !strings.Contains(diff, "+b") {
		t.Fatalf("expected the branch's change, got cut=%v %q (%v)", cut, diff, err)
	}
	if strings.Contains(diff, "other.txt") {
		t.Errorf("expected only the branch's side (merge-base diff), got %q", diff)
	}
	short, cut, err := m.Diff(ctx, repo, "main", "herd/t-1", 500)
	if err != nil || !cut || len(short) > 500 || !strings.HasPrefix(diff, short) || !strings.HasSuffix(short, "\n") {
		t.Errorf("expected the diff cut at a line end within 500 bytes, got cut=%v len %d (%v)", cut, len(short), err)
	}
	if _, _, err := m.Diff(ctx, repo, "gone", "herd/t-1", 0); !errors.Is(err, ErrNoBase) {
		t.Errorf("expected ErrNoBase, got %v", err)
	}
	if _, _, err := m.Diff(ctx, repo, "main", "herd/t-9", 0); !errors.Is(err, ErrNoBranch) {
		t.Errorf("expected ErrNoBranch, got %v", err)
	}
}

func TestConcurrentLand(t *testing.T) {
	for _, checkedOut := range []bool{false, true} {
		t.Run(fmt.Sprintf("checked-out=%v", checkedOut), func(t *testing.T) {
			repo := newRepo(t)
			var m Manager
			const n = 3
			tips := map[string]string{}
			for i := range n {
				s := fmt.Sprintf("t-%d", i)
				task(t, &m, repo, s, [2]string{s + ".txt", s + "\n"}, [2]string{s + "-2.txt", s + "\n"})
				tips[Branch(s)] = run(t, repo, "rev-parse", Branch(s))
			}
			if !checkedOut {
				run(t, repo, "checkout", "-q", "--detach")
			}
			type result struct {
				branch string
				err    error
			}
			results := make(chan result, n)
			for b := range tips {
				go func() {
					_, err := m.Land(context.Background(), LandOptions{Repo: repo, Branch: b, Base: "main"})
					results <- result{b, err}
				}()
			}
			landed := 0
			for range n {
				r := <-results
				switch {
				case r.err == nil:
					landed++
					if ok, err := git.Exit(t.Context(), repo, "merge-base", "--is-ancestor", tips[r.branch], "main"); err != nil || !ok {
						t.Errorf("expected %s (landed) in main, got %v (%v)", r.branch, ok, err)
					}
				case errors.Is(r.err, ErrBaseMoved):
				default:
					t.Errorf("[%s] expected a landing or ErrBaseMoved, got %v", r.branch, r.err)
				}
			}
			// Each reads the base under the lock, so all land, one on another.
			if landed != n {
				t.Errorf("expected all %d to land, got %d", n, landed)
			}
			for b, tip := range tips {
				if ok, _ := git.Exit(t.Context(), repo, "merge-base", "--is-ancestor", tip, "main"); !ok {
					t.Errorf("expected %s in main", b)
				}
			}
			if got := len(worktrees(t, repo)); got != n+1 {
				t.Errorf("expected %d worktrees, got %d", n+1, got)
			}
		})
	}
}

// TestLandCommit: with Commit, what lands is that commit of the branch in
// every mode, not the commits made on the branch after it; a commit not
// on the branch is ErrMoved. RemoveLanded then keeps a branch that moved
// past what landed, and deletes one that did not.
func TestLandCommit(t *testing.T) {
	for _, mode := range []string{ModeMerge, ModeSquash, ModeRebase} {
		t.Run(mode, func(t *testing.T) {
			m := &Manager{}
			repo := newRepo(t)
			wt := task(t, m, repo, "t-1", [2]string{"a.txt", "reviewed\n"})
			reviewed := strings.TrimSpace(run(t, repo, "rev-parse", "herd/t-1"))
			commit(t, wt.Path, "b.txt", "after the review\n")
			l, err := m.Land(t.Context(), LandOptions{Repo: repo, Branch: "herd/t-1", Base: "main", Mode: mode, Commit: reviewed})
			if err != nil {
				t.Fatal(err)
			}
			if l.Tip != reviewed || show(t, repo, "main", "a.txt") != "reviewed\n" || show(t, repo, "main", "b.txt") != "" {
				t.Errorf("expected the reviewed commit only on main, got %+v (b.txt %q)", l, show(t, repo, "main", "b.txt"))
			}
			rm, err := m.RemoveLanded(t.Context(), Options{Workdir: repo, Session: "t-1"}, false, l.Tip)
			if err != nil || rm.Removed || !strings.Contains(rm.Reason, "commits after the one that landed") {
				t.Errorf("expected the worktree and branch kept, got %+v %v", rm, err)
			}
			if _, err := m.Land(t.Context(), LandOptions{Repo: repo, Branch: "herd/t-1", Base: "main", Mode: mode, Commit: strings.Repeat("0", 40)}); err == nil {
				t.Errorf("expected a commit not on the branch refused")
			}
		})
	}
	m := &Manager{}
	repo := newRepo(t)
	wt := task(t, m, repo, "t-2", [2]string{"c.txt", "c\n"})
	other := task(t, m, repo, "t-3", [2]string{"d.txt", "d\n"})
	_ = wt
	foreign := strings.TrimSpace(run(t, other.Path, "rev-parse", "HEAD"))
	if _, err := m.Land(t.Context(), LandOptions{Repo: repo, Branch: "herd/t-2", Base: "main", Commit: foreign}); !errors.Is(err, ErrMoved) {
		t.Errorf("expected ErrMoved for a commit of another branch, got %v", err)
	}
	l, err := m.Land(t.Context(), LandOptions{Repo: repo, Branch: "herd/t-2", Base: "main"})
	if err != nil {
		t.Fatal(err)
	}
	rm, err := m.RemoveLanded(t.Context(), Options{Workdir: repo, Session: "t-2"}, false, l.Tip)
	if err != nil || !rm.Removed || rm.Reason != "" {
		t.Errorf("expected the worktree removed, got %+v %v", rm, err)
	}
	if out := run(t, repo, "branch", "--list", "herd/t-2"); strings.TrimSpace(out) != "" {
		t.Errorf("expected the branch deleted, got %q", out)
	}
}
