// Package reaper stops the sessions nobody needs any more: a pure
// decision (Decide, over facts gathered first) and a pass that acts on it.
//
// A session is reaped only when it is detached and one reason holds:
// archived (a person ran `herd archive`), orphan (its workdir is gone, its
// role is no longer declared, or it is a herd-named tmux session with no
// record) or idle (no output and no activity for reaper.idle_after). Any fact
// that cannot be read makes the decision Skip, never Reap: the reaper fails
// closed.
//
// The daemon runs its loop every reaper.interval; the verb layer runs one
// pass for `herd reap`. It stops a managed session only through the one
// stop path (its Stopper), re-checking attachment under the session's lock
// just before the first signal, and kills only herd-named tmux sessions
// that have no record. It never writes session state, never signals a
// process itself, and never touches an attached session.
package reaper

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"herd"
)

// Verdict is what the reaper does with one candidate.
type Verdict string

// Verdicts.
const (
	// Reap: detached and one reason holds, from facts all known.
	Reap Verdict = "reap"
	// Keep: every fact is known and none says the session is unneeded.
	Keep Verdict = "keep"
	// Skip: a fact the decision needs is unknown; nothing is done.
	Skip Verdict = "skip"
	// Ignore: not the reaper's business (outside herd's namespace,
	// already stopped, another host's).
	Ignore Verdict = "ignore"
)

// Policy is the [reaper] configuration the decision needs.
type Policy struct {
	// IdleAfter is how long without output or activity makes a session
	// idle; zero or less disables idle reaping.
	IdleAfter time.Duration
	// Orphans enables the orphan reason.
	Orphans bool
	// Archived enables the archived reason.
	Archived bool
}

// Facts are what the reaper knows of one candidate at one moment. A fact
// paired with an error is unknown when that error is set.
type Facts struct {
	// Name is the session's (and its tmux session's) name.
	Name string
	// RecordErr is set when the store could not say whether a record
	// exists; every other fact is then moot.
	RecordErr error
	// Managed is true when the store holds a record of the session.
	Managed bool
	// ForeignHost names the host of a record kept by another host.
	ForeignHost string

	// State, Activity, Archived and Incarnation come from the record.
	State       herd.State
	Activity    herd.Activity
	Archived    bool
	Incarnation string
	// RootPID is the pid herd launched (the pane's pid for tmux); 0 when unknown.
	RootPID int
	// InfoErr is set when the record's details (incarnation) could not be read.
	InfoErr error

	// Role is the session's role; RoleDeclared says whether it is still
	// declared, unknown when RoleErr is set.
	Role         string
	RoleDeclared bool
	RoleErr      error
	// Workdir is where the session runs; WorkdirGone says it no longer
	// exists (or is no directory), unknown when WorkdirErr is set.
	Workdir     string
	WorkdirGone bool
	WorkdirErr  error

	// Tmux is true when the session lives in tmux: attached and its pane
	// come from the listing below.
	Tmux bool
	// Listing is the round's tmux picture (zero for exec sessions).
	Listing Listing

	// LastActivityAt is the last activity the store recorded (hooks,
	// output seen by the watchdog); zero when none.
	LastActivityAt time.Time
	// OutputAt is when captured output last grew (exec); zero when none,
	// unknown when OutputErr is set.
	OutputAt  time.Time
	OutputErr error
	// StartedAt is when the current incarnation started: the idle clock's
	// origin when no output or activity is known.
	StartedAt time.Time
}

// Decision is the verdict on one candidate.
type Decision struct {
	Verdict Verdict
	// Reason is the reap reason (herd.ReasonIdle, ReasonOrphan,
	// ReasonArchived) when Verdict is Reap; otherwise a short machine
	// word saying why not (attached, active, unknown, ...).
	Reason string
	// Detail is one human-readable line.
	Detail string
	// IdleFor is how long the session has been without output or
	// activity, when known.
	IdleFor time.Duration
	// Row is the session's tmux row the decision was made on.
	Row Row
}

// Skip and keep reasons.
const (
	WhyNamespace = "namespace"
	WhyStopped   = "stopped"
	WhyForeign   = "foreign_host"
	WhyUnknown   = "unknown"
	WhyAttached  = "attached"
	WhyActive    = "active"
	WhyAbsent    = "absent"
	WhyNoTmux    = "tmux_unavailable"
	WhyDisabled  = "disabled"
	WhyNotLive   = "not_running"
	WhyPending   = "pending"
)

// Decide applies the policy to one candidate's facts at time now. It never
// reaps on a fact it could not read, and never reaps an attached session.
func Decide(f Facts, p Policy, now time.Time) Decision {
	if !InNamespace(f.Name) {
		return Decision{Verdict: Ignore, Reason: WhyNamespace, Detail: "not a herd session name"}
	}
	if f.RecordErr != nil {
		return unknown("store: %v", f.RecordErr)
	}
	if f.ForeignHost != "" {
		return Decision{Verdict: Ignore, Reason: WhyForeign, Detail: "recorded on host " + f.ForeignHost}
	}
	if !f.Managed {
		return decideUnmanaged(f, p)
	}
	switch f.State {
	case herd.StateStopped:
		return Decision{Verdict: Ignore, Reason: WhyStopped, Detail: "already stopped"}
	case herd.StateUnknown:
		return unknown("session state is unknown: probes inconclusive")
	case herd.StatePending:
		return Decision{Verdict: Skip, Reason: WhyPending, Detail: "launch not yet confirmed"}
	}
	if f.InfoErr != nil {
		return unknown("store: %v", f.InfoErr)
	}
	live := f.State.Live()

	// Attached or not: the one fact that no reason overrides.
	var row Row
	if f.Tmux {
		r, d, ok := tmuxRow(f, live)
		if !ok {
			return d
		}
		row = r
		if row.Attached > 0 {
			return Decision{Verdict: Keep, Reason: WhyAttached, Detail: fmt.Sprintf("attached (%d client(s))", row.Attached), Row: row}
		}
	}

	// How long nothing happened: needed for idle, reported for every reason.
	var idle time.Duration
	last, lastErr := lastActivity(f, row)
	if lastErr == nil {
		idle = max(now.Sub(last), 0)
	}

	var unknowns []string
	if p.Archived && f.Archived {
		return reap(herd.ReasonArchived, "archived and detached", idle, row)
	}
	if p.Orphans {
		switch {
		case f.RoleErr != nil:
			unknowns = append(unknowns, fmt.Sprintf("role %s: %v", f.Role, f.RoleErr))
		case !f.RoleDeclared:
			return reap(herd.ReasonOrphan, fmt.Sprintf("role %s is no longer declared", f.Role), idle, row)
		}
		switch {
		case f.WorkdirErr != nil:
			unknowns = append(unknowns, fmt.Sprintf("workdir: %v", f.WorkdirErr))
		case f.WorkdirGone:
			return reap(herd.ReasonOrphan, fmt.Sprintf("workdir %s no longer exists", f.Workdir), idle, row)
		}
	}
	if !live {
		return finish(unknowns, Decision{Verdict: Keep, Reason: WhyNotLive, Detail: fmt.Sprintf("%s: no running agent to reap for idleness", f.State), Row: row})
	}
	if p.IdleAfter <= 0 {
		return finish(unknowns, Decision{Verdict: Keep, Reason: WhyDisabled, Detail: "idle reaping disabled", Row: row})
	}
	if lastErr != nil {
		unknowns = append(unknowns, lastErr.Error())
		return finish(unknowns, Decision{})
	}
	if idle >= p.IdleAfter {
		return reap(herd.ReasonIdle, fmt.Sprintf("no output or activity for %s", round(idle)), idle, row)
	}
	detail := fmt.Sprintf("last output or activity %s ago (idle after %s)", round(idle), p.IdleAfter)
	if f.Activity == herd.ActivityWaiting {
		detail = "waiting for input; " + detail
	}
	return finish(unknowns, Decision{Verdict: Keep, Reason: WhyActive, Detail: detail, IdleFor: idle, Row: row})
}

// decideUnmanaged decides a herd-named tmux session that has no record.
func decideUnmanaged(f Facts, p Policy) Decision {
	if !f.Tmux {
		return Decision{Verdict: Ignore, Reason: WhyAbsent, Detail: "no record and no tmux session"}
	}
	row, d, ok := tmuxRow(f, true)
	if !ok {
		return d
	}
	if row.Attached > 0 {
		return Decision{Verdict: Keep, Reason: WhyAttached, Detail: fmt.Sprintf("attached (%d client(s))", row.Attached), Row: row}
	}
	if !p.Orphans {
		return Decision{Verdict: Keep, Reason: WhyDisabled, Detail: "orphan reaping disabled", Row: row}
	}
	return reap(herd.ReasonOrphan, "herd-named tmux session with no record", 0, row)
}

// tmuxRow reads a tmux session's row from the listing. When ok is false,
// d is the decision: the row is unknown, or the session is absent while it
// should be running (the prober, not the reaper, acts on that).
func tmuxRow(f Facts, live bool) (row Row, d Decision, ok bool) {
	l := f.Listing
	switch {
	case l.Unavailable:
		return Row{}, Decision{Verdict: Skip, Reason: WhyNoTmux, Detail: "tmux is not available"}, false
	case l.Unattributed != nil:
		return Row{}, unknown("tmux listing has a row of no known session: %v", l.Unattributed), false
	}
	row, listed := l.Rows[f.Name]
	if !listed {
		if live {
			return Row{}, Decision{Verdict: Skip, Reason: WhyAbsent, Detail: "absent from the tmux listing; the prober decides"}, false
		}
		return Row{}, Decision{}, true // no pane left: nobody can be attached
	}
	if row.Err != nil {
		return row, unknown("tmux row: %v", row.Err), false
	}
	if f.Managed && live && f.RootPID != 0 && row.PID != f.RootPID {
		return row, unknown("pane pid %d is not the incarnation's pid %d", row.PID, f.RootPID), false
	}
	return row, Decision{}, true
}

// lastActivity is the latest of the known output and activity times and
// the incarnation's start.
func lastActivity(f Facts, row Row) (time.Time, error) {
	if f.OutputErr != nil {
		return time.Time{}, fmt.Errorf("output time: %w", f.OutputErr)
	}
	if f.Activity == herd.ActivityWaiting && f.LastActivityAt.IsZero() {
		return time.Time{}, errors.New("waiting for input since an unknown time")
	}
	// tmux reports whole seconds: the output may have come up to a
	// second after the reported time, so the later end is taken. The
	// incarnation's start bounds idleness too: nothing is idle for longer
	// than it has run, and it is the clock's origin when nothing else is
	// known.
	activity := row.Activity
	if !activity.IsZero() {
		activity = activity.Add(time.Second)
	}
	var last time.Time
	for _, t := range []time.Time{f.LastActivityAt, activity, f.OutputAt, f.StartedAt} {
		if t.After(last) {
			last = t
		}
	}
	if last.IsZero() {
		return time.Time{}, errors.New("no output, activity or start time known")
	}
	return last, nil
}

// finish turns a keep into a skip when some fact was unknown: a reason
// might have held.
func finish(unknowns []string, d Decision) Decision {
	if len(unknowns) == 0 {
		return d
	}
	u := unknown("%s", strings.Join(unknowns, "; "))
	u.Row, u.IdleFor = d.Row, d.IdleFor
	return u
}

func unknown(format string, a ...any) Decision {
	return Decision{Verdict: Skip, Reason: WhyUnknown, Detail: fmt.Sprintf(format, a...)}
}

func reap(reason, detail string, idle time.Duration, row Row) Decision {
	return Decision{Verdict: Reap, Reason: reason, Detail: detail, IdleFor: idle, Row: row}
}

func round(d time.Duration) time.Duration {
	if d >= time.Minute {
		return d.Round(time.Second)
	}
	return d.Round(10 * time.Millisecond)
}

// InNamespace reports whether a tmux session name is in herd's namespace
// (<role>-<index>). Sessions outside it are never reaped.
func InNamespace(name string) bool { return herd.InNamespace(name) }
