package reaper

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"time"

	"herd"
	"herd/internal/api"
	"herd/internal/loop"
	"herd/internal/runtime"
	"herd/internal/slots"
	"herd/internal/store"
)

// PassOptions shape one reaper pass.
type PassOptions struct {
	// DryRun decides and reports, changing nothing.
	DryRun bool
	// AfterList, when set, runs once the first listing has been decided
	// on, before any re-check and kill (tests: output arriving between
	// listing and kill).
	AfterList func()
}

// reapState is what the store says at one moment, for the
type reapState struct {
	roles    map[string]herd.Role
	sessions map[string]herd.Session // of every host: a name recorded anywhere is managed
	incs     map[string]herd.Incarnation
	incErr   map[string]error // by session name
}

// Pass runs one reaper round:
//
//  1. read the store and list every tmux pane with one list-panes call; a
//     failed listing aborts the round (no partial picture acts), while
//     "no server running" means there are no tmux sessions at all, so exec
//     sessions are still judged and tmux ones absent from it are left to
//     the prober;
//  2. decide each candidate with Decide;
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
func (r *Reaper) Pass(ctx context.Context, o PassOptions) (api.ReapReport, error) {
	r.passMu.Lock() // one pass at a time: the loop's and `herd reap`'s
	defer r.passMu.Unlock()
	start := time.Now()
	rep := api.ReapReport{DryRun: o.DryRun, StartedAt: start.UTC(), Reaped: map[string]int{}}

	tmuxOK := r.tmuxInstalled()
	if !tmuxOK {
		rep.Notes = append(rep.Notes, fmt.Sprintf("tmux binary %q not found: tmux sessions not examined", r.cfg().Tmux.Binary))
	}
	st, err := r.reapState(ctx, "")
	if err != nil {
		return rep, fmt.Errorf("reap: read store: %w", err)
	}
	l, err := r.reapListing(ctx, tmuxOK)
	if err != nil {
		return rep, fmt.Errorf("reap: %w; nothing reaped", err)
	}
	if l.NoServer {
		rep.Notes = append(rep.Notes, "no tmux server running: no tmux sessions")
	}

	now := time.Now()
	type pending struct {
		i     int
		facts Facts
		dec   Decision
	}
	var reaps []pending
	for _, name := range reapCandidates(st, l, r.st.Host()) {
		f := r.reapFacts(ctx, name, st, l)
		dec := Decide(f, r.reapPolicy(), now)
		if dec.Verdict == Ignore {
			continue
		}
		c := candidate(f, dec)
		switch dec.Verdict {
		case Reap:
			c.Action = api.ReapActionWouldReap
			reaps = append(reaps, pending{len(rep.Candidates), f, dec})
		case Keep:
			c.Action = api.ReapActionKept
		default:
			c.Action = api.ReapActionSkipped
		}
		rep.Candidates = append(rep.Candidates, c)
	}
	if o.AfterList != nil {
		o.AfterList()
	}

	// Kills run with bounded concurrency, so one agent that ignores
	// SIGTERM for the grace period does not hold up the others; each
	// makes its own re-check, and each writes only its own candidate.
	if o.DryRun {
		reaps = nil
	}
	loop.Each(r.cfg().Probe.Concurrency, reaps, func(p pending) {
		c := &rep.Candidates[p.i]
		if ctx.Err() != nil {
			c.Action, c.Error = api.ReapActionSkipped, "pass cancelled before the kill"
			return
		}
		{
			dec, err := r.reapOne(ctx, p.facts, p.dec, tmuxOK)
			if err != nil {
				c.Action, c.Error = api.ReapActionSkipped, err.Error()
				return
			}
			c.Action, c.Reason, c.Detail = api.ReapActionReaped, dec.Reason, dec.Detail
			c.IdleSeconds = dec.IdleFor.Seconds()
			r.o.Log.Info("reaped", "session", c.Session, "reason", dec.Reason, "detail", dec.Detail, "idle_for", dec.IdleFor.Round(time.Second))
		}
	})
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
func (r *Reaper) reapOne(ctx context.Context, first Facts, firstDec Decision, tmuxOK bool) (Decision, error) {
	// The kill itself must not be cut short by the caller going away: a
	// half-done stop would read as a crash.
	kctx, cancel := r.o.Slots.KillContext(ctx)
	defer cancel()
	if !first.Managed {
		unlock := r.st.Lock(first.Name) // no launch of this name meanwhile
		defer unlock()
	}
	dec, f, err := r.recheck(kctx, first, firstDec, tmuxOK)
	if err != nil {
		return dec, err
	}
	if !first.Managed {
		return dec, r.reapUnmanaged(kctx, f, dec)
	}
	err = r.o.Slots.Stop(kctx, slots.StopRequest{
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
				return r.stillDetached(kctx, f.Name, dec.Row, tmuxOK)
			}
			return nil
		},
	})
	if errors.Is(err, slots.ErrAlreadyStopped) {
		return dec, errors.New("re-check: stopped or relaunched meanwhile")
	}
	if err == nil && r.o.Worktrees != nil {
		// Its worktree goes too when that loses nothing (delete role's rule).
		r.o.Worktrees.Remove(kctx, f.Name)
	}
	return dec, err
}

// Listing lists every pane once, as a pass does.
func (r *Reaper) Listing(ctx context.Context) (Listing, error) { return r.reapListing(ctx, true) }

// StillDetached is the last look at a tmux session before a kill (see
// stillDetached).
func (r *Reaper) StillDetached(ctx context.Context, name string, was Row) error {
	return r.stillDetached(ctx, name, was, true)
}

// stillDetached is the last look at a tmux session, under its lock just
// before the first signal: the same pane, readable, and nobody attached.
// Someone attaching after the re-check's listing keeps the session.
func (r *Reaper) stillDetached(ctx context.Context, name string, was Row, tmuxOK bool) error {
	l, err := r.sessionListing(ctx, name, tmuxOK)
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

// recheck lists the session again and re-reads the store just before a
// kill.
func (r *Reaper) recheck(ctx context.Context, first Facts, firstDec Decision, tmuxOK bool) (Decision, Facts, error) {
	l, err := r.sessionListing(ctx, first.Name, tmuxOK)
	if err != nil {
		return Decision{}, Facts{}, fmt.Errorf("re-check: %w", err)
	}
	st, err := r.reapState(ctx, first.Name)
	if err != nil {
		return Decision{}, Facts{}, fmt.Errorf("re-check: read store: %w", err)
	}
	f := r.reapFacts(ctx, first.Name, st, l)
	dec := Decide(f, r.reapPolicy(), time.Now())
	switch {
	case f.Managed != first.Managed:
		return dec, f, errors.New("re-check: its record appeared or vanished meanwhile")
	case f.Incarnation != first.Incarnation:
		return dec, f, fmt.Errorf("re-check: relaunched meanwhile (incarnation %s, was %s)", f.Incarnation, first.Incarnation)
	case dec.Verdict != Reap:
		return dec, f, fmt.Errorf("re-check: no longer eligible: %s: %s", dec.Reason, dec.Detail)
	case !dec.Row.Same(firstDec.Row):
		return dec, f, fmt.Errorf("re-check: a different tmux session now (pane %s pid %d, was %s pid %d)", dec.Row.PaneID, dec.Row.PID, firstDec.Row.PaneID, firstDec.Row.PID)
	}
	return dec, f, nil
}

// reapUnmanaged kills a herd-named tmux session that has no record, by its
// exact name, and records a `reaped` event.
func (r *Reaper) reapUnmanaged(ctx context.Context, f Facts, dec Decision) error {
	if err := r.o.Tmux.KillUnmanaged(ctx, f.Name); err != nil {
		if errors.Is(err, runtime.ErrGone) {
			return errors.New("gone before the kill")
		}
		return err
	}
	data := reapData(dec)
	data["pane_id"], data["pane_pid"], data["unmanaged"] = dec.Row.PaneID, dec.Row.PID, true
	msg := fmt.Sprintf("reaped (%s): %s", dec.Reason, dec.Detail)
	return r.st.Store().Update(ctx, func(tx store.Tx) error {
		return tx.AppendEvent(r.st.Event(herd.Session{Name: f.Name}, "", herd.EventReaped, dec.Reason, msg, data))
	})
}

func reapData(dec Decision) map[string]any {
	return map[string]any{
		"idle_for":     dec.IdleFor.Round(time.Second).String(),
		"idle_seconds": dec.IdleFor.Seconds(),
		"detail":       dec.Detail,
	}
}

func (r *Reaper) reapPolicy() Policy {
	c := r.cfg().Reaper
	return Policy{IdleAfter: c.IdleAfter, Orphans: c.Orphans, Archived: c.Archived}
}

// tmuxInstalled reports whether the configured tmux binary can be found.
func (r *Reaper) tmuxInstalled() bool {
	bin := r.cfg().Tmux.Binary
	if bin == "" {
		bin = "tmux"
	}
	_, err := exec.LookPath(bin)
	return err == nil
}

// reapListing lists every pane once. It never uses display-message: that
// returns empty fields for a session it cannot resolve.
func (r *Reaper) reapListing(ctx context.Context, tmuxOK bool) (Listing, error) {
	if !tmuxOK {
		return Listing{Unavailable: true}, nil
	}
	return NewListing(r.o.Tmux.List(ctx))
}

// sessionListing lists the panes of session name alone, for the re-check
// and the last look before its kill: a pass over n candidates costs n
// such listings, not n listings of the whole server. Like a full listing
// it never uses display-message, and a row it cannot tie to a session
// keeps the kill from happening.
func (r *Reaper) sessionListing(ctx context.Context, name string, tmuxOK bool) (Listing, error) {
	if !tmuxOK {
		return Listing{Unavailable: true}, nil
	}
	return NewListing(r.o.Tmux.ObserveSession(ctx, name))
}

// candidate renders a decision for the report.
func candidate(f Facts, dec Decision) api.ReapCandidate {
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
