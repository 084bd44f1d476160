package attention

import (
	"context"
	"fmt"
	"time"

	"herd/internal/store"
)

// RuleBudget: a role's daily budget is spent (notifications only; told
// by internal/budget, once per role and day, not held as an episode).
const RuleBudget Rule = "budget"

// BudgetMessage is the notification of role's daily budget spent on
// host: spent of budget today; the role launches again at until.
func BudgetMessage(role, host string, spent, budget float64, hard bool, until time.Time, now time.Time) Message {
	how := "each of its sessions is stopped at its next idle moment"
	if hard {
		how = "its sessions are stopped now (budget_hard)"
	}
	return Message{
		Role: role, Host: host, Need: RuleBudget, Reason: string(RuleBudget),
		Title: fmt.Sprintf("role %s spent its daily budget", role),
		Body: fmt.Sprintf("Role %s spent $%.2f of its $%.2f budget today: %s, and nothing more is launched until %s, when its sessions resume.",
			role, spent, budget, how, until.Format("2006-01-02 15:04 MST")),
		Action: "herd get sessions -l role=" + role,
		Since:  now.UTC(),
	}
}

// Announce delivers m, which belongs to no session's episode (a role's
// budget), on every [notify] channel configured now: each channel is
// tried until it takes it (with the tracker's backoff; a channel tried
// once is tried once), and each delivery is recorded as a notified event.
// It returns when every channel took it, or ctx is done.
func (t *Tracker) Announce(ctx context.Context, m Message) {
	chans := t.settings.Load().channels[TrackNotify]
	pending := make(map[string]*Delivery, len(chans))
	for _, ch := range chans {
		pending[ch.Name()] = &Delivery{}
	}
	for len(pending) > 0 {
		wake := time.Time{}
		for _, ch := range chans {
			d := pending[ch.Name()]
			if d == nil || time.Now().Before(d.Next) {
				if d != nil && (wake.IsZero() || d.Next.Before(wake)) {
					wake = d.Next
				}
				continue
			}
			sendCtx, cancel := context.WithTimeout(ctx, t.Timeout)
			err := ch.Send(sendCtx, Note{Message: m, Event: NotifiedEvent(m, ch.Name())})
			cancel()
			if ctx.Err() != nil {
				return
			}
			*d = Record(*d, err, once(ch), time.Now().UTC(), t.BackoffMin, t.BackoffMax)
			t.metrics.Notification(ch.Name(), err == nil)
			if err != nil {
				t.log.Warn("attention: announce", "title", m.Title, "channel", ch.Name(), "attempts", d.Attempts, "err", err)
			} else {
				t.recordAnnounced(ctx, m, ch.Name(), d.Attempts)
			}
			if d.Done {
				delete(pending, ch.Name())
				continue
			}
			if wake.IsZero() || d.Next.Before(wake) {
				wake = d.Next
			}
		}
		if len(pending) == 0 || wake.IsZero() {
			return
		}
		timer := time.NewTimer(time.Until(wake))
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-timer.C:
		}
	}
}

// recordAnnounced appends the notified event of one delivery of m.
func (t *Tracker) recordAnnounced(ctx context.Context, m Message, channel string, attempts int) {
	ev := NotifiedEvent(m, channel)
	ev.Data["attempts"] = attempts
	wctx, cancel := context.WithTimeout(ctx, tickTimeout)
	defer cancel()
	if err := t.st.Update(wctx, func(tx store.Tx) error { return tx.AppendEvent(&ev) }); err != nil {
		t.log.Error("attention: record announcement", "channel", channel, "err", err)
	}
}

// RuleTask: a task needs a person (notifications only; told by
// internal/tasks at each transition to needs_you or review).
const RuleTask Rule = "task"

// TaskMessage is the notification that task id of role, on session,
// needs a person: reason is its state's reason (needs_you's, or
// "review"), body what happened.
func TaskMessage(id, title, role, session, host, reason, body string, now time.Time) Message {
	what := "needs you"
	if reason == "review" {
		what = "is ready for review"
	}
	return Message{
		Session: session, Role: role, Host: host, Need: RuleTask, Reason: reason,
		Title:  fmt.Sprintf("task %s %s: %s", id, what, title),
		Body:   body,
		Action: "herd describe task " + id,
		Since:  now.UTC(),
	}
}
