package slots

import (
	"context"
	"errors"
	"fmt"
	"time"

	"herd"
	"herd/internal/status"
	"herd/internal/store"
	"herd/internal/takedown"
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

// Stop is the one stop path (user stop, scale-down, role deletion, reaper,
// reboot sweep): verify identity, signal the process group (TERM, grace,
// KILL) or kill the pane, then in ONE transaction end the incarnation only
// if it is still current and append exactly one stopped/reaped event with
// a resume snapshot. A caller that loses the race gets ErrAlreadyStopped.
func (sl *Slots) Stop(ctx context.Context, req StopRequest) error {
	if req.Kind == "" {
		req.Kind = herd.EventStopped
	}
	if !sl.ops.Begin() {
		return errShuttingDown
	}
	defer sl.ops.End()
	unlock := sl.st.Lock(req.Name)
	defer unlock()
	return sl.stopLocked(ctx, req)
}

// stopLocked is Stop for a caller that holds the session's lock and has
// begun an operation (a restart keeps the lock from the stop to the
// launch, so the reconciler cannot fill the slot in between): read the
// session, check the stop still applies, take its incarnation down, and
// record the stop.
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
	s, inc, err := sl.readStop(ctx, req.Name)
	if err != nil {
		return err
	}
	if err := sl.checkStop(req, s); err != nil {
		return err
	}
	ran := false
	if inc != nil && inc.EndedAt == nil && !req.NoSignal {
		// Deaths seen during the takedown are the stop's, until it is
		// recorded.
		sl.st.BeginTakedown(inc.ID, "")
		defer sl.st.EndTakedown(inc.ID, "")
		if ran, err = sl.takeDown(ctx, &req, *inc, grace); err != nil {
			return err
		}
	}
	return sl.st.Stopped(ctx, status.Stop{Name: req.Name, Incarnation: s.Incarnation, Reason: req.Reason, Kind: req.Kind,
		Message: req.Message, Data: req.Data, DropReplica: req.DropReplica, Ran: ran})
}

// readStop reads the session to stop and its current incarnation (nil
// when it has none on record).
func (sl *Slots) readStop(ctx context.Context, name string) (s herd.Session, inc *herd.Incarnation, err error) {
	err = sl.st.Store().View(ctx, func(tx store.Tx) error {
		var err error
		inc = nil
		if s, err = tx.Session(name); err != nil {
			return err
		}
		if s.Incarnation == "" {
			return nil
		}
		cur, err := tx.Incarnation(s.Incarnation)
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		if err == nil {
			inc = &cur
		}
		return err
	})
	return s, inc, err
}

// checkStop says whether the stop still applies to s: not stopped by
// another caller first, its guard passes, and it runs on this host unless
// the stop only records (reboot sweep).
func (sl *Slots) checkStop(req StopRequest, s herd.Session) error {
	if s.State == herd.StateStopped || (req.Incarnation != "" && s.Incarnation != req.Incarnation) {
		return ErrAlreadyStopped
	}
	if req.Guard != nil {
		if err := req.Guard(s); err != nil {
			return err
		}
	}
	if s.Host != sl.st.Host() && !req.NoSignal {
		return &notHereError{name: s.Name, host: s.Host, here: sl.st.Host()}
	}
	return nil
}

// notHereError means a stop found its session on another host: the slot
// moved there (failover, a placement change) after this host planned it.
type notHereError struct{ name, host, here string }

func (e *notHereError) Error() string {
	return fmt.Sprintf("session %s runs on host %s, not %s", e.name, e.host, e.here)
}

// takeDown ends inc's processes for a stop and reports whether any was
// found running; an agent that outlived its grace period is noted in the
// stop's event data.
func (sl *Slots) takeDown(ctx context.Context, req *StopRequest, inc herd.Incarnation, grace time.Duration) (ran bool, err error) {
	killed, ran, err := sl.td.TerminateSeen(ctx, inc, grace)
	if err != nil {
		// Deaths seen meanwhile were suppressed: the prober looks again.
		sl.o.Prober.Unwatch(inc.ID)
		sl.o.Prober.Kick()
		return ran, err
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
	return ran, nil
}

// ErrUnverified means the process's identity could not be verified, so
// herd did not signal it.
var ErrUnverified = takedown.ErrUnverified

// terminate takes an incarnation's processes down (see takedown).
func (sl *Slots) terminate(ctx context.Context, inc herd.Incarnation) error {
	_, err := sl.td.Terminate(ctx, inc, sl.o.Grace)
	return err
}
