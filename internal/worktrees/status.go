package worktrees

import (
	"context"

	"herd"
	"herd/internal/worktree"
)

// Status returns, by session name, the worktree (path, branch,
// dirty, commits ahead) of each of this host's sessions among names whose
// role runs them in worktrees, from a cache read again at most once per
// tick; a session whose worktree does not exist or cannot be read is left
// out.
func (w *Worktrees) Status(ctx context.Context, names []string) map[string]*worktree.Status {
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	var opts []worktree.Options
	var all []string
	// The live set: roles and this host's sessions with no query (get
	// sessions asks on every call).
	roles, sessions, _, err := w.st.Listing(ctx)
	if err == nil {
		byName := map[string]herd.Role{}
		for _, r := range roles {
			if r.Worktree {
				byName[r.Name] = r
			}
		}
		if len(byName) > 0 {
			for _, s := range sessions {
				all = append(all, s.Name)
				if r, ok := byName[s.Role]; ok && want[s.Name] {
					opts = append(opts, worktree.OptionsFor(r, s.Name))
				}
			}
		}
	}
	out := map[string]*worktree.Status{}
	if err != nil || len(opts) == 0 {
		return out
	}
	present := map[string]bool{}
	for _, n := range all {
		present[n] = true
	}
	w.cache.Forget(func(session string) bool { return present[session] })
	for _, o := range opts {
		st, err := w.cache.Get(ctx, o)
		if err != nil {
			w.o.Log.Debug("worktree status not read", "session", o.Session, "err", err)
			continue
		}
		if st != nil {
			out[o.Session] = st
		}
	}
	return out
}
