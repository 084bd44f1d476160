package reaper

import (
	"context"
	"errors"
	"fmt"
	"herd"
	"herd/internal/store"
	"os"
	"sort"
	"syscall"
	"time"
)

// reapState reads roles and sessions (only the named one when only is
// set) with the incarnations of this host's sessions, in one transaction.
func (r *Reaper) reapState(ctx context.Context, only string) (reapState, error) {
	st := reapState{
		roles: map[string]herd.Role{}, sessions: map[string]herd.Session{},
		incs: map[string]herd.Incarnation{}, incErr: map[string]error{},
	}
	err := r.st.Store().View(ctx, func(tx store.Tx) error {
		roles, err := tx.Roles()
		if err != nil {
			return err
		}
		for _, ro := range roles {
			st.roles[ro.Name] = ro
		}
		var sessions []herd.Session
		if only == "" {
			if sessions, err = tx.Sessions(); err != nil {
				return err
			}
		} else if s, err := tx.Session(only); err == nil {
			sessions = append(sessions, s)
		} else if !errors.Is(err, store.ErrNotFound) {
			return err
		}
		// Live sessions' incarnations come in one query; the others (an
		// ended incarnation: backoff, failed) one by one.
		open := map[string]herd.Incarnation{}
		if len(sessions) > 1 {
			incs, err := tx.OpenIncarnationsOnHost(r.st.Host())
			if err != nil {
				return err
			}
			for _, inc := range incs {
				open[inc.ID] = inc
			}
		}
		for _, s := range sessions {
			st.sessions[s.Name] = s
			if s.Host != r.st.Host() || s.State == herd.StateStopped || s.Incarnation == "" {
				continue
			}
			if inc, ok := open[s.Incarnation]; ok {
				st.incs[s.Name] = inc
				continue
			}
			inc, err := tx.Incarnation(s.Incarnation)
			if err != nil {
				st.incErr[s.Name] = fmt.Errorf("incarnation %s: %w", s.Incarnation, err)
				continue
			}
			st.incs[s.Name] = inc
		}
		return nil
	})
	return st, err
}

// reapCandidates lists, by name, this host's sessions that are not
// stopped and the herd-named tmux sessions that have no record.
func reapCandidates(st reapState, l Listing, host string) []string {
	var names []string
	for name, s := range st.sessions {
		if s.Host == host && s.State != herd.StateStopped {
			names = append(names, name)
		}
	}
	for name := range l.Rows {
		if _, recorded := st.sessions[name]; !recorded && InNamespace(name) {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return names
}

// reapFacts gathers what is known of one candidate.
func (r *Reaper) reapFacts(ctx context.Context, name string, st reapState, l Listing) Facts {
	f := Facts{Name: name}
	s, ok := st.sessions[name]
	if !ok {
		f.Tmux, f.Listing = true, l
		return f
	}
	if s.Host != r.st.Host() {
		f.ForeignHost = s.Host
		return f
	}
	f.Managed = true
	f.State, f.Activity, f.Archived, f.Incarnation, f.Role = s.State, s.Activity, s.Archived, s.Incarnation, s.Role
	role, declared := st.roles[s.Role]
	f.RoleDeclared = declared
	f.InfoErr = st.incErr[name]
	inc := st.incs[name]
	f.RootPID = inc.Root.PID
	f.StartedAt = inc.StartedAt
	if f.StartedAt.IsZero() && s.StartedAt != nil {
		f.StartedAt = *s.StartedAt
	}
	if s.LastActivityAt != nil {
		f.LastActivityAt = *s.LastActivityAt
	}
	f.Workdir = inc.Workdir
	if f.Workdir == "" {
		f.Workdir = role.Workdir
	}
	f.WorkdirGone, f.WorkdirErr = r.workdirGone(ctx, f.Workdir)
	if s.RuntimeKind == herd.RuntimeExec {
		if inc.ID != "" {
			f.OutputAt, f.OutputErr = r.outputTime(name, inc.ID)
		}
	} else {
		f.Tmux, f.Listing = true, l
	}
	return f
}

// workdirGone reports whether a workdir no longer exists (or is no
// directory). A stat that fails otherwise, or hangs (a dead network
// mount), leaves it unknown.
func (r *Reaper) workdirGone(ctx context.Context, dir string) (bool, error) {
	if dir == "" {
		return false, nil
	}
	type result struct {
		fi  os.FileInfo
		err error
	}
	done := make(chan result, 1)
	go func() {
		fi, err := os.Stat(dir)
		done <- result{fi, err}
	}()
	timer := time.NewTimer(r.o.Config.Probe.Timeout)
	defer timer.Stop()
	select {
	case res := <-done:
		switch {
		case errors.Is(res.err, os.ErrNotExist), errors.Is(res.err, syscall.ENOTDIR):
			return true, nil
		case res.err != nil:
			return false, res.err
		}
		return !res.fi.IsDir(), nil
	case <-timer.C:
		return false, fmt.Errorf("stat %s: no answer within %s", dir, r.o.Config.Probe.Timeout)
	case <-ctx.Done():
		return false, ctx.Err()
	}
}

// outputTime is when an exec incarnation's captured output last grew.
func (r *Reaper) outputTime(session, inc string) (time.Time, error) {
	var last time.Time
	outPath, errPath := r.o.Exec.Paths(session, inc)
	for _, p := range []string{outPath, errPath} {
		fi, err := os.Stat(p)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return time.Time{}, err
		}
		if fi.ModTime().After(last) {
			last = fi.ModTime()
		}
	}
	return last, nil
}
