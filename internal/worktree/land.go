package worktree

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"herd/internal/gitx"
)

// Landing modes: how a branch's commits reach its base.
const (
	ModeMerge  = "merge"  // a merge commit with the branch as second parent
	ModeSquash = "squash" // one commit with the branch's combined change
	ModeRebase = "rebase" // the branch's commits replayed on the base
)

// Errors of Land, Commits and Diff; each is wrapped with the details.
var (
	ErrNoBranch    = errors.New("branch does not exist")
	ErrBadMode     = errors.New("landing mode is not merge, squash or rebase")
	ErrEmpty       = errors.New("branch has nothing to land")
	ErrConflict    = errors.New("branch conflicts with its base")
	ErrCheckFailed = errors.New("check of the landing failed")
	ErrBaseMoved   = errors.New("base moved while landing")
	ErrDirtyBase   = errors.New("the checkout of the base refused the fast-forward")
)

// fallbackIdentity is the committer of herd's commits in a repository
// where git knows no identity.
var fallbackIdentity = map[string]string{"user.name": "herd", "user.email": "herd@localhost"}

// LandOptions say what to land where.
type LandOptions struct {
	Repo    string // any directory inside the repository
	Branch  string // the task's branch, e.g. herd/t-3 (short name)
	Base    string // the base branch, short name, e.g. main
	Mode    string // ModeMerge (default when ""), ModeSquash or ModeRebase
	Message string // the merge or squash commit message; "" for a default
	// Check, when set, runs in the directory of the merge result before
	// the base moves; a non-nil error refuses the landing (the base is
	// untouched).
	Check func(ctx context.Context, dir string) error
	// Commit, when set, is the commit of Branch to land (the one a person
	// reviewed); it must be the branch's tip or one of its ancestors:
	// commits made on the branch after it are not landed (ErrMoved when
	// it is not on the branch). "" lands the branch's tip.
	Commit string
}

// ErrMoved: the commit to land is no longer on the branch.
var ErrMoved = errors.New("the commit to land is not on the branch")

// Landing is what Land did.
type Landing struct {
	Old    string // the base's commit before
	New    string // the base's commit after (the landed commit)
	Tip    string // the commit of the branch that landed
	Synced string // the worktree that had Base checked out and was fast-forwarded; "" if none
}

// ConflictError is a landing stopped by conflicts. It wraps ErrConflict.
type ConflictError struct {
	Mode   string
	Branch string
	Base   string
	Files  []string // the conflicting paths, relative to the top level
}

// Error implements error.
func (e *ConflictError) Error() string {
	return fmt.Sprintf("worktree: %s %s into %s: %v: %s", e.Mode, e.Branch, e.Base, ErrConflict, strings.Join(e.Files, ", "))
}

// Unwrap returns ErrConflict.
func (e *ConflictError) Unwrap() error { return ErrConflict }

// Land puts the commits of o.Branch on o.Base. The result is made in a
// temporary detached worktree (removed afterwards, whatever happens), so
// no checkout of the user's changes; o.Check runs there; then the base
// moves only if it still is where it was: with a compare-and-swap of its
// ref, or, when a worktree has it checked out, with a fast-forward there
// that git refuses rather than overwrite uncommitted changes. Lands in
// one repository happen one at a time. On any error the base and the
// branch are as they were.
func (m *Manager) Land(ctx context.Context, o LandOptions) (Landing, error) {
	mode := o.Mode
	if mode == "" {
		mode = ModeMerge
	}
	if mode != ModeMerge && mode != ModeSquash && mode != ModeRebase {
		return Landing{}, fmt.Errorf("worktree: land mode %q: %w", o.Mode, ErrBadMode)
	}
	r, err := m.locate(ctx, o.Repo)
	if err != nil {
		return Landing{}, err
	}
	if o.Branch == o.Base {
		return Landing{}, fmt.Errorf("worktree: land %q into itself", o.Branch)
	}
	// Lands wait for each other for their whole length; the repository
	// lock, which status reads also take, is released while Check runs.
	defer m.lockRepo(r.commonDir + "\x00land")()
	repoLock := &held{m: m, key: r.commonDir}
	repoLock.lock()
	defer repoLock.release()

	old, err := m.branchTip(ctx, r.top, o.Base)
	if err != nil {
		return Landing{}, fmt.Errorf("worktree: land into base %q: %w", o.Base, err)
	}
	tip, err := m.branchTip(ctx, r.top, o.Branch)
	if err != nil {
		if errors.Is(err, ErrNoBase) {
			err = ErrNoBranch
		}
		return Landing{}, fmt.Errorf("worktree: land branch %q: %w", o.Branch, err)
	}
	if o.Commit != "" {
		on, err := m.git().Exit(ctx, r.top, "merge-base", "--is-ancestor", "--end-of-options", o.Commit, tip)
		if err != nil {
			return Landing{}, fmt.Errorf("worktree: %w", err)
		}
		if !on {
			return Landing{}, fmt.Errorf("worktree: land %s of %s: %w", o.Commit, o.Branch, ErrMoved)
		}
		if tip, err = m.git().Line(ctx, r.top, "rev-parse", "--verify", "--quiet", "--end-of-options", o.Commit+"^{commit}"); err != nil {
			return Landing{}, fmt.Errorf("worktree: %w", err)
		}
	}
	n, err := m.aheadOf(ctx, r.top, old, tip)
	if err != nil {
		return Landing{}, err
	}
	if n == 0 {
		return Landing{}, fmt.Errorf("worktree: %s has no commits not in %s: %w", o.Branch, o.Base, ErrEmpty)
	}

	start := old
	if mode == ModeRebase {
		start = tip
	}
	tmp, err := m.addTemp(ctx, r.top, start)
	if err != nil {
		return Landing{}, err
	}
	defer func() {
		repoLock.lock() // also when Check panicked
		m.removeTemp(ctx, r.top, tmp)
	}()
	l := lander{m: m, dir: tmp, o: o, mode: mode, old: old, tip: tip}
	l.ident, err = m.identity(ctx, r.top)
	if err != nil {
		return Landing{}, err
	}
	landed, err := l.make(ctx)
	if err != nil {
		return Landing{}, err
	}
	res := Landing{Old: old, New: landed, Tip: tip}

	if o.Check != nil {
		repoLock.release()
		err := o.Check(ctx, tmp)
		repoLock.lock()
		if err != nil {
			return Landing{}, fmt.Errorf("worktree: land %s into %s: %w: %w", o.Branch, o.Base, ErrCheckFailed, err)
		}
	}
	res.Synced, err = m.moveBase(ctx, r.top, o, mode, old, landed)
	if err != nil {
		return Landing{}, err
	}
	return res, nil
}

// held is a repository lock that can be let go and taken again.
type held struct {
	m      *Manager
	key    string
	unlock func()
}

func (h *held) lock() {
	if h.unlock == nil {
		h.unlock = h.m.lockRepo(h.key)
	}
}

func (h *held) release() {
	if h.unlock != nil {
		h.unlock()
		h.unlock = nil
	}
}

// branchTip returns the commit of the local branch name, or an error
// wrapping ErrNoBase when there is no such branch.
func (m *Manager) branchTip(ctx context.Context, dir, name string) (string, error) {
	ref := "refs/heads/" + name
	g := m.git()
	// show-ref --verify takes the exact ref only: no revision syntax
	// (main~1), no abbreviation.
	ok, err := g.Exit(ctx, dir, "show-ref", "--verify", "--quiet", ref)
	if err != nil {
		return "", fmt.Errorf("worktree: %w", err)
	}
	if !ok {
		return "", ErrNoBase
	}
	sha, err := g.Line(ctx, dir, "rev-parse", "--verify", "--quiet", ref+"^{commit}")
	if err != nil {
		return "", fmt.Errorf("worktree: %w", err)
	}
	return sha, nil
}

// identity returns the -c options that give herd's commits in the
// repository of dir an identity when git knows none (no user.name or
// user.email configured, nothing in the environment); nil otherwise.
func (m *Manager) identity(ctx context.Context, dir string) ([]string, error) {
	g := m.git()
	known := true
	for _, v := range []string{"GIT_AUTHOR_IDENT", "GIT_COMMITTER_IDENT"} {
		if _, err := g.Run(ctx, dir, "var", v); err != nil {
			known = false
		}
	}
	if known {
		return nil, nil
	}
	var args []string
	for _, key := range []string{"user.name", "user.email"} {
		set, err := g.Exit(ctx, dir, "config", "--get", key)
		if err != nil {
			return nil, fmt.Errorf("worktree: %w", err)
		}
		if !set {
			args = append(args, "-c", key+"="+fallbackIdentity[key])
		}
	}
	return args, nil
}

// addTemp adds a detached worktree at commit in a new temporary directory.
func (m *Manager) addTemp(ctx context.Context, top, commit string) (string, error) {
	m.sweepLandings(ctx, top)
	tmp, err := os.MkdirTemp("", landPrefix)
	if err != nil {
		return "", fmt.Errorf("worktree: %w", err)
	}
	if _, err := m.git().Run(ctx, top, "worktree", "add", "--quiet", "--detach", "--lock", "--reason", landLock(), tmp, commit); err != nil {
		m.removeTemp(ctx, top, tmp)
		return "", fmt.Errorf("worktree: temporary worktree for landing: %w", err)
	}
	return tmp, nil
}

// removeTemp removes the temporary worktree at tmp and its registration.
// Errors are ignored: each step works on whatever the previous one left.
func (m *Manager) removeTemp(ctx context.Context, top, tmp string) {
	// A fresh context: the caller's may be what ended the landing.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), gitx.DefaultTimeout)
	defer cancel()
	g := m.git()
	_, _ = g.Run(ctx, top, "worktree", "remove", "--force", "--force", tmp)
	_ = os.RemoveAll(tmp)
	_, _ = g.Run(ctx, top, "worktree", "prune")
}

// lander makes the landed commit in a temporary worktree.
type lander struct {
	m     *Manager
	dir   string // the temporary worktree
	o     LandOptions
	mode  string
	old   string   // the base's commit
	tip   string   // the branch's commit
	ident []string // -c options giving commits an identity
}

// git runs git in the temporary worktree with the identity options.
func (l *lander) git(ctx context.Context, args ...string) ([]byte, error) {
	return l.m.git().Run(ctx, l.dir, append(append([]string{}, l.ident...), args...)...)
}

// make computes the landed commit.
func (l *lander) make(ctx context.Context) (string, error) {
	what := fmt.Sprintf("%s %s into %s", l.mode, l.o.Branch, l.o.Base)
	switch l.mode {
	case ModeMerge:
		msg := l.o.Message
		if msg == "" {
			msg = fmt.Sprintf("Merge branch '%s' into %s", l.o.Branch, l.o.Base)
		}
		if _, err := l.git(ctx, "merge", "--quiet", "--no-ff", "--no-edit", "-m", msg, l.tip); err != nil {
			return "", l.failed(ctx, err, "merge", "--abort")
		}
	case ModeSquash:
		if _, err := l.git(ctx, "merge", "--quiet", "--squash", l.tip); err != nil {
			// A squash leaves no MERGE_HEAD for merge --abort.
			return "", l.failed(ctx, err, "reset", "--hard", "--quiet")
		}
		same, err := l.m.git().Exit(ctx, l.dir, "diff", "--cached", "--quiet")
		if err != nil {
			return "", fmt.Errorf("worktree: %s: %w", what, err)
		}
		if same {
			return "", fmt.Errorf("worktree: %s: the squashed change is empty: %w", what, ErrEmpty)
		}
		msg := l.o.Message
		if msg == "" {
			msg = fmt.Sprintf("Squashed branch '%s' into %s", l.o.Branch, l.o.Base)
		}
		if _, err := l.git(ctx, "commit", "--quiet", "-m", msg); err != nil {
			return "", fmt.Errorf("worktree: %s: %w", what, err)
		}
	case ModeRebase:
		// Never an editor; never other branches moved along (rebase.updateRefs).
		_, err := l.git(ctx, "-c", "core.editor=true", "-c", "rebase.updateRefs=false",
			"rebase", "--quiet", "--no-autostash", l.old)
		if err != nil {
			return "", l.failed(ctx, err, "rebase", "--abort")
		}
	}
	head, err := l.m.git().Line(ctx, l.dir, "rev-parse", "--verify", "HEAD")
	if err != nil {
		return "", fmt.Errorf("worktree: %s: %w", what, err)
	}
	if head == l.old {
		return "", fmt.Errorf("worktree: %s: every commit is in the base already: %w", what, ErrEmpty)
	}
	return head, nil
}

// failed turns a failed merge or rebase into a ConflictError when it
// stopped on conflicts (after undoing it with abort), or wraps err.
func (l *lander) failed(ctx context.Context, err error, abort ...string) error {
	out, lerr := l.m.git().Run(ctx, l.dir, "diff", "--name-only", "-z", "--diff-filter=U")
	_, _ = l.m.git().Run(ctx, l.dir, abort...)
	var files []string
	for _, f := range strings.Split(string(out), "\x00") {
		if f != "" {
			files = append(files, f)
		}
	}
	if lerr != nil || len(files) == 0 {
		return fmt.Errorf("worktree: %s %s into %s: %w", l.mode, l.o.Branch, l.o.Base, err)
	}
	return &ConflictError{Mode: l.mode, Branch: l.o.Branch, Base: l.o.Base, Files: files}
}

// moveBase moves o.Base from old to landed if it is still at old, and
// returns the worktree that has it checked out (and was fast-forwarded),
// if any.
func (m *Manager) moveBase(ctx context.Context, top string, o LandOptions, mode, old, landed string) (string, error) {
	g := m.git()
	all, err := m.list(ctx, top)
	if err != nil {
		return "", err
	}
	var checkedOut []string
	for _, l := range all {
		if l.branch == o.Base && !l.prunable {
			checkedOut = append(checkedOut, l.path)
		}
	}
	ref := "refs/heads/" + o.Base
	switch len(checkedOut) {
	case 0:
		msg := fmt.Sprintf("herd: land %s (%s)", o.Branch, mode)
		if _, err := g.Run(ctx, top, "update-ref", "-m", msg, ref, landed, old); err != nil {
			if now, _ := m.branchTip(ctx, top, o.Base); now != old {
				if now == "" {
					now = "nothing (deleted)"
				}
				return "", fmt.Errorf("worktree: %s is at %s, not %s: %w", o.Base, now, old, ErrBaseMoved)
			}
			return "", fmt.Errorf("worktree: move %s: %w", o.Base, err)
		}
		return "", nil
	case 1:
	default:
		return "", fmt.Errorf("worktree: %s is checked out in several worktrees (%s); not moving it",
			o.Base, strings.Join(checkedOut, ", "))
	}
	w := checkedOut[0]
	head := func() string {
		h, _ := g.Line(ctx, w, "rev-parse", "--verify", "--quiet", "HEAD")
		return h
	}
	if h := head(); h != old {
		return "", fmt.Errorf("worktree: %s (checked out in %s) is at %s, not %s: %w", o.Base, w, h, old, ErrBaseMoved)
	}
	// --no-autostash: the user's changes are never stashed and replayed.
	if _, err := g.Run(ctx, w, "merge", "--quiet", "--ff-only", "--no-autostash", landed); err != nil {
		if h := head(); h != old {
			return "", fmt.Errorf("worktree: %s (checked out in %s) is at %s, not %s: %w", o.Base, w, h, old, ErrBaseMoved)
		}
		msg := err.Error()
		var ge *gitx.Error
		if errors.As(err, &ge) && ge.Stderr != "" {
			msg = ge.Stderr
		}
		return "", fmt.Errorf("worktree: %s checked out in %s: %w: %s", o.Base, w, ErrDirtyBase, msg)
	}
	return w, nil
}

// Commits counts the commits of branch that base does not have; -1 when
// base no longer names a commit. branch is a local branch (short name);
// base is any revision.
func (m *Manager) Commits(ctx context.Context, repo, base, branch string) (int, error) {
	r, err := m.locate(ctx, repo)
	if err != nil {
		return 0, err
	}
	if _, err := m.branchTip(ctx, r.top, branch); err != nil {
		if errors.Is(err, ErrNoBase) {
			err = ErrNoBranch
		}
		return 0, fmt.Errorf("worktree: branch %q: %w", branch, err)
	}
	return m.ahead(ctx, r.top, base, branch)
}

// Diff returns the change branch makes since it left base (git diff
// base...branch), at most max bytes of it (cut at a line end; max <= 0
// for all), and whether it was cut. branch is a local branch (short
// name); base is any revision.
func (m *Manager) Diff(ctx context.Context, repo, base, branch string, max int) (string, bool, error) {
	r, err := m.locate(ctx, repo)
	if err != nil {
		return "", false, err
	}
	baseSHA, err := m.resolve(ctx, r.top, base)
	if err != nil {
		return "", false, err
	}
	if baseSHA == "" {
		return "", false, fmt.Errorf("worktree: diff base %q: %w", base, ErrNoBase)
	}
	if _, err := m.branchTip(ctx, r.top, branch); err != nil {
		if errors.Is(err, ErrNoBase) {
			err = ErrNoBranch
		}
		return "", false, fmt.Errorf("worktree: diff branch %q: %w", branch, err)
	}
	out, err := m.git().Run(ctx, r.top, "diff", "--no-color", "--no-ext-diff", baseSHA+"...refs/heads/"+branch, "--")
	if err != nil {
		return "", false, fmt.Errorf("worktree: %w", err)
	}
	if max <= 0 || len(out) <= max {
		return string(out), false, nil
	}
	out = out[:max]
	if i := strings.LastIndexByte(string(out), '\n'); i >= 0 {
		out = out[:i+1]
	}
	return string(out), true, nil
}
