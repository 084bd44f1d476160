package worktrees

import (
	"context"
	"errors"
	"path/filepath"
	"sort"

	"herd"
	"herd/internal/store"
	"herd/internal/worktree"
)

// Prune removes the worktrees herd kept for sessions that no
// longer exist (their role deleted, or kept by a reap): a clean one goes
// (its branch too when it has no commits of its own; a branch with
// commits stays, so nothing committed is lost), a dirty one only with
// force. The worktrees of existing sessions are never touched. The
// repositories looked at are those of the declared worktree roles and
// those named by kept-worktree events. It returns what it removed and
// what it kept, with why, ordered by path.
func (w *Worktrees) Prune(ctx context.Context, force bool) ([]worktree.Removal, error) {
	exists := map[string]bool{}
	repos := map[string]bool{}
	err := w.st.Store().View(ctx, func(tx store.Tx) error {
		sessions, err := tx.Sessions()
		if err != nil {
			return err
		}
		for _, s := range sessions {
			exists[s.Name] = true
		}
		roles, err := tx.Roles()
		if err != nil {
			return err
		}
		for _, r := range roles {
			if r.Worktree {
				repos[r.Workdir] = true
			}
		}
		kept, err := tx.Events(store.EventFilter{Host: w.st.Host(), Kind: herd.EventWorktree})
		if err != nil {
			return err
		}
		for _, e := range kept {
			if dir := keptRepo(e); dir != "" {
				repos[dir] = true
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	dirs := make([]string, 0, len(repos))
	for d := range repos {
		dirs = append(dirs, d)
	}
	sort.Strings(dirs)
	seen := map[string]bool{}
	var out []worktree.Removal
	var errs []error
	for _, dir := range dirs {
		res, err := w.o.Manager.Prune(ctx, worktree.PruneOptions{
			Workdir: dir, Force: force, InUse: func(session string) bool { return exists[session] },
		})
		if err != nil {
			if errors.Is(err, worktree.ErrNotRepo) {
				continue // the repository itself is gone: nothing left to prune
			}
			w.o.Log.Warn("worktree prune", "workdir", dir, "err", err)
			errs = append(errs, err)
		}
		for _, r := range res {
			if !seen[r.Path] {
				seen[r.Path] = true
				out = append(out, r)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, errors.Join(errs...)
}

// keptRepo is the repository a kept-worktree event points at: the role's
// workdir it recorded, else the repository above the default worktree
// root (<repo>/.herd/worktrees/<session>); "" when neither is known or
// the directory is gone.
func keptRepo(e herd.Event) string {
	if e.Reason != "kept" {
		return ""
	}
	dir, _ := e.Data["workdir"].(string)
	if dir == "" {
		path, _ := e.Data["path"].(string)
		wt := filepath.Dir(path)
		if path == "" || filepath.Join(filepath.Base(filepath.Dir(wt)), filepath.Base(wt)) != worktree.DefaultDir {
			return ""
		}
		dir = filepath.Dir(filepath.Dir(wt))
	}
	if !filepath.IsAbs(dir) {
		return ""
	}
	return dir
}
