package worktree

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"herd/internal/gitx"
)

// Resolve finds the repository dir is in and the base a task in it
// starts from: base itself when given (it must be a local branch), else
// the branch checked out in dir. It returns the repository's top level.
func (m *Manager) Resolve(ctx context.Context, dir, base string) (top, branch string, err error) {
	r, err := m.locate(ctx, dir)
	if err != nil {
		return "", "", err
	}
	if base == "" {
		out, err := m.git().Run(ctx, dir, "symbolic-ref", "--quiet", "--short", "HEAD")
		if err != nil {
			var ge *gitx.Error
			if errors.As(err, &ge) && ge.ExitCode() == 1 {
				return "", "", fmt.Errorf("worktree: %s: %w", dir, ErrDetached)
			}
			return "", "", fmt.Errorf("worktree: %w", err)
		}
		base = strings.TrimSpace(string(out))
	}
	if strings.HasPrefix(base, "-") || strings.ContainsFunc(base, func(c rune) bool { return c <= ' ' || c == 0x7f }) {
		return "", "", fmt.Errorf("worktree: base %q: %w", base, ErrNoBase)
	}
	ok, err := m.git().Exit(ctx, dir, "show-ref", "--verify", "--quiet", "refs/heads/"+base)
	if err != nil {
		return "", "", fmt.Errorf("worktree: %w", err)
	}
	if !ok {
		return "", "", fmt.Errorf("worktree: branch %q of %s: %w", base, r.top, ErrNoBase)
	}
	return r.top, base, nil
}

// RemoveLanded removes the worktree of a task that landed from commit
// tip of its branch (its work is in its base, or in a squash or rebase
// of it there) and, unless keepBranch, its branch: what Remove would
// keep as "ahead" after a squash or a rebase. A worktree with
// uncommitted changes is kept (they were never part of what landed), and
// a branch that moved past tip is kept with its worktree (commits made
// after what landed); Reason says which.
func (m *Manager) RemoveLanded(ctx context.Context, opts Options, keepBranch bool, tip string) (Removal, error) {
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
	g := m.git()
	if now, err := m.branchTip(ctx, r.top, res.Branch); err == nil && now != tip {
		res.Reason = fmt.Sprintf("kept %s and branch %s: it has commits after the one that landed (%s)", path, res.Branch, tip)
		return res, nil
	}
	l, ok := find(all, path)
	switch {
	case !ok || l.prunable:
		res.Absent = true
		if ok {
			_, _ = g.Run(ctx, opts.Workdir, "worktree", "prune")
		}
	default:
		dirty, err := m.dirty(ctx, path)
		if err != nil {
			return Removal{}, err
		}
		if dirty {
			res.Reason = fmt.Sprintf("kept %s: it has uncommitted changes", path)
			return res, nil
		}
		if _, err := g.Run(ctx, opts.Workdir, "worktree", "remove", "--force", path); err != nil {
			return Removal{}, fmt.Errorf("worktree: remove %s: %w", path, err)
		}
		res.Removed = true
		removeEmptyParents(filepath.Dir(path))
	}
	if keepBranch {
		return res, nil
	}
	exists, err := g.Exit(ctx, r.top, "show-ref", "--verify", "--quiet", "refs/heads/"+res.Branch)
	if err != nil || !exists {
		return res, err
	}
	// Deleted only while it still points at tip: a commit made meanwhile
	// keeps it.
	if _, err := g.Run(ctx, r.top, "update-ref", "-d", "refs/heads/"+res.Branch, tip); err != nil {
		res.Reason = fmt.Sprintf("kept branch %s: %v", res.Branch, err)
	}
	return res, nil
}

// Tip returns the commit of the local branch name in the repository of
// dir (an error wrapping ErrNoBase when there is none).
func (m *Manager) Tip(ctx context.Context, dir, name string) (string, error) {
	return m.branchTip(ctx, dir, name)
}

// Prepare makes dir (a checkout of the repository opts describes, e.g. a
// landing's temporary worktree) like a worktree Ensure made: the files of
// opts.Include copied in from opts.Workdir, then opts.Setup run there. It
// returns the setup's output.
func (m *Manager) Prepare(ctx context.Context, dir string, opts Options) (string, error) {
	if _, err := copyIncluded(opts.Workdir, dir, opts.Include); err != nil {
		return "", err
	}
	if len(opts.Setup) == 0 {
		return "", nil
	}
	return m.setup(ctx, dir, opts)
}

// Remote is the remote a task's branch is published to, so that another
// host of the fleet can go on with it.
const Remote = "origin"

// hasRemote reports whether the repository at dir has Remote.
func (m *Manager) hasRemote(ctx context.Context, dir string) (bool, error) {
	ok, err := m.git().Exit(ctx, dir, "config", "--get", "remote."+Remote+".url")
	if err != nil {
		return false, fmt.Errorf("worktree: %w", err)
	}
	return ok, nil
}

// Publish pushes branch of the repository at repo to its remote origin
// (forced: the branch is the task's, rewritten by a rebase), and reports
// whether there was one to push to.
func (m *Manager) Publish(ctx context.Context, repo, branch string) (bool, error) {
	ok, err := m.hasRemote(ctx, repo)
	if err != nil || !ok {
		return false, err
	}
	ref := "refs/heads/" + branch
	if _, err := m.git().Run(ctx, repo, "push", "--quiet", "--force", Remote, ref+":"+ref); err != nil {
		return true, fmt.Errorf("worktree: publish %s: %w", branch, err)
	}
	return true, nil
}

// fetchBranch fetches branch from the repository's remote origin into a
// local branch, and reports whether it is there now (false: no remote,
// or the remote has no such branch).
func (m *Manager) fetchBranch(ctx context.Context, repo, branch string) (bool, error) {
	ok, err := m.hasRemote(ctx, repo)
	if err != nil || !ok {
		return false, err
	}
	ref := "refs/heads/" + branch
	if _, err := m.git().Run(ctx, repo, "ls-remote", "--exit-code", "--heads", Remote, ref); err != nil {
		var ge *gitx.Error
		if errors.As(err, &ge) && ge.ExitCode() == 2 {
			return false, nil // the remote has no such branch
		}
		return false, fmt.Errorf("worktree: %w", err)
	}
	if _, err := m.git().Run(ctx, repo, "fetch", "--quiet", Remote, ref+":"+ref); err != nil {
		return false, fmt.Errorf("worktree: fetch %s: %w", branch, err)
	}
	return true, nil
}
