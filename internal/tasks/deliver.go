package tasks

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"herd"
	"herd/internal/errs"
	"herd/internal/slots"
	"herd/internal/store"
	"herd/internal/taskflow"
	"herd/internal/verbs"
	"herd/internal/worktree"
)

// relaunch gives the task's replica a fresh incarnation in the task's
// worktree (made first: a repository where it cannot be made fails the
// task, not the replica).
func (m *Manager) relaunch(ctx context.Context, role herd.Role, t herd.Task) error {
	wt, err := m.o.Worktrees.Ensure(ctx, worktree.TaskOptions(role, t))
	if err != nil {
		return m.fail(ctx, t, taskflow.ReasonWorktreeError, fmt.Sprintf("task %s: its worktree could not be made: %v", t.ID, err))
	}
	cursor, err := m.lastEventID(ctx)
	if err != nil {
		return err
	}
	inc, err := m.o.Slots.Restart(ctx, slots.RestartRequest{Name: t.Session, Reason: "task", Data: map[string]any{"task": t.ID}})
	if err != nil {
		return fmt.Errorf("relaunch %s in %s: %w", t.Session, wt.Path, err)
	}
	exec := role.Runtime == herd.RuntimeExec
	return m.write(ctx, t.ID, []herd.TaskState{herd.TaskAssigned}, func(t *herd.Task, tx store.Tx) ([]*herd.Event, error) {
		t.Incarnation, t.Worktree = inc, wt.Path
		if !exec {
			return nil, nil // its prompt is typed once its agent is idle
		}
		// An exec agent was given its prompt as its launch's argument.
		t.State, t.Reason, t.DeliveredAfter, t.Turn = herd.TaskWorking, "", cursor, ""
		return []*herd.Event{m.event(*t, herd.EventTaskDelivered, "", fmt.Sprintf("task %s's prompt given to %s as its launch's argument", t.ID, t.Session),
			map[string]any{"bytes": len(t.Prompt)})}, nil
	})
}

// lastEventID is the id of the newest event: the cursor a delivery's
// turn end is looked for after.
func (m *Manager) lastEventID(ctx context.Context) (int64, error) {
	var id int64
	err := m.st.View(ctx, func(tx store.Tx) error {
		evs, err := tx.Events(store.EventFilter{Limit: 1})
		if len(evs) == 1 {
			id = evs[0].ID
		}
		return err
	})
	return id, err
}

// maxDeliveryFailures is how many deliveries may fail in a row before
// the task needs a person.
const maxDeliveryFailures = 3

// deliver types text (the prompt when "") into the task's replica and
// records it: the task is working on it from now on.
func (m *Manager) deliver(ctx context.Context, t herd.Task, w world, text string) error {
	r := w.replica(t.Session)
	if r == nil {
		return nil
	}
	if text == "" {
		text = t.Prompt
	}
	cursor, err := m.lastEventID(ctx)
	if err != nil {
		return err
	}
	if err := m.type_(ctx, t.Session, text); err != nil {
		m.mu.Lock()
		m.failures[t.ID]++
		n := m.failures[t.ID]
		m.mu.Unlock()
		if n >= maxDeliveryFailures {
			return m.needsYou(ctx, t, "delivery_failed", fmt.Sprintf("task %s: its prompt could not be typed into %s (%d tries): %v", t.ID, t.Session, n, err))
		}
		return err
	}
	m.mu.Lock()
	delete(m.failures, t.ID)
	m.mu.Unlock()
	inc, conv := r.Incarnation, r.Conversation
	return m.write(ctx, t.ID, []herd.TaskState{t.State}, func(t *herd.Task, tx store.Tx) ([]*herd.Event, error) {
		again := t.State != herd.TaskAssigned
		t.State, t.Reason, t.Incarnation, t.Conversation, t.DeliveredAfter = herd.TaskWorking, "", inc, conv, cursor
		msg, reason := fmt.Sprintf("task %s's prompt typed into %s", t.ID, t.Session), ""
		if again {
			msg, reason = fmt.Sprintf("task %s's prompt typed again into %s: its conversation did not survive a relaunch", t.ID, t.Session), "again"
		}
		return []*herd.Event{m.event(*t, herd.EventTaskDelivered, reason, msg, map[string]any{"bytes": len(text)})}, nil
	})
}

// type_ types text into session's agent and submits it.
func (m *Manager) type_(ctx context.Context, session, text string) error {
	_, err := m.o.Inject.Inject(ctx, verbs.InjectRequest{Name: session, Text: text, Enter: true,
		Multiline: strings.ContainsAny(text, "\r\n")})
	return err
}

// send types a reaction's text into the task's agent and records it
// (event kind, reason, data): the task is working again, its turn end
// looked for after now. kind is the reaction ("" for text that is none,
// a person's comment while the agent works): its escalate_after counts
// from now.
func (m *Manager) send(ctx context.Context, t herd.Task, from []herd.TaskState, kind, text string, evs func(t herd.Task) []*herd.Event, change func(t *herd.Task)) error {
	cursor, err := m.lastEventID(ctx)
	if err != nil {
		return err
	}
	// Still the task's, on its replica, in the same agent: typed only
	// then (a task cancelled during its check must not reach the agent
	// that took the next task).
	var (
		now     herd.Task
		role    herd.Role
		replica herd.Session
	)
	if err := m.st.View(ctx, func(tx store.Tx) (err error) {
		if now, err = tx.Task(t.ID); err != nil {
			return err
		}
		if replica, err = tx.Session(t.Session); err != nil && !errors.Is(err, store.ErrNotFound) {
			return err // a replica gone: the typing says so
		}
		role, err = tx.Role(t.Role)
		return err
	}); err != nil {
		return err
	}
	if !slices.Contains(from, now.State) || now.Session != t.Session || now.Incarnation != t.Incarnation {
		return errStale
	}
	if role.Runtime == herd.RuntimeExec && replica.State.Live() {
		return errs.New(errs.Conflict, fmt.Sprintf("task %s: its agent in %s runs a turn and reads no input (an exec role); send this once the turn has ended", t.ID, t.Session))
	}
	inc := ""
	if role.Runtime == herd.RuntimeExec {
		// An exec agent reads no input: its next turn is a launch given
		// the text, continuing its conversation where it can.
		prior := now.Turn
		err := m.write(ctx, t.ID, from, func(t *herd.Task, tx store.Tx) ([]*herd.Event, error) { t.Turn = text; return nil, nil })
		if err != nil {
			return err
		}
		if inc, err = m.o.Slots.Restart(ctx, slots.RestartRequest{Name: t.Session, Reason: "task", Continue: true,
			Data: map[string]any{"task": t.ID, "turn": kind}}); err != nil {
			// Not sent: a later launch must not run it.
			if werr := m.write(ctx, t.ID, nil, func(t *herd.Task, tx store.Tx) ([]*herd.Event, error) {
				if t.Turn == text {
					t.Turn = prior
				}
				return nil, nil
			}); werr != nil {
				m.log.Warn("tasks: take back a turn not sent", "task", t.ID, "err", werr)
			}
			return &typeError{session: t.Session, err: err}
		}
	} else if err := m.type_(ctx, t.Session, text); err != nil {
		return &typeError{session: t.Session, err: err}
	}
	return m.write(ctx, t.ID, from, func(t *herd.Task, tx store.Tx) ([]*herd.Event, error) {
		t.DeliveredAfter, t.Reason = cursor, ""
		if inc != "" {
			t.Incarnation = inc
		}
		if change != nil {
			change(t)
		}
		if kind != "" {
			now := time.Now().UTC()
			t.Reacted, t.ReactedAt = kind, &now
		}
		return evs(*t), nil
	})
}

// typeError is a reaction that could not be typed into its agent.
type typeError struct {
	session string
	err     error
}

func (e *typeError) Error() string { return fmt.Sprintf("type into %s: %v", e.session, e.err) }
func (e *typeError) Unwrap() error { return e.err }

// react is send for the component's own reactions (a failed check, a
// conflict): an agent that cannot be typed into puts the task before a
// person (agent_stuck) rather than running the check again and again.
func (m *Manager) react(ctx context.Context, t herd.Task, from []herd.TaskState, kind, text string, evs func(t herd.Task) []*herd.Event, change func(t *herd.Task)) error {
	err := m.send(ctx, t, from, kind, text, evs, change)
	var te *typeError
	if errors.As(err, &te) {
		return m.needsYou(ctx, t, taskflow.ReasonAgentStuck, fmt.Sprintf("task %s: what herd had to tell its agent could not be typed into %s: %v", t.ID, t.Session, te.err))
	}
	return err
}

// nudge is the agent_stuck reaction that sends: a stalled agent holding
// the task is reminded of it; a nudge unanswered for the reaction's
// escalate_after is followed by the next, or a person.
func (m *Manager) nudge(ctx context.Context, t herd.Task) error {
	title := t.Title
	if title == "" {
		title = clip(t.Prompt, 200)
	}
	text := fmt.Sprintf("You are working on task %s (%s) on branch %s, and nothing has come from you for a while. Go on with the task and commit on this branch; if something blocks you, say what.",
		t.ID, title, t.Branch)
	return m.react(ctx, t, []herd.TaskState{t.State}, herd.ReactionAgentStuck, text, func(t herd.Task) []*herd.Event {
		return []*herd.Event{m.event(t, herd.EventReaction, herd.ReactionAgentStuck,
			fmt.Sprintf("task %s: %s is stalled; nudged (%d of %d)", t.ID, t.Session, t.Nudges, m.o.Reactions().AgentStuck.Retries),
			map[string]any{"kind": herd.ReactionAgentStuck, "attempt": t.Nudges, "action": "send"})}
	}, func(t *herd.Task) { t.Nudges++ })
}
