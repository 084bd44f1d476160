package server

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"

	"herd"
	"herd/internal/accounts"
	"herd/internal/api"
	"herd/internal/hosts"
	"herd/internal/store"
)

// sessionViews is get sessions: this host's sessions from the live set
// status keeps (written through, no query), every other host's from the
// store (one query, without the snapshots a listing does not show), by
// name; then the markers and the unmanaged tmux sessions.
func (sv *Server) sessionViews(ctx context.Context) ([]api.SessionView, error) {
	var (
		f      hosts.Fleet
		others []store.SessionPID
		names  []string
	)
	if _, away := sv.st.StoreAway(); away {
		// The fleet's rows wait for the store: this host's sessions,
		// from the live set, are what is known.
		return sv.localViews(ctx)
	}
	err := sv.st.Store().View(ctx, func(tx store.Tx) (err error) {
		if f, err = sv.fleet(tx); err != nil {
			return err
		}
		if others, err = tx.SessionsWithPIDsNotOnHost(sv.st.Host()); err != nil {
			return err
		}
		names, err = tx.SessionNamesOnHost(sv.st.Host())
		return err
	})
	if err != nil {
		return nil, err
	}
	roles, local, live, err := sv.st.Listing(ctx)
	if err != nil {
		return nil, err
	}
	if !sameNames(local, names) {
		// Another host deleted or took over some of this host's rows (a
		// placed role deleted from there, a slot moved): the set is read
		// again, for every reader.
		sv.st.Invalidate()
		if roles, local, live, err = sv.st.Listing(ctx); err != nil {
			return nil, err
		}
	}
	pids := make(map[string]int, len(live))
	for _, l := range live {
		pids[l.S.Name] = l.Inc.AgentIdentity().PID
	}
	// Both in Go's order of names (a PostgreSQL collation may order
	// them otherwise), merged.
	slices.SortFunc(others, func(a, b store.SessionPID) int { return strings.Compare(a.Session.Name, b.Session.Name) })
	snap := sv.o.Prober.Last()
	views := make([]api.SessionView, 0, len(local)+len(others))
	add := func(s herd.Session, pid int) {
		s, _ = f.Mask(s)
		v := baseView(s)
		if s.State.Live() {
			v.PID = pid
		}
		v.Attached = snap.Attached(v.Name)
		v.Escalated = sv.o.Attention != nil && sv.o.Attention.Escalated(v.Name)
		v.Notified = sv.o.Attention != nil && sv.o.Attention.Notified(v.Name)
		views = append(views, v)
	}
	i, j := 0, 0
	for i < len(local) || j < len(others) {
		switch {
		case j == len(others) || (i < len(local) && local[i].Name < others[j].Session.Name):
			add(local[i], pids[local[i].Name])
			i++
		case i < len(local) && local[i].Name == others[j].Session.Name:
			// Moved to another host since the set was read: the
			// store's row.
			i++
		default:
			add(others[j].Session, others[j].PID)
			j++
		}
	}
	if verdicts := sv.o.Roles.OutdatedIn(roles, live, ""); len(verdicts) > 0 {
		for i := range views {
			if v, ok := verdicts[views[i].Name]; ok && views[i].Host == sv.st.Host() {
				views[i].Outdated, views[i].OutdatedReason = true, v.Reason
			}
		}
	}
	sv.markWorktrees(ctx, views)
	markAccounts(roles, views)
	sv.markUsage(ctx, views)
	return append(views, sv.unmanagedViews()...), nil
}

// viewBufs are the buffers get sessions answers are encoded into, kept
// between calls (a thousand sessions make some 600 kB).
var viewBufs = sync.Pool{New: func() any { return new([]byte) }}

// replyViews answers views as reply does, encoded by hand
// (api.AppendSessionViews) into a buffer used again.
func replyViews(w http.ResponseWriter, views []api.SessionView) {
	buf := viewBufs.Get().(*[]byte)
	b := append(api.AppendSessionViews((*buf)[:0], views), '\n')
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(http.StatusOK)
	w.Write(b)
	if cap(b) <= 4<<20 { // an outsize answer is not kept
		*buf = b
		viewBufs.Put(buf)
	}
}

// sameNames reports whether sessions are exactly the sessions called
// names (in any order).
func sameNames(sessions []herd.Session, names []string) bool {
	if len(sessions) != len(names) {
		return false
	}
	have := make(map[string]bool, len(sessions))
	for _, s := range sessions {
		have[s.Name] = true
	}
	for _, n := range names {
		if !have[n] {
			return false
		}
	}
	return true
}

// localViews is sessionViews while the store is away: this host's
// sessions from the live set, with the pids of the live ones.
func (sv *Server) localViews(ctx context.Context) ([]api.SessionView, error) {
	_, local, live, err := sv.st.Listing(ctx)
	if err != nil {
		return nil, err
	}
	pids := make(map[string]int, len(live))
	for _, l := range live {
		pids[l.S.Name] = l.Inc.AgentIdentity().PID
	}
	snap := sv.o.Prober.Last()
	views := make([]api.SessionView, 0, len(local))
	for _, s := range local {
		v := baseView(s)
		if s.State.Live() {
			v.PID = pids[s.Name]
		}
		v.Attached = snap.Attached(v.Name)
		v.Escalated = sv.o.Attention != nil && sv.o.Attention.Escalated(v.Name)
		v.Notified = sv.o.Attention != nil && sv.o.Attention.Notified(v.Name)
		views = append(views, v)
	}
	return views, nil
}

// markAccounts sets each view's account from its role's.
func markAccounts(roles []herd.Role, views []api.SessionView) {
	acct := make(map[string]string, len(roles))
	for _, r := range roles {
		acct[r.Name] = accounts.Of(r)
	}
	for i := range views {
		views[i].Account = acct[views[i].Role]
	}
}
