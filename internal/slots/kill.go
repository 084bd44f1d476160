package slots

import (
	"context"
	"fmt"
	"herd"
	"herd/internal/cgroup"
	"herd/internal/proc"
	"herd/internal/status"
	"time"

	"golang.org/x/sys/unix"
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
	if _, err := sl.st.Killed(ctx, session, req.Inc.ID, req.Reason, msg, data); err != nil {
		sl.o.Log.Error("kill: record the kill", "session", session, "err", err)
	}
	if _, err := sl.st.RecordDeath(ctx, status.Death{Session: session, Incarnation: req.Inc.ID,
		Exit: herd.Exit{Reason: req.Reason}, Message: msg}); err != nil {
		return true, fmt.Errorf("kill: record the death: %w", err)
	}
	return true, nil
}

// sweep ends every process still carrying incarnation inc's cgroup or
// marker (identity-checked, TERM, grace, KILL), logs what it found and
// returns what it could not end.
func (sl *Slots) sweep(ctx context.Context, inc string, grace time.Duration) error {
	if sl.o.Contain == nil {
		return nil
	}
	rep, err := sl.o.Contain.Stop(ctx, inc, grace)
	if err != nil {
		sl.o.Log.Warn("processes of an ended incarnation not all ended", "incarnation", inc, "err", err)
	}
	if rep.Swept > 0 || rep.Killed {
		sl.o.Log.Info("ended what was left of an incarnation's tree", "incarnation", inc, "mode", rep.Mode,
			"swept", rep.Swept, "killed", rep.Killed, "took", rep.Took.Round(time.Millisecond))
	}
	return err
}

// Ended cleans up after a death the crash path accounted: what is left of
// the incarnation's tree (children that outlived the agent, in or out of
// its process group) is ended in the background, each identity-checked.
// The incarnation's cgroup is ended at once (its own files name its
// members); the processes carrying its marker outside the group (all of
// them in marker mode) are left to the sweeper, whose one scan of /proc
// serves every death of the last second.
func (sl *Slots) Ended(inc string) {
	if sl.o.Contain == nil || !sl.ops.begin() {
		return
	}
	sl.group.Go("crash cleanup", func() {
		defer sl.ops.end()
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

// prove reads id's process again and returns its identity when it is the
// same process (pid, start time) and carries marker; a moment's empty
// environment (a process mid-exec) is read again.
func (sl *Slots) prove(id herd.Identity, marker string) (herd.Identity, bool) {
	for range 3 {
		cur, err := sl.o.Proc.Identify(id.PID, sl.o.BootID)
		if err != nil || cur.StartTime != id.StartTime {
			return herd.Identity{}, false
		}
		if cur.Marker == marker {
			return cur, true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return herd.Identity{}, false
}

// termEscaped sends SIGTERM, identity-checked, to the live processes
// carrying incarnation inc's marker outside its root's process group (the
// group itself is signalled as a whole).
func (sl *Slots) termEscaped(inc herd.Incarnation) {
	if sl.o.Contain == nil || inc.Root.Zero() {
		return
	}
	fs, boot := sl.o.Proc, sl.o.BootID
	root, err := fs.Stat(inc.Root.PID)
	if err != nil {
		return
	}
	var ids []herd.Identity
	if pids, ok := sl.o.Contain.Members(inc.ID); ok {
		// Started in its cgroup: the group lists the whole tree.
		for _, pid := range pids {
			if id, err := fs.Identify(pid, boot); err == nil && id.Marker == inc.ID {
				ids = append(ids, id)
			}
		}
	} else if ids, err = cgroup.Marked(fs, boot, inc.ID); err != nil {
		return
	}
	for _, id := range ids {
		if st, err := fs.Stat(id.PID); err == nil && st.PGRP != root.PGRP {
			_ = proc.Signal(fs, id, boot, unix.SIGTERM)
		}
	}
}
