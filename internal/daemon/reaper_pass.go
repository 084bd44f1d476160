package daemon

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"sync"
	"syscall"
	"time"

	"herd"
	"herd/internal/api"
	"herd/internal/reaper"
	"herd/internal/store"
	"herd/internal/tmux"
)

// reapOptions shape one reaper pass.
type reapOptions struct {
	// dryRun decides and reports, changing nothing.
	dryRun bool
	// afterList, when set, runs once the first listing has been decided
	// on, before any re-check and kill (tests: output arriving between
	// listing and kill).
	afterList func()
}

// reapState is what the store says at one moment, for the reaper.
type reapState struct {
	roles    map[string]herd.Role
	sessions map[string]herd.Session // of every host: a name recorded anywhere is managed
	incs     map[string]herd.Incarnation
	incErr   map[string]error // by session name
}

// reapPass runs one reaper round:
//
//  1. read the store and list every tmux pane with one list-panes call; a
//     failed listing aborts the round (no partial picture acts), while
//     "no server running" means there are no tmux sessions at all, so exec
//     sessions are still judged and tmux ones absent from it are left to
//     the prober;
//  2. decide each candidate with reaper.Decide;
//  3. just before each kill, list again and re-read the store, and kill
//     only when the same session (same pane and pane pid, same
//     incarnation) is still detached and still eligible; kills run
//     probe.concurrency at a time.
//
// Managed sessions go down through the stop path (identity verified, one
// `reaped` event with the reason and idle time, resume snapshot kept) with
// DropReplica set whatever the reason: an idle or archived session's work
// is done, an orphan of a role no longer declared has no replica count to
// drop, and relaunching an orphan whose workdir is gone would only fail;
// without it the reconciler would start a fresh replica in the freed slot.
// `herd resume` or `herd scale` brings one back. A herd-named tmux session
// with no record is killed with an exact tmux target and gets a `reaped`
// event (reason orphan) written here. tmux not installed makes the tmux
// part a no-op, reported in Notes.
func (d *Daemon) reapPass(ctx context.Context, o reapOptions) (api.ReapReport, error) {
	d.reapMu.Lock() // one pass at a time: the loop's and `herd reap`'s
	defer d.reapMu.Unlock()
	start := time.Now()
	rep := api.ReapReport{DryRun: o.dryRun, StartedAt: start.UTC(), Reaped: map[string]int{}}

	tmuxOK := d.tmuxInstalled()
	if !tmuxOK {
		rep.Notes = append(rep.Notes, fmt.Sprintf("tmux binary %q not found: tmux sessions not examined", d.cfg.Tmux.Binary))
	}
	st, err := d.reapState(ctx, "")
	if err != nil {
		return rep, fmt.Errorf("reap: read store: %w", err)
	}
	l, err := d.reapListing(ctx, tmuxOK)
	if err != nil {
		return rep, fmt.Errorf("reap: %w; nothing reaped", err)
	}
	if l.NoServer {
		rep.Notes = append(rep.Notes, "no tmux server running: no tmux sessions")
	}

	now := time.Now()
	type pending struct {
		i     int
		facts reaper.Facts
		dec   reaper.Decision
	}
	var reaps []pending
	for _, name := range reapCandidates(st, l, d.host) {
		f := d.reapFacts(ctx, name, st, l)
		dec := reaper.Decide(f, d.reapPolicy(), now)
		if dec.Verdict == reaper.Ignore {
			continue
		}
		c := candidate(f, dec)
		switch dec.Verdict {
		case reaper.Reap:
			c.Action = api.ReapActionWouldReap
			reaps = append(reaps, pending{len(rep.Candidates), f, dec})
		case reaper.Keep:
			c.Action = api.ReapActionKept
		default:
			c.Action = api.ReapActionSkipped
		}
		rep.Candidates = append(rep.Candidates, c)
	}
	if o.afterList != nil {
		o.afterList()
	}

	// Kills run with bounded concurrency, so one agent that ignores
	// SIGTERM for the grace period does not hold up the others; each
	// makes its own re-check, and each writes only its own candidate.
	sem := make(chan struct{}, max(1, d.cfg.Probe.Concurrency))
	var wg sync.WaitGroup
	for _, p := range reaps {
		if o.dryRun {
			break
		}
		c := &rep.Candidates[p.i]
		if ctx.Err() != nil {
			c.Action, c.Error = api.ReapActionSkipped, "pass cancelled before the kill"
			continue
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			dec, err := d.reapOne(ctx, p.facts, p.dec, tmuxOK)
			if err != nil {
				c.Action, c.Error = api.ReapActionSkipped, err.Error()
				return
			}
			c.Action, c.Reason, c.Detail = api.ReapActionReaped, dec.Reason, dec.Detail
			c.IdleSeconds = dec.IdleFor.Seconds()
			d.log.Info("reaped", "session", c.Session, "reason", dec.Reason, "detail", dec.Detail, "idle_for", dec.IdleFor.Round(time.Second))
		})
	}
	wg.Wait()
	for _, c := range rep.Candidates {
		switch c.Action {
		case api.ReapActionReaped, api.ReapActionWouldReap:
			rep.Reaped[c.Reason]++
		case api.ReapActionKept:
			rep.Kept++
		default:
			rep.Skipped++
		}
	}
	rep.DurationMS = time.Since(start).Milliseconds()
	return rep, nil
}

// reapOne re-checks one candidate with fresh facts and, if it is still the
// same session and still eligible, kills it. It returns the fresh decision.
// For a managed session the re-check runs just outside the session's lock
// (the stop path takes it); a relaunch in between is caught by the stop
// path's compare-and-set on the incarnation checked here.
func (d *Daemon) reapOne(ctx context.Context, first reaper.Facts, firstDec reaper.Decision, tmuxOK bool) (reaper.Decision, error) {
	// The kill itself must not be cut short by the caller going away: a
	// half-done stop would read as a crash.
	kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d.grace+30*time.Second)
	defer cancel()
	if !first.Managed {
		unlock := d.locks.Lock(first.Name) // no launch of this name meanwhile
		defer unlock()
	}
	dec, f, err := d.recheck(kctx, first, firstDec, tmuxOK)
	if err != nil {
		return dec, err
	}
	if !first.Managed {
		return dec, d.reapUnmanaged(kctx, f, dec)
	}
	err = d.stop(kctx, stopRequest{
		Name: f.Name, Reason: dec.Reason, Kind: herd.EventReaped, DropReplica: true,
		Incarnation: f.Incarnation, Data: reapData(dec),
		Message: fmt.Sprintf("reaped (%s): %s", dec.Reason, dec.Detail),
		// Under the session's lock: activity recorded after the re-check
		// (a hook, output seen by the watchdog) keeps the session.
		Guard: func(s herd.Session) error {
			var last time.Time
			if s.LastActivityAt != nil {
				last = *s.LastActivityAt
			}
			if !last.Equal(f.LastActivityAt) || s.Activity != f.Activity || s.State != f.State {
				return errors.New("re-check: activity arrived just before the kill")
			}
			if dec.Row.PaneID != "" {
				return d.stillDetached(kctx, f.Name, dec.Row, tmuxOK)
			}
			return nil
		},
	})
	if errors.Is(err, errAlreadyStopped) {
		return dec, errors.New("re-check: stopped or relaunched meanwhile")
	}
	return dec, err
}

// stillDetached is the last look at a tmux session, under its lock just
// before the first signal: the same pane, readable, and nobody attached.
// Someone attaching after the re-check's listing keeps the session.
func (d *Daemon) stillDetached(ctx context.Context, name string, was reaper.Row, tmuxOK bool) error {
	l, err := d.reapListing(ctx, tmuxOK)
	if err != nil {
		return fmt.Errorf("last look: %w", err)
	}
	row, ok := l.Rows[name]
	switch {
	case l.Unattributed != nil:
		return fmt.Errorf("last look: the listing has a row of no session: %w", l.Unattributed)
	case !ok:
		return errors.New("last look: the tmux session is gone")
	case row.Err != nil:
		return fmt.Errorf("last look: unreadable: %w", row.Err)
	case !row.Same(was):
		return fmt.Errorf("last look: a different tmux session now (pane %s pid %d)", row.PaneID, row.PID)
	case row.Attached > 0:
		return fmt.Errorf("last look: attached (%d client(s)) just before the kill", row.Attached)
	}
	return nil
}

// recheck lists again and re-reads the store just before a kill.
func (d *Daemon) recheck(ctx context.Context, first reaper.Facts, firstDec reaper.Decision, tmuxOK bool) (reaper.Decision, reaper.Facts, error) {
	l, err := d.reapListing(ctx, tmuxOK)
	if err != nil {
		return reaper.Decision{}, reaper.Facts{}, fmt.Errorf("re-check: %w", err)
	}
	st, err := d.reapState(ctx, first.Name)
	if err != nil {
		return reaper.Decision{}, reaper.Facts{}, fmt.Errorf("re-check: read store: %w", err)
	}
	f := d.reapFacts(ctx, first.Name, st, l)
	dec := reaper.Decide(f, d.reapPolicy(), time.Now())
	switch {
	case f.Managed != first.Managed:
		return dec, f, errors.New("re-check: its record appeared or vanished meanwhile")
	case f.Incarnation != first.Incarnation:
		return dec, f, fmt.Errorf("re-check: relaunched meanwhile (incarnation %s, was %s)", f.Incarnation, first.Incarnation)
	case dec.Verdict != reaper.Reap:
		return dec, f, fmt.Errorf("re-check: no longer eligible: %s: %s", dec.Reason, dec.Detail)
	case !dec.Row.Same(firstDec.Row):
		return dec, f, fmt.Errorf("re-check: a different tmux session now (pane %s pid %d, was %s pid %d)", dec.Row.PaneID, dec.Row.PID, firstDec.Row.PaneID, firstDec.Row.PID)
	}
	return dec, f, nil
}

// reapUnmanaged kills a herd-named tmux session that has no record, by its
// exact name, and records a `reaped` event.
func (d *Daemon) reapUnmanaged(ctx context.Context, f reaper.Facts, dec reaper.Decision) error {
	if err := d.tmuxClient().KillSession(ctx, f.Name); err != nil {
		if errors.Is(err, tmux.ErrNoSession) || errors.Is(err, tmux.ErrNoServer) {
			return errors.New("gone before the kill")
		}
		return err
	}
	data := reapData(dec)
	data["pane_id"], data["pane_pid"], data["unmanaged"] = dec.Row.PaneID, dec.Row.PID, true
	msg := fmt.Sprintf("reaped (%s): %s", dec.Reason, dec.Detail)
	return d.st.Update(ctx, func(tx store.Tx) error {
		return tx.AppendEvent(d.event(herd.Session{Name: f.Name}, "", herd.EventReaped, dec.Reason, msg, data))
	})
}

func reapData(dec reaper.Decision) map[string]any {
	return map[string]any{
		"idle_for":     dec.IdleFor.Round(time.Second).String(),
		"idle_seconds": dec.IdleFor.Seconds(),
		"detail":       dec.Detail,
	}
}

func (d *Daemon) reapPolicy() reaper.Policy {
	r := d.cfg.Reaper
	return reaper.Policy{IdleAfter: r.IdleAfter, Orphans: r.Orphans, Archived: r.Archived}
}

// tmuxInstalled reports whether the configured tmux binary can be found.
func (d *Daemon) tmuxInstalled() bool {
	bin := d.cfg.Tmux.Binary
	if bin == "" {
		bin = "tmux"
	}
	_, err := exec.LookPath(bin)
	return err == nil
}

// reapListing lists every pane once. It never uses display-message: that
// returns empty fields for a session it cannot resolve.
func (d *Daemon) reapListing(ctx context.Context, tmuxOK bool) (reaper.Listing, error) {
	if !tmuxOK {
		return reaper.Listing{Unavailable: true}, nil
	}
	panes, err := d.tmuxClient().ListPanes(ctx)
	return reaper.NewListing(panes, err)
}

// reapState reads roles and sessions (only the named one when only is
// set) with the incarnations of this host's sessions, in one transaction.
func (d *Daemon) reapState(ctx context.Context, only string) (reapState, error) {
	st := reapState{
		roles: map[string]herd.Role{}, sessions: map[string]herd.Session{},
		incs: map[string]herd.Incarnation{}, incErr: map[string]error{},
	}
	err := d.st.View(ctx, func(tx store.Tx) error {
		roles, err := tx.Roles()
		if err != nil {
			return err
		}
		for _, r := range roles {
			st.roles[r.Name] = r
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
			incs, err := tx.OpenIncarnations()
			if err != nil {
				return err
			}
			for _, inc := range incs {
				open[inc.ID] = inc
			}
		}
		for _, s := range sessions {
			st.sessions[s.Name] = s
			if s.Host != d.host || s.State == herd.StateStopped || s.Incarnation == "" {
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
func reapCandidates(st reapState, l reaper.Listing, host string) []string {
	var names []string
	for name, s := range st.sessions {
		if s.Host == host && s.State != herd.StateStopped {
			names = append(names, name)
		}
	}
	for name := range l.Rows {
		if _, recorded := st.sessions[name]; !recorded && reaper.InNamespace(name) {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return names
}

// reapFacts gathers what is known of one candidate.
func (d *Daemon) reapFacts(ctx context.Context, name string, st reapState, l reaper.Listing) reaper.Facts {
	f := reaper.Facts{Name: name}
	s, ok := st.sessions[name]
	if !ok {
		f.Tmux, f.Listing = true, l
		return f
	}
	if s.Host != d.host {
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
	f.WorkdirGone, f.WorkdirErr = d.workdirGone(ctx, f.Workdir)
	if s.RuntimeKind == herd.RuntimeExec {
		if inc.ID != "" {
			f.OutputAt, f.OutputErr = d.outputTime(name, inc.ID)
		}
	} else {
		f.Tmux, f.Listing = true, l
	}
	return f
}

// workdirGone reports whether a workdir no longer exists (or is no
// directory). A stat that fails otherwise, or hangs (a dead network
// mount), leaves it unknown.
func (d *Daemon) workdirGone(ctx context.Context, dir string) (bool, error) {
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
	timer := time.NewTimer(d.cfg.Probe.Timeout)
	defer timer.Stop()
	select {
	case r := <-done:
		switch {
		case errors.Is(r.err, os.ErrNotExist), errors.Is(r.err, syscall.ENOTDIR):
			return true, nil
		case r.err != nil:
			return false, r.err
		}
		return !r.fi.IsDir(), nil
	case <-timer.C:
		return false, fmt.Errorf("stat %s: no answer within %s", dir, d.cfg.Probe.Timeout)
	case <-ctx.Done():
		return false, ctx.Err()
	}
}

// outputTime is when an exec incarnation's captured output last grew.
func (d *Daemon) outputTime(session, inc string) (time.Time, error) {
	var last time.Time
	outPath, errPath := d.exec.Paths(session, inc)
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

// candidate renders a decision for the report.
func candidate(f reaper.Facts, dec reaper.Decision) api.ReapCandidate {
	c := api.ReapCandidate{
		Session: f.Name, Incarnation: f.Incarnation, RuntimeKind: herd.RuntimeExec,
		Unmanaged: !f.Managed, Attached: dec.Row.Attached > 0,
		Verdict: string(dec.Verdict), Reason: dec.Reason, Detail: dec.Detail,
		IdleSeconds: dec.IdleFor.Seconds(),
	}
	if f.Tmux {
		c.RuntimeKind = herd.RuntimeTmux
	}
	return c
}
