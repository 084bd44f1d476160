package daemon

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"herd"
	"herd/internal/activity"
	"herd/internal/store"
)

// sweepAfterReboot runs once per boot (a kv row keyed by host and boot id
// is claimed atomically; only the winner sweeps): every incarnation of
// this host recorded under an older boot is stopped with reason reboot
// through the stop path, without a signal (those processes cannot be
// ours); then sessions whose role restarts them resume from their snapshot.
// The stops touch only the store and run before the API opens, so no one
// sees a pre-reboot session as running; resumeAfterReboot launches later.
func (d *Daemon) sweepAfterReboot(ctx context.Context) error {
	key := "boot/" + d.host + "/" + d.bootID
	var open []herd.Incarnation
	sweep := false
	err := d.st.Update(ctx, func(tx store.Tx) error {
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
		open, err = tx.OpenIncarnations()
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
		if inc.Host != d.host || boot == "" || boot == d.bootID {
			continue
		}
		// A session that will not be resumed gives its replica back, as a
		// user stop does; `herd resume` takes it again.
		restarts := false
		if s, err := d.sessionByName(ctx, inc.Session); err == nil {
			if r, err := d.role(ctx, s.Role); err == nil {
				restarts = r.Restart.Policy != herd.PolicyNever
			}
		}
		err := d.stop(ctx, stopRequest{
			Name: inc.Session, Reason: herd.ReasonReboot, NoSignal: true, Incarnation: inc.ID, DropReplica: !restarts,
			Message: "the machine rebooted; the agent is gone", Data: map[string]any{"old_boot_id": boot},
		})
		switch {
		case errors.Is(err, errAlreadyStopped), errors.Is(err, store.ErrNotFound):
		case err != nil:
			d.log.Error("reboot sweep: stop", "session", inc.Session, "err", err)
		default:
			stopped++
		}
	}
	d.log.Info("reboot sweep", "boot_id", d.bootID, "stopped", stopped)
	return nil
}

// resumeAfterReboot resumes every session a reboot stopped (also those of a
// sweep that died before resuming them: their exit reason says so), then
// marks this boot's sweep done.
func (d *Daemon) resumeAfterReboot(ctx context.Context) error {
	key := "boot/" + d.host + "/" + d.bootID
	var toResume []string
	err := d.st.View(ctx, func(tx store.Tx) error {
		if v, _, err := tx.KV(key); err != nil || v == sweepDone {
			return err
		}
		all, err := tx.Sessions()
		for _, s := range all {
			if s.Host == d.host && s.State == herd.StateStopped && s.Exit != nil && s.Exit.Reason == herd.ReasonReboot {
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
		err := d.resume(ctx, name, false, true)
		switch {
		case err == nil:
			resumed++
		case !errors.Is(err, errNotRestartable):
			d.log.Error("reboot sweep: resume", "session", name, "err", err)
		}
	}
	if len(toResume) > 0 {
		d.log.Info("resumed after reboot", "boot_id", d.bootID, "resumed", resumed)
	}
	return d.st.Update(ctx, func(tx store.Tx) error { return tx.PutKV(key, sweepDone) })
}

// Values of the per-boot sweep row.
const (
	sweepStarted = "started"
	sweepDone    = "done"
)

func (d *Daemon) sessionByName(ctx context.Context, name string) (s herd.Session, err error) {
	err = d.st.View(ctx, func(tx store.Tx) error {
		s, err = tx.Session(name)
		return err
	})
	return s, err
}

// errNotRestartable means the role's policy does not relaunch the session.
var errNotRestartable = errors.New("policy does not restart it")

// errNotStopped means resume was asked for a session that is not stopped.
var errNotStopped = errors.New("not stopped")

// resume relaunches a stopped session from its snapshot, agent-aware.
// byUser counts it toward its role's replicas again; onlyRestartable skips
// roles whose policy never restarts (reboot sweep).
func (d *Daemon) resume(ctx context.Context, name string, byUser, onlyRestartable bool) error {
	var s herd.Session
	var role herd.Role
	err := d.st.View(ctx, func(tx store.Tx) error {
		var err error
		if s, err = tx.Session(name); err != nil {
			return err
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
		return fmt.Errorf("session %s is %s: %w", name, s.State, errNotStopped)
	}
	if onlyRestartable && role.Restart.Policy == herd.PolicyNever {
		return errNotRestartable
	}
	snap := *s.Snapshot
	if snap.RuntimeKind != "" {
		role.Runtime = snap.RuntimeKind
	}
	if snap.Workdir != "" {
		role.Workdir = snap.Workdir
	}
	// The slot stays locked from the replica bump to the launch, so the
	// reconciler cannot fill the slot with a fresh copy in between.
	unlock := d.locks.Lock(name)
	defer unlock()
	if byUser {
		err := d.st.Update(ctx, func(tx store.Tx) error {
			cur, err := tx.Session(name)
			if err != nil {
				return err
			}
			if cur.State != herd.StateStopped {
				return fmt.Errorf("session %s is %s: %w", name, cur.State, errNotStopped)
			}
			r, err := tx.Role(role.Name)
			if err != nil {
				return err
			}
			r.Replicas++
			r.UpdatedAt = time.Now().UTC()
			return tx.PutRole(r)
		})
		if err != nil {
			return err
		}
	}
	return d.launchLocked(ctx, launchRequest{
		Role: role, Name: name, Index: s.Index, Kind: herd.EventResumed, Argv: ResumeArgv(snap),
		Check: func(cur *herd.Session, exists bool) error {
			if !exists || cur.State != herd.StateStopped {
				return errSkip
			}
			return nil
		},
	})
}

// ResumeArgv is the command that continues a stopped agent's conversation:
// `claude --resume <id>` for Claude Code, `codex resume <id>` for Codex,
// and the original command for anything else or when no id is known.
func ResumeArgv(snap herd.Snapshot) []string {
	argv := slices.Clone(snap.Argv)
	id := snap.AgentSessionID
	if id == "" || len(argv) == 0 || !activity.ValidAgentSessionID(id) {
		// No id, or one stored before ids were validated that could
		// pass for a flag: relaunch the command as it was.
		return argv
	}
	switch snap.Agent {
	case herd.AgentClaude:
		out := []string{argv[0]}
		for i := 1; i < len(argv); i++ {
			switch argv[i] {
			case "--resume", "-r":
				i++ // drop an older id
				continue
			case "--continue", "-c":
				continue
			}
			out = append(out, argv[i])
		}
		return append(out, "--resume", id)
	case herd.AgentCodex:
		return []string{argv[0], "resume", id}
	case herd.AgentGemini:
		return append(argv, "--resume", id)
	}
	return argv
}
