package worktree

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"herd/internal/gitx"
)

// waitDelay is how long a killed setup command may keep its output pipes
// open (its children) before Wait gives up on them.
const waitDelay = 500 * time.Millisecond

// copiedFile lists, in the worktree's git directory, the files copied in
// by Include (relative to the worktree's top level): they are not the
// session's work, so they do not make it dirty.
const copiedFile = "herd-copied"

// ErrNoWorktree means the session has no worktree.
var ErrNoWorktree = errors.New("no worktree")

// Removal says what Remove or Prune did with one worktree.
type Removal struct {
	Session string
	Path    string
	Branch  string
	Removed bool   // the worktree directory is gone
	Absent  bool   // there was no worktree to remove
	Reason  string // why something was kept; "" when nothing was
}

// Status reports the worktree of opts.Session: its path and branch,
// whether it has changes not committed (untracked files count, the files
// copied in by Include do not), and how many commits its branch has that
// its base has not (-1 when the base no longer exists). It returns an
// error wrapping ErrNoWorktree when the session has none.
func (m *Manager) Status(ctx context.Context, opts Options) (Status, error) {
	path, r, err := m.path(ctx, opts)
	if err != nil {
		return Status{}, err
	}
	defer m.lockRepo(r.commonDir)()
	all, err := m.list(ctx, opts.Workdir)
	if err != nil {
		return Status{}, err
	}
	l, ok := find(all, path)
	if !ok || l.prunable {
		return Status{}, fmt.Errorf("worktree: %s: %w", path, ErrNoWorktree)
	}
	return m.status(ctx, path, l.branch)
}

// status inspects the worktree at path on branch.
func (m *Manager) status(ctx context.Context, path, branch string) (Status, error) {
	st := Status{Path: path, Branch: branch}
	dirty, err := m.dirty(ctx, path)
	if err != nil {
		return Status{}, err
	}
	st.Dirty = dirty
	base, err := m.readMeta(ctx, path, baseFile)
	if err != nil {
		return Status{}, err
	}
	st.Ahead, err = m.ahead(ctx, path, base, branch)
	if err != nil {
		return Status{}, err
	}
	return st, nil
}

// dirty reports whether the worktree has changes: tracked files modified
// or staged, or untracked files other than the ones copied in.
func (m *Manager) dirty(ctx context.Context, path string) (bool, error) {
	out, err := m.git().Run(ctx, path, "status", "--porcelain", "-z", "--untracked-files=all", "--ignore-submodules=none")
	if err != nil {
		return false, fmt.Errorf("worktree: %w", err)
	}
	copiedList, err := m.readMeta(ctx, path, copiedFile)
	if err != nil {
		return false, err
	}
	copied := strings.Split(copiedList, "\n")
	entries := strings.Split(string(out), "\x00")
	for i := 0; i < len(entries); i++ {
		e := entries[i]
		if len(e) < 4 {
			continue
		}
		code, name := e[:2], e[3:]
		if code[0] == 'R' || code[0] == 'C' {
			i++ // a rename's source path follows as its own entry
		}
		if code == "??" && slices.Contains(copied, name) {
			continue
		}
		return true, nil
	}
	return false, nil
}

// ahead counts the commits of branch that base does not have; -1 when
// base is unknown or no longer names a commit.
func (m *Manager) ahead(ctx context.Context, dir, base, branch string) (int, error) {
	sha, err := m.resolve(ctx, dir, base)
	if err != nil || sha == "" {
		return -1, err
	}
	// The resolved commit, not base itself, goes into the range: a base
	// starting with "-" cannot be read as an option.
	n, err := m.git().Line(ctx, dir, "rev-list", "--count", sha+".."+"refs/heads/"+branch, "--")
	if err != nil {
		return 0, fmt.Errorf("worktree: %w", err)
	}
	c, err := strconv.Atoi(n)
	if err != nil {
		return 0, fmt.Errorf("worktree: rev-list --count: %q", n)
	}
	return c, nil
}

// aheadOf counts the commits of commit tip that commit base has not.
func (m *Manager) aheadOf(ctx context.Context, dir, base, tip string) (int, error) {
	n, err := m.git().Line(ctx, dir, "rev-list", "--count", base+".."+tip, "--")
	if err != nil {
		return 0, fmt.Errorf("worktree: %w", err)
	}
	c, err := strconv.Atoi(n)
	if err != nil {
		return 0, fmt.Errorf("worktree: rev-list --count: %q", n)
	}
	return c, nil
}

// resolve returns the commit rev names, or "" when it names none.
func (m *Manager) resolve(ctx context.Context, dir, rev string) (string, error) {
	if rev == "" {
		return "", nil
	}
	sha, err := m.git().Line(ctx, dir, "rev-parse", "--verify", "--quiet", "--end-of-options", rev+"^{commit}")
	if err != nil {
		var ge *gitx.Error
		if errors.As(err, &ge) && ge.ExitCode() == 1 {
			return "", nil
		}
		return "", fmt.Errorf("worktree: %w", err)
	}
	return sha, nil
}

// Remove removes the worktree of opts.Session and its branch when that
// loses nothing: the worktree is clean and its branch has no commits its
// base lacks (merged, or none of its own). Otherwise both are kept and
// Reason says why and where. The session must not be running.
func (m *Manager) Remove(ctx context.Context, opts Options) (Removal, error) {
	path, r, err := m.path(ctx, opts)
	if err != nil {
		return Removal{}, err
	}
	defer m.lockRepo(r.commonDir)()
	res := Removal{Session: opts.Session, Path: path, Branch: Branch(opts.Session)}
	all, err := m.list(ctx, opts.Workdir)
	if err != nil {
		return Removal{}, err
	}
	l, ok := find(all, path)
	if !ok || l.prunable {
		res.Absent = true
		if ok {
			_, _ = m.git().Run(ctx, opts.Workdir, "worktree", "prune")
		}
		return res, nil
	}
	if l.branch != res.Branch {
		return Removal{}, fmt.Errorf("worktree: %s has branch %q, want %q: %w", path, l.branch, res.Branch, ErrPathTaken)
	}
	return m.removeOne(ctx, opts.Workdir, res, false, false)
}

// removeOne removes the worktree of res and, when its branch has no
// commits of its own, the branch. A dirty worktree is kept unless force;
// a worktree whose branch is ahead of its base is kept unless prune, and
// even then its branch (and so its commits) stays.
func (m *Manager) removeOne(ctx context.Context, repoDir string, res Removal, prune, force bool) (Removal, error) {
	st, err := m.status(ctx, res.Path, res.Branch)
	if err != nil {
		return Removal{}, err
	}
	base, _ := m.readMeta(ctx, res.Path, baseFile)
	var why []string
	if st.Dirty && !force {
		why = append(why, "it has uncommitted changes")
	}
	switch {
	case st.Ahead > 0:
		why = append(why, fmt.Sprintf("branch %s has %d commit(s) not in %s", res.Branch, st.Ahead, base))
	case st.Ahead < 0:
		why = append(why, fmt.Sprintf("its base %q is unknown or gone, so branch %s may hold unmerged work", base, res.Branch))
	}
	removeTree := !(st.Dirty && !force) && (st.Ahead == 0 || prune)
	g := m.git()
	if removeTree {
		// The checks above are the safety net; --force only lets git drop
		// the copied-in files, which it would otherwise refuse to delete.
		if _, err := g.Run(ctx, repoDir, "worktree", "remove", "--force", res.Path); err != nil {
			return Removal{}, fmt.Errorf("worktree: remove %s: %w", res.Path, err)
		}
		res.Removed = true
		removeEmptyParents(filepath.Dir(res.Path))
		if st.Ahead == 0 {
			if _, err := g.Run(ctx, repoDir, "branch", "-D", res.Branch); err != nil {
				return res, fmt.Errorf("worktree: delete branch %s: %w", res.Branch, err)
			}
		}
	}
	if len(why) > 0 {
		where := res.Path
		if res.Removed {
			where = "branch " + res.Branch
		}
		res.Reason = fmt.Sprintf("kept %s: %s", where, strings.Join(why, "; "))
	}
	return res, nil
}

// removeEmptyParents removes the default worktree root (.herd/worktrees)
// and the .herd directory above it once they are empty (os.Remove
// refuses non-empty ones). A configured root is the user's and stays.
func removeEmptyParents(dir string) {
	parent := filepath.Dir(dir)
	if filepath.Base(dir) != filepath.Base(DefaultDir) || filepath.Base(parent) != filepath.Dir(DefaultDir) {
		return
	}
	if os.Remove(dir) == nil {
		_ = os.Remove(parent)
	}
}

// PruneOptions select the worktrees Prune removes.
type PruneOptions struct {
	Workdir string                    // any directory of the repository
	Root    string                    // as in Options
	Force   bool                      // remove dirty worktrees too (their uncommitted changes are lost)
	InUse   func(session string) bool // sessions whose worktree is left alone; nil: none
}

// Prune removes the session worktrees under the root that Remove kept. A
// clean worktree is removed; a dirty one only with Force. A branch with
// commits of its own is never deleted (the worktree directory goes, the
// branch and its commits stay, and Reason says so).
func (m *Manager) Prune(ctx context.Context, opts PruneOptions) ([]Removal, error) {
	r, err := m.locate(ctx, opts.Workdir)
	if err != nil {
		return nil, err
	}
	root := Options{Root: opts.Root}.root(r)
	defer m.lockRepo(r.commonDir)()
	if _, err := m.git().Run(ctx, r.top, "worktree", "prune"); err != nil {
		return nil, fmt.Errorf("worktree: %w", err)
	}
	all, err := m.list(ctx, r.top)
	if err != nil {
		return nil, err
	}
	var out []Removal
	var errs []error
	for _, l := range all {
		session := filepath.Base(l.path)
		if !samePath(filepath.Dir(l.path), root) || l.branch != Branch(session) || checkSession(session) != nil {
			continue
		}
		if opts.InUse != nil && opts.InUse(session) {
			continue
		}
		res, err := m.removeOne(ctx, r.top, Removal{Session: session, Path: l.path, Branch: l.branch}, true, opts.Force)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, res)
	}
	return out, errors.Join(errs...)
}
