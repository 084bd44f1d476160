package slots

import (
	"context"
	"errors"
	"fmt"
	"time"

	"herd"
	"herd/internal/conversation"
	"herd/internal/errs"
	"herd/internal/store"
)

// SweepAfterReboot runs once per boot (a kv row keyed by host and boot id
// is claimed atomically; only the winner sweeps): every incarnation of
// this host recorded under an older boot is stopped with reason reboot
// through the stop path, without a signal (those processes cannot be
// ours); then sessions whose role restarts them resume from their snapshot.
// The stops touch only the store and run before the API opens, so no one
// sees a pre-reboot session as running; resumeAfterReboot launches later.
func (sl *Slots) SweepAfterReboot(ctx context.Context) error {
	key := sl.bootKey()
	var open []herd.Incarnation
	sweep := false
	err := sl.st.Store().Update(ctx, func(tx store.Tx) error {
		won, err := tx.ClaimKV(key, sweepStarted)
		if err != nil {
			return err
		}
		if !won {
			// Claimed before: sweep again only if that sweep never finished
			// (its daemon died midway). This daemon holds the state dir's
			// lock, so no other sweeper of this host runs now.
			v, _, err := tx.KV(key)
			if err != nil || v == sweepDone {
				return err
			}
		}
		sweep = true
		open, err = tx.OpenIncarnationsOnHost(sl.st.Host())
		return err
	})
	if err != nil || !sweep {
		return err
	}
	stopped := 0
	for _, inc := range open {
		boot := inc.Root.BootID
		if boot == "" {
			boot = inc.Identity.BootID
		}
		if inc.Host != sl.st.Host() || boot == "" || boot == sl.o.BootID {
			continue
		}
		// A session that will not be resumed gives its replica back, as a
		// user stop does; `herd resume` takes it again.
		restarts := false
		if s, err := sl.st.Session(ctx, inc.Session); err == nil {
			if r, err := sl.st.Role(ctx, s.Role); err == nil {
				restarts = r.Restart.Policy != herd.PolicyNever
			}
		}
		err := sl.Stop(ctx, StopRequest{
			Name: inc.Session, Reason: herd.ReasonReboot, NoSignal: true, Incarnation: inc.ID, DropReplica: !restarts,
			Message: "the machine rebooted; the agent is gone", Data: map[string]any{"old_boot_id": boot},
		})
		switch {
		case errors.Is(err, ErrAlreadyStopped), errors.Is(err, store.ErrNotFound):
		case err != nil:
			sl.o.Log.Error("reboot sweep: stop", "session", inc.Session, "err", err)
		default:
			stopped++
		}
	}
	sl.o.Log.Info("reboot sweep", "boot_id", sl.o.BootID, "stopped", stopped)
	return nil
}

// ResumeAfterReboot resumes every session a reboot stopped (also those of a
// sweep that died before resuming them: their exit reason says so), then
// marks this boot's sweep done.
func (sl *Slots) ResumeAfterReboot(ctx context.Context) error {
	key := sl.bootKey()
	var toResume []string
	err := sl.st.Store().View(ctx, func(tx store.Tx) error {
		if v, _, err := tx.KV(key); err != nil || v == sweepDone {
			return err
		}
		all, err := tx.SessionsOnHost(sl.st.Host())
		for _, s := range all {
			if s.Host == sl.st.Host() && s.State == herd.StateStopped && s.Exit != nil && s.Exit.Reason == herd.ReasonReboot {
				toResume = append(toResume, s.Name)
			}
		}
		return err
	})
	if err != nil {
		return err
	}
	resumed := 0
	for _, name := range toResume {
		err := sl.resume(ctx, name, false, true)
		switch {
		case err == nil:
			resumed++
		case !errors.Is(err, errNotRestartable):
			sl.o.Log.Error("reboot sweep: resume", "session", name, "err", err)
		}
	}
	if len(toResume) > 0 {
		sl.o.Log.Info("resumed after reboot", "boot_id", sl.o.BootID, "resumed", resumed)
	}
	return sl.st.Store().Update(ctx, func(tx store.Tx) error { return tx.PutKV(key, sweepDone) })
}

// Values of the per-boot sweep row.
const (
	sweepStarted = "started"
	sweepDone    = "done"
)

// bootKey is the kv row of this host's sweep for the current boot.
func (sl *Slots) bootKey() string { return "boot/" + sl.st.Host() + "/" + sl.o.BootID }

// errNotRestartable means the role's policy does not relaunch the session.
var errNotRestartable = errors.New("policy does not restart it")

// ErrNotStopped means resume was asked for a session that is not stopped.
var ErrNotStopped error = errs.New(errs.Conflict, "not stopped")

// Resume relaunches a stopped session from its snapshot, agent-aware, and
// counts it toward its role's replicas again.
func (sl *Slots) Resume(ctx context.Context, name string) error {
	return sl.resume(ctx, name, true, false)
}

// resume relaunches a stopped session from its snapshot, agent-aware.
// byUser counts it toward its role's replicas again; onlyRestartable skips
// roles whose policy never restarts (reboot sweep).
func (sl *Slots) resume(ctx context.Context, name string, byUser, onlyRestartable bool) error {
	var s herd.Session
	var role herd.Role
	err := sl.st.Store().View(ctx, func(tx store.Tx) error {
		var err error
		if s, err = tx.Session(name); err != nil {
			return err
		}
		if s.Host != sl.st.Host() {
			return &OtherHostError{What: "session", Name: name, Host: s.Host}
		}
		if role, err = tx.Role(s.Role); errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("role %q of session %s is no longer declared", s.Role, name)
		}
		return err
	})
	if err != nil {
		return err
	}
	if s.State != herd.StateStopped || s.Snapshot == nil {
		return fmt.Errorf("session %s is %s: %w", name, s.State, ErrNotStopped)
	}
	if onlyRestartable && role.Restart.Policy == herd.PolicyNever {
		return errNotRestartable
	}
	snap := *s.Snapshot
	if snap.RuntimeKind != "" {
		role.Runtime = snap.RuntimeKind
	}
	if snap.Workdir != "" && !role.Worktree {
		// A worktree role keeps its workdir: the launch finds the
		// session's worktree again from it, so the cwd is the same.
		role.Workdir = snap.Workdir
	}
	// The slot stays locked from the replica bump to the launch, so the
	// reconciler cannot fill the slot with a fresh copy in between.
	unlock := sl.st.Lock(name)
	defer unlock()
	if byUser {
		if err := sl.countAgain(ctx, name, role.Name); err != nil {
			return err
		}
	}
	return sl.launchLocked(ctx, LaunchRequest{
		Role: role, Name: name, Index: s.Index, Kind: herd.EventResumed, Argv: conversation.ResumeArgv(snap, role.Env),
		AgentSessionID: snap.AgentSessionID,
		Check: func(cur *herd.Session, exists bool) error {
			if !exists || cur.State != herd.StateStopped {
				return errSkip
			}
			return nil
		},
	})
}

// countAgain counts a stopped session toward its role's replicas again
// (a resume by the user): the role gets one replica more.
func (sl *Slots) countAgain(ctx context.Context, name, role string) error {
	return sl.st.Store().Update(ctx, func(tx store.Tx) error {
		cur, err := tx.Session(name)
		if err != nil {
			return err
		}
		if cur.State != herd.StateStopped {
			return fmt.Errorf("session %s is %s: %w", name, cur.State, ErrNotStopped)
		}
		r, err := tx.Role(role)
		if err != nil {
			return err
		}
		r.Replicas++
		r.UpdatedAt = time.Now().UTC()
		return tx.PutRole(r)
	})
}
