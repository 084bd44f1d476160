package slots

import (
	"context"
	"fmt"
	"time"

	"herd"
	"herd/internal/status"
)

// leftover takes down, in the background, what is left of an
// incarnation whose death left part of it up (ChangeLeftover).
func (sl *Slots) leftover(ctx context.Context, c status.Change) {
	inc, err := sl.st.Incarnation(ctx, c.Incarnation)
	if err != nil {
		sl.o.Log.Warn("leftover of a dead agent not read", "session", c.Session, "err", err)
		return
	}
	sl.group.Go("leftover", func() { sl.killLeftover(inc) })
}

// killLeftover takes down what remains of an incarnation whose agent died
// (a wrapper shell living on, a pane left open). Its death is recorded
// already.
func (sl *Slots) killLeftover(inc herd.Incarnation) {
	if !sl.ops.Begin() {
		return // shutting down: the next daemon's prober finds the leftover
	}
	defer sl.ops.End()
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
	if !sl.ops.Begin() {
		return false, errShuttingDown
	}
	defer sl.ops.End()
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
	if _, err := sl.st.Killed(ctx, session, req.Inc.ID, req.Reason, msg, data); err != nil {
		sl.o.Log.Error("kill: record the kill", "session", session, "err", err)
	}
	if _, err := sl.st.RecordDeath(ctx, status.Death{Session: session, Incarnation: req.Inc.ID,
		Exit: herd.Exit{Reason: req.Reason}, Message: msg}); err != nil {
		return true, fmt.Errorf("kill: record the death: %w", err)
	}
	return true, nil
}

// Ended cleans up after a death the crash path accounted: what is left of
// the incarnation's tree (children that outlived the agent, in or out of
// its process group) is ended in the background, each identity-checked.
// The incarnation's cgroup is ended at once (its own files name its
// members); the processes carrying its marker outside the group (all of
// them in marker mode) are left to the sweeper, whose one scan of /proc
// serves every death of the last second.
func (sl *Slots) Ended(inc string) {
	if sl.o.Contain == nil || !sl.ops.Begin() {
		return
	}
	sl.group.Go("crash cleanup", func() {
		defer sl.ops.End()
		ctx, cancel := sl.KillContext(context.Background())
		defer cancel()
		rep, err := sl.o.Contain.StopGroup(ctx, inc, sl.o.Grace)
		if err != nil {
			sl.o.Log.Warn("cgroup of an ended incarnation not ended", "incarnation", inc, "err", err)
		}
		if rep.Killed {
			sl.o.Log.Info("killed what was left in an ended incarnation's cgroup after the grace period", "incarnation", inc,
				"took", rep.Took.Round(time.Millisecond))
		}
		grace := sl.o.Grace
		if rep.Group {
			grace = 0 // outside its group: it escaped, and the group had its grace
		}
		sl.cleanup.Queue(inc, grace)
	})
}
