package slots

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"herd"
	"herd/internal/proc"
	"herd/internal/status"
	"herd/internal/store"

	"golang.org/x/sys/unix"
)

// StopRequest asks the one stop path to take a session down.
type StopRequest struct {
	Name   string
	Reason string // herd.ReasonUser, ReasonIdle, ReasonReboot, ...
	// Kind is the event recorded: herd.EventStopped (default) or herd.EventReaped.
	Kind string
	// DropReplica lowers the role's replica count by one (user stop).
	DropReplica bool
	// NoSignal records the stop without signalling (reboot sweep: the
	// recorded processes cannot be ours).
	NoSignal bool
	// Incarnation, when set, stops only if it is still the current one.
	Incarnation string
	// Data is added to the event.
	Data map[string]any
	// Message is the event's message.
	Message string
	// Guard, when set, re-validates the session under its lock, just
	// before any signal; an error cancels the stop (the reaper's last
	// look: activity that arrived after its re-check keeps the session).
	Guard func(s herd.Session) error
}

// ErrAlreadyStopped means another caller stopped the session first.
var ErrAlreadyStopped = errors.New("already stopped")

// ErrUnverified means the process's identity could not be verified, so
// herd did not signal it.
var ErrUnverified = errors.New("process identity cannot be verified; not signalled")

// Stop is the one stop path (user stop, scale-down, role deletion, reaper,
// reboot sweep): verify identity, signal the process group (TERM, grace,
// KILL) or kill the pane, then in ONE transaction end the incarnation only
// if it is still current and append exactly one stopped/reaped event with
// a resume snapshot. A caller that loses the race gets ErrAlreadyStopped.
func (sl *Slots) Stop(ctx context.Context, req StopRequest) error {
	if req.Kind == "" {
		req.Kind = herd.EventStopped
	}
	if !sl.ops.begin() {
		return errShuttingDown
	}
	defer sl.ops.end()
	// A stop, once begun, runs to its end whatever its caller does.
	ctx, cancel := sl.KillContext(ctx)
	defer cancel()
	unlock := sl.st.Lock(req.Name)
	defer unlock()

	var s herd.Session
	var inc herd.Incarnation
	hasInc := false
	err := sl.st.Store().View(ctx, func(tx store.Tx) error {
		var err error
		if s, err = tx.Session(req.Name); err != nil {
			return err
		}
		if s.Incarnation == "" {
			return nil
		}
		inc, err = tx.Incarnation(s.Incarnation)
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		hasInc = err == nil
		return err
	})
	if err != nil {
		return err
	}
	if s.State == herd.StateStopped || (req.Incarnation != "" && s.Incarnation != req.Incarnation) {
		return ErrAlreadyStopped
	}
	if req.Guard != nil {
		if err := req.Guard(s); err != nil {
			return err
		}
	}
	if s.Host != sl.st.Host() && !req.NoSignal {
		return fmt.Errorf("session %s runs on host %s, not %s", s.Name, s.Host, sl.st.Host())
	}
	open := hasInc && inc.EndedAt == nil
	if open && !req.NoSignal {
		sl.st.BeginTakedown(inc.ID, "")
		defer sl.st.EndTakedown(inc.ID, "")
		if err := sl.terminate(ctx, inc); err != nil {
			// Deaths seen meanwhile were suppressed: the prober looks again.
			sl.o.Prober.Unwatch(inc.ID)
			sl.o.Prober.Kick()
			return err
		}
		sl.o.Prober.Unwatch(inc.ID)
	}

	var seen map[string]any
	if hasInc {
		seen = sl.st.Seen(inc.ID) // file reads stay out of the write transaction
	}
	return sl.st.Store().Update(ctx, func(tx store.Tx) error {
		cur, err := tx.Session(req.Name)
		if err != nil {
			return err
		}
		if cur.State == herd.StateStopped || cur.Incarnation != s.Incarnation {
			return ErrAlreadyStopped // compare-and-set lost: no second event
		}
		now := time.Now().UTC()
		exit := herd.Exit{Reason: req.Reason, At: now}
		snap := herd.Snapshot{RuntimeKind: cur.RuntimeKind}
		role, rerr := tx.Role(cur.Role)
		if rerr != nil && !errors.Is(rerr, store.ErrNotFound) {
			return rerr
		}
		if rerr == nil {
			snap.Argv, snap.Workdir, snap.Agent = role.Command, role.Workdir, role.Agent
			snap.EnvNames = envNames(role.Env)
		}
		if hasInc {
			cinc, err := tx.Incarnation(inc.ID)
			if err != nil {
				return err
			}
			snap.Argv, snap.Workdir, snap.RuntimeKind = cinc.Argv, cinc.Workdir, cinc.RuntimeKind
			snap.AgentSessionID = cinc.AgentSessionID
			if cinc.EndedAt == nil {
				cinc.EndedAt, cinc.Exit = &now, &exit
				if err := tx.PutIncarnation(cinc); err != nil {
					return err
				}
				if err := tx.AppendEvent(sl.st.SummaryEvent(cur, cinc, seen, now)); err != nil {
					return err
				}
			}
		}
		cur.State = herd.StateStopped
		cur.StateSince = now
		cur.Snapshot = &snap
		cur.BackoffUntil = nil
		cur.Runtime, cur.Process = herd.Dead, herd.Dead
		cur.Activity = herd.ActivityUnknown
		cur.Exit = &exit
		if err := tx.PutSession(cur); err != nil {
			return err
		}
		if req.DropReplica && rerr == nil && role.Replicas > 0 {
			role.Replicas--
			role.UpdatedAt = now
			if err := tx.PutRole(role); err != nil {
				return err
			}
		}
		data := map[string]any{"snapshot": snap}
		for k, v := range req.Data {
			data[k] = v
		}
		msg := req.Message
		if msg == "" {
			msg = fmt.Sprintf("%s (%s)", req.Kind, req.Reason)
		}
		return tx.AppendEvent(sl.st.Event(cur, s.Incarnation, req.Kind, req.Reason, msg, data))
	})
}

// terminate takes an incarnation's processes down, verifying identity
// before every signal: SIGTERM to the process group, SIGKILL after the
// grace period; for tmux, the pane is killed too. A process whose identity
// cannot be verified is never signalled.
func (sl *Slots) terminate(ctx context.Context, inc herd.Incarnation) error {
	fs, boot := sl.o.Proc, sl.o.BootID
	// What left the process group (a setsid child, a daemonized dev
	// server) carries the incarnation's cgroup or marker: it is asked to
	// go at the same moment as the group, with the same grace, so the
	// whole tree is gone within one grace period.
	var sweep sync.WaitGroup
	sweep.Go(func() { sl.sweep(ctx, inc.ID, sl.o.Grace) })
	defer sweep.Wait()
	for _, id := range targets(inc) {
		switch fs.Check(id, boot) {
		case herd.Unknown:
			return fmt.Errorf("pid %d: %w", id.PID, ErrUnverified)
		case herd.Dead:
			continue
		}
		if err := sl.signal(id, unix.SIGTERM); err != nil {
			return err
		}
		if !sl.waitGone(ctx, id, sl.o.Grace) {
			sl.o.Log.Warn("agent ignored SIGTERM; sending SIGKILL", "pid", id.PID, "grace", sl.o.Grace)
			if err := sl.signal(id, unix.SIGKILL); err != nil {
				return err
			}
			sl.waitGone(ctx, id, 5*time.Second)
		}
		// Only a process seen dead counts as stopped.
		switch fs.Check(id, boot) {
		case herd.Alive:
			return fmt.Errorf("pid %d is still alive after SIGKILL", id.PID)
		case herd.Unknown:
			return fmt.Errorf("pid %d: %w", id.PID, ErrUnverified)
		}
	}
	sweep.Wait()
	// Every process of the incarnation is seen dead: the stop is done. A
	// pane left behind (tmux not answering) is cleared by the slot's next
	// launch, which removes its own dead pane.
	if rt, err := sl.runtime(inc.RuntimeKind); err == nil {
		if err := rt.Remove(ctx, inc); err != nil {
			sl.o.Log.Warn("agent stopped; what it ran in not removed", "session", inc.Session, "err", err)
		}
	}
	return nil
}

// signal sends sig to id's process group after verifying its identity.
// A refusal is re-judged by a fresh Check: dead is done, unknown is an
// error, and alive (the refusal was transient) is tried again.
func (sl *Slots) signal(id herd.Identity, sig unix.Signal) error {
	var err error
	for range 5 {
		err = proc.SignalGroup(sl.o.Proc, id, sl.o.BootID, sig)
		if err == nil || errors.Is(err, proc.ErrNoProcess) {
			return nil
		}
		if !errors.Is(err, proc.ErrIdentityMismatch) {
			return fmt.Errorf("pid %d: %v: %w", id.PID, sig, err)
		}
		switch sl.o.Proc.Check(id, sl.o.BootID) {
		case herd.Dead:
			return nil
		case herd.Unknown:
			return fmt.Errorf("pid %d: %w", id.PID, ErrUnverified)
		}
		sl.o.Log.Warn("signal refused, yet the process checks alive; retrying", "pid", id.PID, "signal", sig, "err", err)
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("pid %d: %v: %w", id.PID, sig, err)
}

// waitGone waits up to timeout for id to exit; it reports whether it did.
func (sl *Slots) waitGone(ctx context.Context, id herd.Identity, timeout time.Duration) bool {
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		err := proc.WaitExit(wctx, sl.o.Proc, id, sl.o.BootID)
		if err == nil || sl.o.Proc.Check(id, sl.o.BootID) == herd.Dead {
			return true
		}
		if wctx.Err() != nil {
			return false
		}
		// Refused (an unreadable moment): look again shortly.
		select {
		case <-wctx.Done():
			return false
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// targets lists the identities to signal: the launched root (its group
// holds the whole tree), and the agent when it differs.
func targets(inc herd.Incarnation) []herd.Identity {
	var out []herd.Identity
	if !inc.Root.Zero() {
		out = append(out, inc.Root)
	}
	if !inc.Identity.Zero() && inc.Identity != inc.Root {
		out = append(out, inc.Identity)
	}
	return out
}

// KillLeftover takes down what remains of an incarnation whose agent died
// (a wrapper shell living on, a pane left open). Its death is recorded
// already.
func (sl *Slots) KillLeftover(inc herd.Incarnation) {
	if !sl.ops.begin() {
		return // shutting down: the next daemon's prober finds the leftover
	}
	defer sl.ops.end()
	ctx, cancel := sl.KillContext(context.Background())
	defer cancel()
	if err := sl.terminate(ctx, inc); err != nil {
		sl.o.Log.Warn("leftover of a dead agent not killed", "session", inc.Session, "err", err)
	}
}

// KillRequest asks for an agent to be killed as a crash: the stall kill.
type KillRequest struct {
	Inc herd.Incarnation
	// Reason is the exit reason the kill records (stall_killed); deaths
	// reported by others meanwhile are left to it.
	Reason string
	// Guard is the last look before the first signal: it returns the
	// message and data of the killed event, or an error that keeps the
	// agent.
	Guard func(ctx context.Context) (msg string, data map[string]any, err error)
}

// Kill takes down an agent through the stop path's verified kill and
// records its death through the one crash path with req.Reason: a killed
// event, then exited/crashed/backoff as for any crash. It reports whether
// the agent was killed.
func (sl *Slots) Kill(ctx context.Context, req KillRequest) (bool, error) {
	if !sl.ops.begin() {
		return false, errShuttingDown
	}
	defer sl.ops.end()
	if !sl.st.BeginTakedown(req.Inc.ID, req.Reason) {
		return false, nil // a kill of it is under way
	}
	defer sl.st.EndTakedown(req.Inc.ID, req.Reason)
	ctx, cancel := sl.KillContext(ctx)
	defer cancel()
	msg, data, err := req.Guard(ctx)
	if err != nil {
		return false, err
	}
	if err := sl.terminate(ctx, req.Inc); err != nil {
		return false, err
	}
	session := req.Inc.Session
	err = sl.st.Update(ctx, session, req.Inc.ID, func(tx store.Tx, s *herd.Session) ([]*herd.Event, error) {
		return []*herd.Event{sl.st.Event(*s, req.Inc.ID, herd.EventKilled, req.Reason, msg, data)}, nil
	})
	if err != nil {
		sl.o.Log.Error("kill: record the kill", "session", session, "err", err)
	}
	if _, err := sl.st.RecordDeath(ctx, status.Death{Session: session, Incarnation: req.Inc.ID,
		Exit: herd.Exit{Reason: req.Reason}, Message: msg}); err != nil {
		return true, fmt.Errorf("kill: record the death: %w", err)
	}
	return true, nil
}

// sweep ends every process still carrying incarnation inc's cgroup or
// marker (identity-checked, TERM, grace, KILL) and logs what it found.
func (sl *Slots) sweep(ctx context.Context, inc string, grace time.Duration) {
	if sl.o.Contain == nil {
		return
	}
	rep, err := sl.o.Contain.Stop(ctx, inc, grace)
	if err != nil {
		sl.o.Log.Warn("processes of an ended incarnation not all ended", "incarnation", inc, "err", err)
	}
	if rep.Swept > 0 || rep.Killed {
		sl.o.Log.Info("ended what was left of an incarnation's tree", "incarnation", inc, "mode", rep.Mode,
			"swept", rep.Swept, "killed", rep.Killed, "took", rep.Took.Round(time.Millisecond))
	}
}

// Ended cleans up after a death the crash path accounted: what is left of
// the incarnation's tree (children that outlived the agent, in or out of
// its process group) is ended in the background, each identity-checked.
func (sl *Slots) Ended(inc string) {
	if sl.o.Contain == nil || !sl.ops.begin() {
		return
	}
	sl.group.Go("crash cleanup", func() {
		defer sl.ops.end()
		ctx, cancel := sl.KillContext(context.Background())
		defer cancel()
		sl.sweep(ctx, inc, sl.o.Grace)
	})
}
