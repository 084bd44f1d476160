package tasks

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"herd"
	"herd/internal/config"
	"herd/internal/slots"
	"herd/internal/store"
	"herd/internal/worktree"
)

// landTries is how many times a landing starts again when the base moved
// under it (another landing, a push) before it reacts as to a conflict.
const landTries = 3

// startLanding lands an approved task in the background.
func (m *Manager) startLanding(t herd.Task, role herd.Role) {
	if !m.claim(t.ID) {
		return
	}
	m.group.Go("task landing "+t.ID, func() {
		defer m.release(t.ID)
		// Landings in one repository wait for each other here, before
		// their deadline starts: a wait is no part of a check's time.
		unlock, err := m.lockRepo(m.runCtx(), t.Repo)
		if err != nil {
			return
		}
		defer unlock()
		ctx, cancel := context.WithTimeout(m.runCtx(), checkTimeout(role)+2*time.Minute)
		defer cancel()
		if err := m.land(ctx, t, role); err != nil && !errors.Is(err, errStale) && ctx.Err() == nil {
			m.log.Warn("tasks: landing", "task", t.ID, "err", err)
		}
	})
}

// land merges the task's branch into its base (the check run again on
// the result first), then removes its worktree and branch. A conflict
// goes back to the agent (conflict), a check that fails on the result
// too (check_failed); a base whose checkout would lose a person's
// uncommitted changes needs that person.
func (m *Manager) land(ctx context.Context, t herd.Task, role herd.Role) error {
	opts := worktree.LandOptions{Repo: t.Repo, Branch: t.Branch, Base: t.Base, Mode: role.Merge, Commit: t.Reviewed,
		Message: fmt.Sprintf("%s (herd task %s)", t.Title, t.ID)}
	var res ranCheck
	if len(t.Check) > 0 {
		opts.Check = func(ctx context.Context, dir string) error {
			// The merge result is checked as the task was: with the
			// role's included files and its setup.
			if out, err := m.o.Worktrees.Prepare(ctx, dir, worktree.TaskOptions(role, t)); err != nil {
				res = ranCheck{Exit: -1, Err: err, Tail: out}
				return err
			}
			res = m.run(ctx, t.ID+"-land", dir, t.Check, checkTimeout(role), m.logPath(t.ID, 0))
			if !res.Passed() {
				return fmt.Errorf("exit %d: %v", res.Exit, res.Err)
			}
			return nil
		}
	}
	var (
		l   worktree.Landing
		err error
	)
	for range landTries {
		if l, err = m.o.Worktrees.Land(ctx, opts); !errors.Is(err, worktree.ErrBaseMoved) {
			break
		}
	}
	review := []herd.TaskState{herd.TaskReview}
	if errors.Is(err, worktree.ErrEmpty) {
		// Nothing left to land: a landing that moved the base before its
		// daemon died (or the same change landed by hand). Landed.
		tip, terr := m.o.Worktrees.Tip(ctx, t.Repo, t.Base)
		if terr != nil {
			return terr
		}
		l, err = worktree.Landing{Old: tip, New: tip, Tip: t.Reviewed}, nil
	}
	switch {
	case err == nil:
		// Its replica is relaunched once the task lets go of it: no
		// other task may take it meanwhile.
		replica := "session " + t.Session
		if !m.claim(replica) {
			return fmt.Errorf("replica %s busy", t.Session)
		}
		defer m.release(replica)
		if werr := m.write(ctx, t.ID, review, func(t *herd.Task, tx store.Tx) ([]*herd.Event, error) {
			t.State, t.Reason, t.Landed = herd.TaskLanded, "", l.New
			msg := fmt.Sprintf("task %s landed on %s: %s (%s)", t.ID, t.Base, short(l.New), mode(role))
			return []*herd.Event{m.event(*t, herd.EventTaskLanded, "", msg, map[string]any{"commit": l.New, "from": l.Old, "by": t.ApprovedBy})}, nil
		}); werr != nil {
			return werr
		}
		rm, rerr := m.o.Worktrees.RemoveLanded(ctx, worktree.TaskOptions(role, t), role.KeepBranch, l.Tip)
		if rerr != nil || rm.Reason != "" {
			m.log.Warn("tasks: a landed task's worktree kept", "task", t.ID, "reason", rm.Reason, "err", rerr)
			return nil
		}
		// Its replica ran in the worktree just removed: relaunched in its
		// role's workdir, it is free for the next task.
		if _, err := m.o.Slots.Restart(ctx, slots.RestartRequest{Name: t.Session, Reason: "task", Data: map[string]any{"task": t.ID, "landed": true}}); err != nil {
			m.log.Warn("tasks: relaunch a landed task's replica", "task", t.ID, "session", t.Session, "err", err)
		}
		return nil
	case (errors.Is(err, worktree.ErrConflict) || errors.Is(err, worktree.ErrBaseMoved)) && m.o.Reactions().Conflict.Action == config.ReactionNotify:
		return m.write(ctx, t.ID, review, func(t *herd.Task, tx store.Tx) ([]*herd.Event, error) {
			t.State, t.Reason, t.ApprovedBy = herd.TaskNeedsYou, herd.ReactionConflict, ""
			msg := fmt.Sprintf("task %s cannot land: %v", t.ID, err)
			return []*herd.Event{m.event(*t, herd.EventTaskNeedsYou, herd.ReactionConflict, msg, nil),
				m.event(*t, herd.EventReaction, herd.ReactionConflict, msg, map[string]any{"kind": herd.ReactionConflict, "attempt": 1, "action": "notify"})}, nil
		})
	case errors.Is(err, worktree.ErrConflict), errors.Is(err, worktree.ErrBaseMoved):
		text := fmt.Sprintf("Task %s cannot land: %s no longer merges into %s (%v). Rebase this branch on %s, resolve the conflicts, and commit.",
			t.ID, t.Branch, t.Base, err, t.Base)
		return m.react(ctx, t, review, herd.ReactionConflict, text, func(t herd.Task) []*herd.Event {
			return []*herd.Event{m.event(t, herd.EventReaction, herd.ReactionConflict, fmt.Sprintf("task %s: %v; sent to %s", t.ID, err, t.Session),
				map[string]any{"kind": herd.ReactionConflict, "attempt": 1, "action": "send"})}
		}, func(t *herd.Task) { t.State, t.ApprovedBy = herd.TaskChanges, "" })
	case errors.Is(err, worktree.ErrCheckFailed):
		failed := t
		failed.Attempts = 0
		text := checkFailedText(failed, res)
		return m.react(ctx, t, review, herd.ReactionCheckFailed, "The merge of this branch into "+t.Base+" fails its check. "+text, func(t herd.Task) []*herd.Event {
			return []*herd.Event{m.event(t, herd.EventReaction, herd.ReactionCheckFailed, fmt.Sprintf("task %s: the check fails on the merge into %s; sent to %s", t.ID, t.Base, t.Session),
				map[string]any{"kind": herd.ReactionCheckFailed, "attempt": t.Attempts, "action": "send", "on": "merge"})}
		}, func(t *herd.Task) {
			t.State, t.ApprovedBy = herd.TaskChanges, ""
			t.CheckLog, t.CheckTail, t.CheckExit = res.Log, res.Tail, res.Exit
		})
	}
	reason := "land_failed"
	if errors.Is(err, worktree.ErrDirtyBase) {
		reason = "dirty_base"
	}
	return m.write(ctx, t.ID, review, func(t *herd.Task, tx store.Tx) ([]*herd.Event, error) {
		t.State, t.Reason, t.ApprovedBy = herd.TaskNeedsYou, reason, ""
		return []*herd.Event{m.event(*t, herd.EventTaskNeedsYou, reason, fmt.Sprintf("task %s could not land: %v", t.ID, err), nil)}, nil
	})
}

// lockRepo takes the landing turn of repository repo, giving up when ctx
// ends first; it returns the unlock.
func (m *Manager) lockRepo(ctx context.Context, repo string) (func(), error) {
	m.mu.Lock()
	if m.landing == nil {
		m.landing = map[string]chan struct{}{}
	}
	turn, ok := m.landing[repo]
	if !ok {
		turn = make(chan struct{}, 1)
		m.landing[repo] = turn
	}
	m.mu.Unlock()
	select {
	case turn <- struct{}{}:
		return func() { <-turn }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func mode(role herd.Role) string {
	if role.Merge == "" {
		return herd.MergeMerge
	}
	return role.Merge
}

func short(sha string) string {
	if len(sha) > 12 {
		return sha[:12]
	}
	return strings.TrimSpace(sha)
}
