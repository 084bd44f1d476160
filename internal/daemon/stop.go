package daemon

import (
	"context"
	"errors"
	"fmt"
	"time"

	"golang.org/x/sys/unix"
	"herd"
	"herd/internal/proc"
	"herd/internal/store"
)

// stopRequest asks the one stop path to take a session down.
type stopRequest struct {
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

// stopSlack bounds a stop beyond its grace period: the SIGKILL wait, the
// pane kill and the store write.
const stopSlack = 30 * time.Second

// errAlreadyStopped means another caller stopped the session first.
var errAlreadyStopped = errors.New("already stopped")

// errUnverified means the process's identity could not be verified, so
// herd did not signal it.
var errUnverified = errors.New("process identity cannot be verified; not signalled")

// stop is the one stop path (user stop, scale-down, role deletion, reaper,
// reboot sweep): verify identity, signal the process group (TERM, grace,
// KILL) or kill the pane, then in ONE transaction end the incarnation only
// if it is still current and append exactly one stopped/reaped event with
// a resume snapshot. A caller that loses the race gets errAlreadyStopped.
func (d *Daemon) stop(ctx context.Context, req stopRequest) error {
	if req.Kind == "" {
		req.Kind = herd.EventStopped
	}
	if !d.ops.begin() {
		return errShuttingDown
	}
	defer d.ops.end()
	// A stop, once begun, runs to its end whatever its caller does: a
	// grace period cut short by a cancelled caller (a client gone, the
	// daemon shutting down) would SIGKILL at once and leave a death the
	// next probe counts as a crash.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d.grace+stopSlack)
	defer cancel()
	unlock := d.locks.Lock(req.Name)
	defer unlock()

	var s herd.Session
	var inc herd.Incarnation
	hasInc := false
	err := d.st.View(ctx, func(tx store.Tx) error {
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
		return errAlreadyStopped
	}
	if req.Guard != nil {
		if err := req.Guard(s); err != nil {
			return err
		}
	}
	if s.Host != d.host && !req.NoSignal {
		return fmt.Errorf("session %s runs on host %s, not %s", s.Name, s.Host, d.host)
	}
	open := hasInc && inc.EndedAt == nil
	if open && !req.NoSignal {
		d.setStopping(inc.ID, true)
		defer d.setStopping(inc.ID, false)
		if err := d.terminate(ctx, inc); err != nil {
			// Deaths seen meanwhile were suppressed: the prober looks again.
			d.unwatch(inc.ID)
			wake(d.probeKick)
			return err
		}
		d.unwatch(inc.ID)
	}

	var seen map[string]any
	if hasInc {
		seen = d.summaryData(inc.ID) // file reads stay out of the write transaction
	}
	return d.st.Update(ctx, func(tx store.Tx) error {
		cur, err := tx.Session(req.Name)
		if err != nil {
			return err
		}
		if cur.State == herd.StateStopped || cur.Incarnation != s.Incarnation {
			return errAlreadyStopped // compare-and-set lost: no second event
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
				if err := tx.AppendEvent(d.summaryEvent(cur, cinc, seen, now)); err != nil {
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
		return tx.AppendEvent(d.event(cur, s.Incarnation, req.Kind, req.Reason, msg, data))
	})
}

// terminate takes an incarnation's processes down, verifying identity
// before every signal: SIGTERM to the process group, SIGKILL after the
// grace period; for tmux, the pane is killed too. A process whose identity
// cannot be verified is never signalled.
func (d *Daemon) terminate(ctx context.Context, inc herd.Incarnation) error {
	for _, id := range targets(inc) {
		switch d.proc.Check(id, d.bootID) {
		case herd.Unknown:
			return fmt.Errorf("pid %d: %w", id.PID, errUnverified)
		case herd.Dead:
			continue
		}
		if err := d.signal(id, unix.SIGTERM); err != nil {
			return err
		}
		if !d.waitGone(ctx, id, d.grace) {
			d.log.Warn("agent ignored SIGTERM; sending SIGKILL", "pid", id.PID, "grace", d.grace)
			if err := d.signal(id, unix.SIGKILL); err != nil {
				return err
			}
			d.waitGone(ctx, id, 5*time.Second)
		}
		// Only a process seen dead counts as stopped.
		switch d.proc.Check(id, d.bootID) {
		case herd.Alive:
			return fmt.Errorf("pid %d is still alive after SIGKILL", id.PID)
		case herd.Unknown:
			return fmt.Errorf("pid %d: %w", id.PID, errUnverified)
		}
	}
	if inc.RuntimeKind == herd.RuntimeTmux {
		// Every process of the incarnation is seen dead: the stop is
		// done. A pane left behind (tmux not answering) is cleared by
		// the slot's next launch, which removes its own dead pane.
		if err := d.killPane(ctx, inc); err != nil {
			d.log.Warn("agent stopped; its tmux pane not removed", "session", inc.Session, "err", err)
		}
	}
	return nil
}

// signal sends sig to id's process group after verifying its identity.
// A refusal is re-judged by a fresh Check: dead is done, unknown is an
// error, and alive (the refusal was transient) is tried again.
func (d *Daemon) signal(id herd.Identity, sig unix.Signal) error {
	var err error
	for range 5 {
		err = proc.SignalGroup(d.proc, id, d.bootID, sig)
		if err == nil || errors.Is(err, proc.ErrNoProcess) {
			return nil
		}
		if !errors.Is(err, proc.ErrIdentityMismatch) {
			return fmt.Errorf("pid %d: %v: %w", id.PID, sig, err)
		}
		switch d.proc.Check(id, d.bootID) {
		case herd.Dead:
			return nil
		case herd.Unknown:
			return fmt.Errorf("pid %d: %w", id.PID, errUnverified)
		}
		d.log.Warn("signal refused, yet the process checks alive; retrying", "pid", id.PID, "signal", sig, "err", err)
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("pid %d: %v: %w", id.PID, sig, err)
}

// waitGone waits up to timeout for id to exit; it reports whether it did.
func (d *Daemon) waitGone(ctx context.Context, id herd.Identity, timeout time.Duration) bool {
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		err := proc.WaitExit(wctx, d.proc, id, d.bootID)
		if err == nil || d.proc.Check(id, d.bootID) == herd.Dead {
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

// killLeftover takes down what remains of an incarnation whose agent died
// (a wrapper shell living on, a pane left open). Its death is recorded already.
func (d *Daemon) killLeftover(inc herd.Incarnation) {
	ctx, cancel := context.WithTimeout(d.watchCtx, d.grace+10*time.Second)
	defer cancel()
	if err := d.terminate(ctx, inc); err != nil {
		d.log.Warn("leftover of a dead agent not killed", "session", inc.Session, "err", err)
	}
}
