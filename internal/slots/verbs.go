package slots

import (
	"context"
	"errors"
	"fmt"
	"time"

	"herd"
	"herd/internal/agents"
	"herd/internal/errs"
	"herd/internal/proc"
	"herd/internal/store"

	"golang.org/x/sys/unix"
)

// RestartRequest asks for a fresh incarnation of one session.
type RestartRequest struct {
	Name string
	// Reason is the reason of the stopped and restarted events: user
	// (herd restart) or rollout.
	Reason string
	// Grace overrides the stop's grace period; zero keeps the daemon's.
	Grace time.Duration
	// Data is added to both events.
	Data map[string]any
	// Resume relaunches from the stop's snapshot (the agent resumes its
	// conversation) instead of the role's command.
	Resume bool
	// Continue relaunches the role's command continuing the agent's
	// last conversation when it is known (an exec task role's next turn).
	Continue bool
}

// Restart gives a session a fresh incarnation: its current one goes
// through the one stop path (TERM, grace, KILL, one stopped event), then
// the slot is launched again (a restarted event), the slot locked from
// the one to the other so the reconciler cannot fill it in between. A
// failed or succeeded session is re-armed: its crash count starts over.
// A session stopped on purpose is left to herd resume. It returns the
// new incarnation's id.
func (sl *Slots) Restart(ctx context.Context, req RestartRequest) (string, error) {
	if req.Reason == "" {
		req.Reason = herd.ReasonUser
	}
	if !sl.ops.Begin() {
		return "", errShuttingDown
	}
	defer sl.ops.End()
	unlock := sl.st.Lock(req.Name)
	defer unlock()
	defer sl.beginRestart(req.Name)()

	s, role, err := sl.restartTarget(ctx, req.Name)
	if err != nil {
		return "", err
	}
	rearm := s.State == herd.StateFailed || s.State == herd.StateSucceeded
	err = sl.stopLocked(ctx, StopRequest{
		Name: req.Name, Reason: req.Reason, Grace: req.Grace, Data: req.Data, Incarnation: s.Incarnation,
		Message: fmt.Sprintf("stopped for a restart (%s)", req.Reason),
	})
	if err != nil && !errors.Is(err, ErrAlreadyStopped) {
		return "", fmt.Errorf("restart %s: %w", req.Name, err)
	}
	data := map[string]any{"previous_incarnation": s.Incarnation}
	for k, v := range req.Data {
		data[k] = v
	}
	var fresh string
	var argv []string
	if req.Resume {
		argv = sl.resumeArgv(ctx, req.Name)
	}
	err = sl.launchLocked(ctx, LaunchRequest{
		Role: role, Name: req.Name, Index: s.Index, Kind: herd.EventRestarted, Reason: req.Reason, Data: data, Argv: argv, Continue: req.Continue,
		Check: func(cur *herd.Session, exists bool) error {
			if !exists {
				return errs.Badf("restart %s: the session was deleted meanwhile", req.Name)
			}
			if cur.State != herd.StateStopped {
				return errSkip // launched meanwhile: it is fresh already
			}
			if rearm {
				cur.Restarts, cur.LastCrashAt = 0, nil
			}
			return nil
		},
	})
	if err != nil {
		return "", fmt.Errorf("restart %s: %w", req.Name, err)
	}
	err = sl.st.Store().View(ctx, func(tx store.Tx) error {
		cur, err := tx.Session(req.Name)
		fresh = cur.Incarnation
		return err
	})
	return fresh, err
}

// restartTarget reads the session a restart replaces and its role, and
// refuses a session that is stopped (herd resume brings it back) or runs
// on another host.
func (sl *Slots) restartTarget(ctx context.Context, name string) (s herd.Session, role herd.Role, err error) {
	err = sl.st.Store().View(ctx, func(tx store.Tx) error {
		var err error
		if s, err = tx.Session(name); err != nil {
			return errs.Named("session", name, err)
		}
		if role, err = tx.Role(s.Role); errors.Is(err, store.ErrNotFound) {
			return errs.Badf("restart %s: its role %s is no longer declared", name, s.Role)
		}
		return err
	})
	switch {
	case err != nil:
		return s, role, err
	case s.State == herd.StateStopped:
		return s, role, errs.Badf("restart %s: the session is stopped; herd resume %s brings it back", name, name)
	case s.Host != sl.st.Host():
		return s, role, errs.Badf("restart %s: the session runs on host %s, not %s", name, s.Host, sl.st.Host())
	}
	return s, role, nil
}

// Reset clears a session's crash count: the next crash backs off from the
// initial delay again. A failed session is re-armed (it relaunches now).
func (sl *Slots) Reset(ctx context.Context, name string) (rearmed bool, err error) {
	unlock := sl.st.Lock(name)
	defer unlock()
	rearmed, err = sl.st.Reset(ctx, name)
	if err != nil {
		err = errs.Named("session", name, err)
	}
	if err == nil {
		sl.Kick()
	}
	return rearmed, err
}

// Signal sends sig to a session's agent process (not its group, nor a
// launcher or wrapper the agent runs under) after verifying its identity
// through a pidfd; a process whose identity does not match is never
// signalled. It returns the pid signalled.
func (sl *Slots) Signal(ctx context.Context, name string, sig unix.Signal) (int, error) {
	var s herd.Session
	var inc herd.Incarnation
	err := sl.st.Store().View(ctx, func(tx store.Tx) error {
		var err error
		if s, err = tx.Session(name); err != nil {
			return errs.Named("session", name, err)
		}
		if !s.State.Live() {
			return errs.Badf("signal %s: the session is %s; no process to signal", name, s.State)
		}
		inc, err = tx.Incarnation(s.Incarnation)
		return err
	})
	if err != nil {
		return 0, err
	}
	if s.Host != sl.st.Host() {
		return 0, errs.Badf("signal %s: the session runs on host %s, not %s", name, s.Host, sl.st.Host())
	}
	// The agent itself, never the process launched in its stead (a
	// launcher forwards some signals and swallows others): until it is
	// identified, nothing is signalled.
	id := inc.Identity
	if id.Zero() {
		return 0, errs.Badf("signal %s: its agent process is not identified yet", name)
	}
	if err := proc.Signal(sl.o.Proc, id, sl.o.BootID, sig); err != nil {
		switch {
		case errors.Is(err, proc.ErrNoProcess):
			return 0, errs.Badf("signal %s: pid %d has exited", name, id.PID)
		case errors.Is(err, proc.ErrIdentityMismatch):
			return 0, fmt.Errorf("signal %s: pid %d: %w", name, id.PID, ErrUnverified)
		}
		return 0, fmt.Errorf("signal %s: %w", name, err)
	}
	sl.o.Log.Info("signal sent by user", "session", name, "pid", id.PID, "signal", unix.SignalName(sig))
	return id.PID, nil
}

// resumeArgv is the agent-aware resume command of a session's stop
// snapshot; nil (the role's command) when it has none.
func (sl *Slots) resumeArgv(ctx context.Context, name string) []string {
	var argv []string
	_ = sl.st.Store().View(ctx, func(tx store.Tx) error {
		cur, err := tx.Session(name)
		if err == nil && cur.Snapshot != nil {
			argv = agents.ResumeArgv(*cur.Snapshot)
		}
		return err
	})
	return argv
}
