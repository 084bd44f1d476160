package tasks

// The one writer's path: every change of a task goes through write, in
// one transaction with its events, and the notifications it makes.

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"time"

	"herd"
	"herd/internal/store"
	"herd/internal/taskflow"
)

// needsYou puts the task before a person, with why.
func (m *Manager) needsYou(ctx context.Context, t herd.Task, reason, msg string) error {
	return m.write(ctx, t.ID, []herd.TaskState{t.State}, func(t *herd.Task, tx store.Tx) ([]*herd.Event, error) {
		kind := t.Reacted // the reaction that went unanswered, if any
		t.State, t.Reason, t.ApprovedBy = herd.TaskNeedsYou, reason, ""
		evs := []*herd.Event{m.event(*t, herd.EventTaskNeedsYou, reason, msg, nil)}
		switch {
		case reason == taskflow.ReasonAgentStuck:
			evs = append(evs, m.event(*t, herd.EventReaction, herd.ReactionAgentStuck, msg,
				map[string]any{"kind": herd.ReactionAgentStuck, "attempt": t.Nudges + 1, "action": "notify"}))
		case reason == taskflow.ReasonEscalated && kind != "":
			evs = append(evs, m.event(*t, herd.EventReaction, kind, msg,
				map[string]any{"kind": kind, "attempt": attempt(*t, kind) + 1, "action": "notify", "escalated": true}))
		}
		return evs, nil
	})
}

// fail ends the task with its reason; its worktree and branch are kept.
func (m *Manager) fail(ctx context.Context, t herd.Task, reason, msg string) error {
	return m.write(ctx, t.ID, []herd.TaskState{t.State}, func(t *herd.Task, tx store.Tx) ([]*herd.Event, error) {
		t.State, t.Reason, t.ApprovedBy = herd.TaskFailed, reason, ""
		return []*herd.Event{m.event(*t, herd.EventTaskFailed, reason, msg, nil)}, nil
	})
}

// attempt is how many times the reaction of kind went to t's agent.
func attempt(t herd.Task, kind string) int {
	switch kind {
	case herd.ReactionCheckFailed:
		return t.Attempts
	case herd.ReactionAgentStuck:
		return t.Nudges
	}
	return 1
}

func needsYouMessage(reason string, t herd.Task, r *taskflow.Replica) string {
	switch reason {
	case taskflow.ReasonEscalated:
		since := "a while"
		if t.ReactedAt != nil {
			since = time.Since(*t.ReactedAt).Round(time.Second).String()
		}
		return fmt.Sprintf("task %s: what herd typed into %s (%s) has gone unanswered for %s: the agent works on without ending its turn", t.ID, t.Session, t.Reacted, since)
	case taskflow.ReasonNoCommit:
		return fmt.Sprintf("task %s: the agent in %s stopped without a commit on %s", t.ID, t.Session, t.Branch)
	case taskflow.ReasonWaiting:
		return fmt.Sprintf("task %s: the agent in %s waits for an answer", t.ID, t.Session)
	case taskflow.ReasonReplicaGone:
		return fmt.Sprintf("task %s: its replica %s no longer exists", t.ID, t.Session)
	}
	return fmt.Sprintf("task %s: the agent in %s is stuck: %s, %s", t.ID, t.Session, r.State, r.Activity)
}

func failMessage(reason string, t herd.Task) string {
	if reason == taskflow.ReasonBranchGone {
		return fmt.Sprintf("task %s: its branch %s or its base %s no longer exists", t.ID, t.Branch, t.Base)
	}
	return fmt.Sprintf("task %s failed: %s", t.ID, reason)
}

// errStale: the task changed since it was read (another step, a
// person's verb): the step is dropped, the next round decides again.
var errStale = errors.New("the task changed meanwhile")

// write applies change to the stored task in one transaction, with the
// events it returns, when the task is still in one of the states from
// (nil: any). Every write of a task goes through here.
func (m *Manager) write(ctx context.Context, id string, from []herd.TaskState, change func(t *herd.Task, tx store.Tx) ([]*herd.Event, error)) error {
	var (
		before herd.TaskState
		after  herd.Task
		told   *herd.Event
	)
	err := m.st.Update(ctx, func(tx store.Tx) error {
		t, err := tx.Task(id)
		if err != nil {
			return err
		}
		if from != nil && !slices.Contains(from, t.State) {
			return errStale
		}
		before, told = t.State, nil
		evs, err := change(&t, tx)
		if err != nil {
			return err
		}
		if t.State != herd.TaskWorking && t.State != herd.TaskChanges {
			// A reaction waits for the agent only while it works on it:
			// a turn ended, a person or the end answered it.
			t.Reacted, t.ReactedAt = "", nil
		}
		if t.State == herd.TaskNeedsYou && before != herd.TaskNeedsYou {
			// Before a person, the agent's next turn is looked for from
			// now: the turn that ended before (the one checked, or the
			// one that stopped without a commit) does not count again.
			newest, err := tx.Events(store.EventFilter{Limit: 1})
			if err != nil {
				return err
			}
			if len(newest) == 1 {
				t.DeliveredAfter = newest[0].ID
			}
		}
		t.UpdatedAt = time.Now().UTC()
		if err := tx.PutTask(t); err != nil {
			return err
		}
		for _, ev := range evs {
			if err := tx.AppendEvent(ev); err != nil {
				return err
			}
			if ev.Kind == herd.EventTaskNeedsYou || ev.Kind == herd.EventTaskReview {
				told = ev
			}
		}
		after = t
		return nil
	})
	if err == nil {
		m.Kick()
		if told != nil && before != after.State {
			m.notify(after, told)
		}
	}
	return err
}

// notify tells a person that t needs them, beside the component.
func (m *Manager) notify(t herd.Task, ev *herd.Event) {
	if m.o.Notify == nil {
		return
	}
	reason := ev.Reason
	if ev.Kind == herd.EventTaskReview {
		reason = "review"
	}
	m.group.Go("task notify "+t.ID, func() {
		ctx, cancel := context.WithTimeout(m.runCtx(), notifyTimeout)
		defer cancel()
		m.o.Notify(ctx, t, reason, ev.Message)
	})
}

// runCtx is Run's context (Background before Run: tests drive rounds).
func (m *Manager) runCtx() context.Context {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ctx == nil {
		return context.Background()
	}
	return m.ctx
}

// notifyTimeout bounds the delivery of one notification.
const notifyTimeout = 10 * time.Minute

// event is an event of task t, on its session.
func (m *Manager) event(t herd.Task, kind, reason, msg string, data map[string]any) *herd.Event {
	if data == nil {
		data = map[string]any{}
	}
	data["task"] = t.ID
	data["state"] = string(t.State)
	session := ""
	if t.State.Holds() || t.State.Ended() {
		session = t.Session
	}
	return &herd.Event{Time: time.Now().UTC(), Host: m.host, Session: session, Incarnation: t.Incarnation,
		Kind: kind, Reason: reason, Message: msg, Data: data}
}

// logPath is where check attempt n of task id writes its output.
func (m *Manager) logPath(id string, n int) string {
	return filepath.Join(m.o.Dir, id, fmt.Sprintf("check-%d.log", n))
}
