package tasks

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"

	"herd"
	"herd/internal/config"
	"herd/internal/errs"
	"herd/internal/slots"
	"herd/internal/store"
	"herd/internal/taskflow"
	"herd/internal/worktree"
)

// maxTitle bounds a task's title.
const maxTitle = 200

// Add queues a new task for a role that takes tasks.
func (m *Manager) Add(ctx context.Context, req AddRequest) (herd.Task, error) {
	if strings.TrimSpace(req.Prompt) == "" {
		return herd.Task{}, errs.Badf("task: the prompt is empty")
	}
	if len(req.Prompt) > herd.MaxTaskPrompt {
		return herd.Task{}, errs.Badf("task: the prompt is %d bytes, over the limit of %d", len(req.Prompt), herd.MaxTaskPrompt)
	}
	if !utf8.ValidString(req.Prompt) || strings.ContainsRune(req.Prompt, 0) {
		return herd.Task{}, errs.Badf("task: the prompt must be text (valid UTF-8, no NUL byte)")
	}
	if len(req.Title) > maxTitle || strings.ContainsAny(req.Title, "\r\n\x00") {
		return herd.Task{}, errs.Badf("task: the title must be one line of at most %d bytes", maxTitle)
	}
	var role herd.Role
	err := m.st.View(ctx, func(tx store.Tx) (err error) { role, err = tx.Role(req.Role); return err })
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return herd.Task{}, errs.Badf("task: role %q does not exist", req.Role)
		}
		return herd.Task{}, err
	}
	if !role.Tasks {
		return herd.Task{}, errs.Badf("task: role %s does not take tasks (set tasks = true in its [[role]])", role.Name)
	}
	if role.Runtime == herd.RuntimeExec && strings.HasPrefix(req.Prompt, "-") {
		return herd.Task{}, errs.Badf("task: the prompt starts with %q; role %s gives it to its agent as an argument, which would read it as an option: begin it with a word", "-", role.Name)
	}
	if role.Runtime == herd.RuntimeExec && len(req.Prompt) > herd.MaxExecTurn {
		return herd.Task{}, errs.Badf("task: the prompt is %d bytes; role %s runs its agent with the prompt as an argument, at most %d bytes (the kernel's limit)",
			len(req.Prompt), role.Name, herd.MaxExecTurn)
	}
	repo := req.Repo
	if repo == "" {
		repo = role.Workdir
	}
	if !filepath.IsAbs(repo) {
		return herd.Task{}, errs.Badf("task: the repository %q must be an absolute path", repo)
	}
	top, base, err := m.o.Worktrees.Resolve(ctx, repo, req.Base)
	if err != nil {
		return herd.Task{}, errs.Badf("task: %v", err)
	}
	check := role.Check
	if req.Check != nil {
		check = req.Check
	}
	if len(check) > 0 && strings.TrimSpace(check[0]) == "" {
		return herd.Task{}, errs.Badf("task: the check's command is empty")
	}
	title := req.Title
	if title == "" {
		title, _, _ = strings.Cut(strings.TrimSpace(req.Prompt), "\n")
		if len(title) > 80 {
			title = strings.ToValidUTF8(title[:80], "") + "…"
		}
	}
	now := time.Now().UTC()
	t := herd.Task{Title: title, Role: role.Name, State: herd.TaskQueued, Base: base, Repo: top, Check: check,
		Prompt: req.Prompt, CreatedAt: now, UpdatedAt: now}
	err = m.st.Update(ctx, func(tx store.Tx) error {
		t.ID = ""
		if err := tx.AddTask(&t); err != nil {
			return err
		}
		t.Branch = herd.TaskBranch(t.ID)
		if err := tx.PutTask(t); err != nil {
			return err
		}
		return tx.AppendEvent(m.event(t, herd.EventTaskQueued, "", fmt.Sprintf("task %s queued for role %s: %s", t.ID, t.Role, t.Title),
			map[string]any{"by": req.By, "repo": top, "base": base}))
	})
	if err != nil {
		return herd.Task{}, err
	}
	m.Kick()
	return t, nil
}

// List lists the tasks f selects, oldest first.
func (m *Manager) List(ctx context.Context, f store.TaskFilter) ([]herd.Task, error) {
	var out []herd.Task
	err := m.st.View(ctx, func(tx store.Tx) (err error) { out, err = tx.Tasks(f); return err })
	return out, err
}

// Describe returns a task and the events of its story: every event that
// names it (its replica's relaunches too), read through the events' task
// index, the newest maxStory of them.
func (m *Manager) Describe(ctx context.Context, id string) (Described, error) {
	var d Described
	err := m.st.View(ctx, func(tx store.Tx) error {
		t, err := tx.Task(id)
		if err != nil {
			return err
		}
		d = Described{Task: t}
		d.Events, err = tx.Events(store.EventFilter{Task: id, Limit: maxStory})
		return err
	})
	return d, err
}

// maxStory bounds the events Describe returns (a task sent back and
// forth for weeks has thousands).
const maxStory = 1000

// Diff is the task's change against its base.
func (m *Manager) Diff(ctx context.Context, id string) (Diff, error) {
	var t herd.Task
	err := m.st.View(ctx, func(tx store.Tx) (err error) { t, err = tx.Task(id); return err })
	if err != nil {
		return Diff{}, err
	}
	d := Diff{Task: t.ID, Base: t.Base, Branch: t.Branch}
	if t.State == herd.TaskLanded {
		return d, errs.New(errs.Conflict, fmt.Sprintf("task %s landed on %s as %s: its branch may be gone (git show %s)", t.ID, t.Base, short(t.Landed), short(t.Landed)))
	}
	d.Diff, d.Truncated, err = m.o.Worktrees.Diff(ctx, t.Repo, t.Base, t.Branch, MaxDiff)
	if err != nil {
		if errors.Is(err, worktree.ErrNoBranch) || errors.Is(err, worktree.ErrNoBase) {
			return d, errs.New(errs.Conflict, fmt.Sprintf("task %s: %v", t.ID, err))
		}
		return d, err
	}
	return d, nil
}

// Verb applies a person's (or its agent's) verb to a task: cancel,
// retry, approve, comment, done or blocked.
func (m *Manager) Verb(ctx context.Context, verb string, req VerbRequest) (herd.Task, error) {
	if len(req.Text) > MaxComment {
		return herd.Task{}, errs.Badf("task %s: the text is %d bytes, over the limit of %d", req.ID, len(req.Text), MaxComment)
	}
	needsText := verb == taskflow.VerbComment || verb == taskflow.VerbBlocked
	if needsText && strings.TrimSpace(req.Text) == "" {
		return herd.Task{}, errs.Badf("task %s: %s needs a text", req.ID, verb)
	}
	var t herd.Task
	err := m.st.View(ctx, func(tx store.Tx) (err error) { t, err = tx.Task(req.ID); return err })
	if err != nil {
		return herd.Task{}, err
	}
	if t.ApprovedBy != "" && verb != taskflow.VerbDone && verb != taskflow.VerbBlocked {
		return t, errs.New(errs.Conflict, fmt.Sprintf("task %s is landing (approved by %s): wait until it landed or came back", t.ID, t.ApprovedBy))
	}
	// A landing a person can clear (their checkout's changes, a failure
	// of git) may be approved again from needs_you.
	relanding := verb == taskflow.VerbApprove && t.State == herd.TaskNeedsYou && (t.Reason == "dirty_base" || t.Reason == "land_failed")
	if err := taskflow.Allowed(verb, t.State); err != nil && !relanding {
		return t, fmt.Errorf("task %s: %w", t.ID, err)
	}
	from := []herd.TaskState{t.State}
	data := map[string]any{"by": req.By}
	switch verb {
	case taskflow.VerbCancel:
		err = m.write(ctx, t.ID, from, func(t *herd.Task, tx store.Tx) ([]*herd.Event, error) {
			t.State, t.Reason, t.ApprovedBy = herd.TaskCancelled, "cancelled", ""
			return []*herd.Event{m.event(*t, herd.EventTaskCancelled, "", fmt.Sprintf("task %s cancelled; its branch %s is kept", t.ID, t.Branch), data)}, nil
		})
		if err == nil {
			m.freeReplica(t, verb)
		}
	case taskflow.VerbRetry:
		err = m.write(ctx, t.ID, from, func(t *herd.Task, tx store.Tx) ([]*herd.Event, error) {
			t.State, t.Reason, t.Session, t.Incarnation, t.Conversation = herd.TaskQueued, "", "", "", ""
			t.Attempts, t.ApprovedBy, t.DeliveredAfter, t.Reviewed = 0, "", 0, ""
			t.Nudges, t.Turn = 0, ""
			return []*herd.Event{m.event(*t, herd.EventTaskQueued, "retry", fmt.Sprintf("task %s queued again; it goes on from its branch %s", t.ID, t.Branch), data)}, nil
		})
		if err == nil && t.State.Holds() {
			m.freeReplica(t, verb)
		}
	case taskflow.VerbApprove:
		err = m.write(ctx, t.ID, from, func(t *herd.Task, tx store.Tx) ([]*herd.Event, error) {
			t.ApprovedBy, t.State, t.Reason = req.By, herd.TaskReview, ""
			if t.ApprovedBy == "" {
				t.ApprovedBy = "unknown"
			}
			return []*herd.Event{m.event(*t, herd.EventReaction, herd.ReactionApproved, fmt.Sprintf("task %s approved: landing it on %s", t.ID, t.Base),
				map[string]any{"kind": herd.ReactionApproved, "attempt": 1, "action": "land", "by": req.By})}, nil
		})
	case taskflow.VerbComment:
		// Comments on a task in review or before a person request
		// changes (the changes_requested reaction); while the agent
		// works they are only typed in.
		kind := ""
		if from[0] == herd.TaskReview || from[0] == herd.TaskNeedsYou {
			kind = herd.ReactionChangesRequested
		}
		if from[0] == herd.TaskReview && m.o.Reactions().ChangesRequested.Action == config.ReactionNotify {
			err = m.changesForAPerson(ctx, t, req)
			break
		}
		text := fmt.Sprintf("Review of task %s:\n\n%s\n\nAddress these comments and commit on this branch.", t.ID, req.Text)
		err = m.send(ctx, t, from, kind, text, func(t herd.Task) []*herd.Event {
			evs := []*herd.Event{m.event(t, herd.EventTaskFeedback, "", fmt.Sprintf("task %s: comments sent to %s", t.ID, t.Session), map[string]any{"by": req.By, "bytes": len(req.Text)})}
			if from[0] == herd.TaskReview {
				evs = append(evs, m.event(t, herd.EventReaction, herd.ReactionChangesRequested, fmt.Sprintf("task %s: changes requested", t.ID),
					map[string]any{"kind": herd.ReactionChangesRequested, "attempt": 1, "action": "send", "by": req.By}))
			}
			return evs
		}, func(t *herd.Task) {
			if t.State == herd.TaskReview || t.State == herd.TaskNeedsYou {
				t.State = herd.TaskChanges
			}
		})
	case taskflow.VerbDone:
		var n int
		if n, err = m.o.Worktrees.Commits(ctx, t.Repo, t.Base, t.Branch); err != nil {
			return t, err
		}
		if n <= 0 {
			err = m.needsYou(ctx, t, taskflow.ReasonNoCommit, fmt.Sprintf("task %s: the agent says it is done, with no commit on %s: %s", t.ID, t.Branch, clip(req.Text, 500)))
			break
		}
		err = m.write(ctx, t.ID, from, func(t *herd.Task, tx store.Tx) ([]*herd.Event, error) {
			t.State, t.Reason, t.Commits = herd.TaskChecking, "", n
			return nil, nil
		})
	case taskflow.VerbBlocked:
		err = m.needsYou(ctx, t, "blocked", fmt.Sprintf("task %s: the agent asks: %s", t.ID, clip(req.Text, 2000)))
	}
	if err != nil {
		if errors.Is(err, errStale) {
			return t, errs.New(errs.Conflict, fmt.Sprintf("task %s changed meanwhile; look again", t.ID))
		}
		return t, err
	}
	err = m.st.View(ctx, func(tx store.Tx) (err error) { t, err = tx.Task(req.ID); return err })
	return t, err
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}

// freeReplica relaunches the replica a task let go of (cancelled,
// queued again) in its role's workdir, beside the caller, when it runs
// in the task's worktree: its agent must not go on with the task, nor
// another take the worktree beside it. No task is given to it meanwhile.
func (m *Manager) freeReplica(t herd.Task, verb string) {
	if t.Session == "" || t.Incarnation == "" {
		return // never relaunched into the task's worktree
	}
	replica := "session " + t.Session
	if !m.claim(replica) {
		return
	}
	m.group.Go("task free "+t.Session, func() {
		defer m.release(replica)
		ctx, cancel := context.WithTimeout(m.runCtx(), 2*time.Minute)
		defer cancel()
		if _, err := m.o.Slots.Restart(ctx, slots.RestartRequest{Name: t.Session, Reason: "task", Data: map[string]any{"task": t.ID, verb: true}}); err != nil && ctx.Err() == nil {
			m.log.Warn("tasks: relaunch a replica let go of its task", "task", t.ID, "session", t.Session, "err", err)
		}
	})
}

// changesForAPerson is the changes_requested reaction that notifies: a
// review's comments are not typed into the agent; the task goes before a
// person with them.
func (m *Manager) changesForAPerson(ctx context.Context, t herd.Task, req VerbRequest) error {
	return m.write(ctx, t.ID, []herd.TaskState{herd.TaskReview}, func(t *herd.Task, tx store.Tx) ([]*herd.Event, error) {
		t.State, t.Reason, t.ApprovedBy = herd.TaskNeedsYou, herd.ReactionChangesRequested, ""
		msg := fmt.Sprintf("task %s: changes requested by %s: %s", t.ID, by(req.By), clip(req.Text, 2000))
		return []*herd.Event{
			m.event(*t, herd.EventTaskFeedback, "kept", fmt.Sprintf("task %s: comments kept for a person ([reactions.changes_requested] notifies)", t.ID),
				map[string]any{"by": req.By, "bytes": len(req.Text)}),
			m.event(*t, herd.EventTaskNeedsYou, herd.ReactionChangesRequested, msg, nil),
			m.event(*t, herd.EventReaction, herd.ReactionChangesRequested, msg,
				map[string]any{"kind": herd.ReactionChangesRequested, "attempt": 1, "action": "notify", "by": req.By}),
		}, nil
	})
}

// by names who did something, "someone" when unknown.
func by(who string) string {
	if who == "" {
		return "someone"
	}
	return who
}
