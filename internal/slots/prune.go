package slots

import (
	"context"
	"errors"
	"path/filepath"
	"sort"

	"herd"
	"herd/internal/store"
	"herd/internal/worktree"
)

// PruneWorktrees removes the worktrees herd kept for sessions that no
// longer exist (their role deleted, or kept by a reap): a clean one goes
// (its branch too when it has no commits of its own; a branch with
// commits stays, so nothing committed is lost), a dirty one only with
// force. The worktrees of existing sessions are never touched. The
// repositories looked at are those of the declared worktree roles and
// those named by kept-worktree events. It returns what it removed and
// what it kept, with why, ordered by path.
func (sl *Slots) PruneWorktrees(ctx context.Context, force bool) ([]worktree.Removal, error) {
	exists := map[string]bool{}
	repos := map[string]bool{}
	err := sl.st.Store().View(ctx, func(tx store.Tx) error {
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
		kept, err := tx.Events(store.EventFilter{Host: sl.st.Host(), Kind: herd.EventWorktree})
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
		res, err := sl.o.Worktrees.Prune(ctx, worktree.PruneOptions{
			Workdir: dir, Force: force, InUse: func(session string) bool { return exists[session] },
		})
		if err != nil {
			if errors.Is(err, worktree.ErrNotRepo) {
				continue // the repository itself is gone: nothing left to prune
			}
			sl.o.Log.Warn("worktree prune", "workdir", dir, "err", err)
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

// RemoveWorktree removes a stopped session's worktree under delete role's
// rule (clean, and its branch merged or without commits of its own;
// otherwise kept, with an event saying why and where): the reaper calls it
// after a reap. A resume makes the worktree again.
func (sl *Slots) RemoveWorktree(ctx context.Context, session string) {
	unlock := sl.st.Lock(session) // no resume meanwhile
	defer unlock()
	var s herd.Session
	var role herd.Role
	err := sl.st.Store().View(ctx, func(tx store.Tx) error {
		var err error
		if s, err = tx.Session(session); err != nil {
			return err
		}
		role, err = tx.Role(s.Role)
		return err
	})
	if err != nil || !role.Worktree || s.State.Live() {
		return
	}
	events := sl.removeWorktrees(ctx, role, []herd.Session{s})
	if len(events) == 0 {
		return
	}
	err = sl.st.Store().Update(ctx, func(tx store.Tx) error {
		for _, e := range events {
			if err := tx.AppendEvent(e); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		sl.o.Log.Warn("worktree of a reaped session: record", "session", session, "err", err)
	}
}
