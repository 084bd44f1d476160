package slots

import (
	"context"
	"errors"
	"fmt"
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
	// Grace overrides the daemon's grace period between SIGTERM and
	// SIGKILL (herd stop --grace); zero keeps it.
	Grace time.Duration
}

// ErrAlreadyStopped means another caller stopped the session first.
var ErrAlreadyStopped = status.ErrAlreadyStopped

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
	unlock := sl.st.Lock(req.Name)
	defer unlock()
	return sl.stopLocked(ctx, req)
}

// stopLocked is Stop for a caller that holds the session's lock and has
// begun an operation (a restart keeps the lock from the stop to the
// launch, so the reconciler cannot fill the slot in between).
func (sl *Slots) stopLocked(ctx context.Context, req StopRequest) error {
	if req.Kind == "" {
		req.Kind = herd.EventStopped
	}
	grace := sl.o.Grace
	if req.Grace > 0 {
		grace = req.Grace
	}
	// A stop, once begun, runs to its end whatever its caller does.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), grace+stopSlack)
	defer cancel()

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
		killed, err := sl.terminateGrace(ctx, inc, grace)
		if err != nil {
			// Deaths seen meanwhile were suppressed: the prober looks again.
			sl.o.Prober.Unwatch(inc.ID)
			sl.o.Prober.Kick()
			return err
		}
		sl.o.Prober.Unwatch(inc.ID)
		if killed {
			// The agent outlived its grace period: say so in the event.
			data := map[string]any{"escalated": true, "after": grace.String()}
			for k, v := range req.Data {
				data[k] = v
			}
			req.Data = data
		}
	}

	return sl.st.Stopped(ctx, status.Stop{Name: req.Name, Incarnation: s.Incarnation, Reason: req.Reason, Kind: req.Kind,
		Message: req.Message, Data: req.Data, DropReplica: req.DropReplica})
}

// terminate takes an incarnation's processes down, verifying identity
// before every signal: SIGTERM to the process group, SIGKILL after the
// grace period; for tmux, the pane is killed too. A process whose identity
// cannot be verified is never signalled.
func (sl *Slots) terminate(ctx context.Context, inc herd.Incarnation) error {
	_, err := sl.terminateGrace(ctx, inc, sl.o.Grace)
	return err
}

// terminateGrace is terminate with its own grace period; killed reports
// whether a process outlived it and got SIGKILL.
func (sl *Slots) terminateGrace(ctx context.Context, inc herd.Incarnation, grace time.Duration) (killed bool, err error) {
	fs, boot := sl.o.Proc, sl.o.BootID
	// What left the process group (a setsid child, a daemonized dev
	// server) carries the incarnation's marker: it is asked to go at the
	// same moment as the group, so the whole tree is gone within one
	// grace period. Only what runs now: processes the agent starts while
	// it shuts down (its cleanup) are its own to wait for.
	start := time.Now()
	sl.termEscaped(inc)
	for _, id := range targets(inc) {
		switch fs.Check(id, boot) {
		case herd.Unknown:
			return killed, fmt.Errorf("pid %d: %w", id.PID, ErrUnverified)
		case herd.Dead:
			continue
		}
		if id.Marker != inc.ID {
			// A pid on a runtime's word only: signalled once it is
			// proven to carry this incarnation's marker, never before.
			proven, ok := sl.prove(id, inc.ID)
			if !ok {
				if fs.Check(id, boot) == herd.Dead {
					continue
				}
				return killed, fmt.Errorf("pid %d does not carry this incarnation's marker: %w", id.PID, ErrUnverified)
			}
			id = proven
		}
		if err := sl.signal(id, unix.SIGTERM); err != nil {
			return killed, err
		}
		if !sl.waitGone(ctx, id, grace) {
			sl.o.Log.Warn("agent ignored SIGTERM; sending SIGKILL", "pid", id.PID, "grace", grace)
			killed = true
			if err := sl.signal(id, unix.SIGKILL); err != nil {
				return killed, err
			}
			sl.waitGone(ctx, id, 5*time.Second)
		}
		// Only a process seen dead counts as stopped.
		switch fs.Check(id, boot) {
		case herd.Alive:
			return killed, fmt.Errorf("pid %d is still alive after SIGKILL", id.PID)
		case herd.Unknown:
			return killed, fmt.Errorf("pid %d: %w", id.PID, ErrUnverified)
		}
	}
	// What is left (an escaped process that ignored SIGTERM, a cleanup
	// that outlived the agent) is ended with the rest of the grace.
	swept := sl.sweep(ctx, inc.ID, max(grace-time.Since(start), 0))
	// Every process of the incarnation is seen dead: the stop is done.
	// What cannot be removed or ended now (tmux hung, its listing
	// unreadable, a marked process unverifiable) is retried and
	// reported, never silently left.
	if rt, err := sl.runtime(inc.RuntimeKind); err == nil {
		if err := rt.Remove(ctx, inc); err != nil {
			sl.leaveBehind(inc, err)
		} else if swept != nil {
			sl.leaveBehind(inc, swept)
		}
	}
	return killed, nil
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
