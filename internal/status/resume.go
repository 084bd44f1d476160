package status

import (
	"context"
	"errors"
	"fmt"

	"herd"
	"herd/internal/store"
)

// ResumeFailed records that incarnation inc of session, launched to
// resume the agent's conversation id, was refused by the agent (why is
// the evidence): a `resumed` event with reason resume_failed, and the id
// taken off the incarnation, so the next launch of the slot, which
// continues the conversation of the incarnation before it, starts fresh
// with the role's command instead of resuming a dead id again. It reports
// whether it recorded anything: nothing when inc no longer carries id.
func (m *Manager) ResumeFailed(ctx context.Context, session, inc, id, why string) (bool, error) {
	unlock, err := m.locks.LockCtx(ctx, session)
	if err != nil {
		return false, err
	}
	defer unlock()
	var change Change
	done := false
	err = m.st.Update(ctx, func(tx store.Tx) error {
		done = false
		s, err := tx.Session(session)
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		in, err := tx.Incarnation(inc)
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		if in.Session != session || id == "" || in.AgentSessionID != id {
			return nil
		}
		in.AgentSessionID = ""
		if err := tx.PutIncarnation(in); err != nil {
			return err
		}
		msg := fmt.Sprintf("the agent refused to resume conversation %s (%s); the next launch starts fresh", id, why)
		ev := m.Event(s, inc, herd.EventResumed, herd.ReasonResumeFailed, msg,
			map[string]any{"agent_session_id": id, "evidence": why})
		if err := tx.AppendEvent(ev); err != nil {
			return err
		}
		change = Change{Session: session, Incarnation: inc, What: ChangeIncarnation | ChangeEvent, State: s.State, Activity: s.Activity}
		done = true
		return nil
	})
	if err != nil {
		return false, err
	}
	if done {
		m.publish(change)
	}
	return done, nil
}
