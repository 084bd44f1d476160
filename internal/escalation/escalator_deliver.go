package escalation

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"herd"
	"herd/internal/store"
)

// deliver runs one delivery round of the escalation stored under key and
// records its outcome. It runs in a worker, never on the rule timer; the
// row is re-read before writing, so a newer escalation that superseded
// this one meanwhile is left alone.
func (e *Escalator) deliver(ctx context.Context, key string) {
	session, rule, ok := ParseKey(key)
	if !ok {
		return
	}
	var (
		ep      Episode
		payload []byte
		lookErr error
	)
	err := e.st.View(ctx, func(tx store.Tx) error {
		raw, ok, err := tx.KV(key)
		if err != nil || !ok {
			return err
		}
		ep = e.decodeEpisode(key, raw, true)
		if !Due(ep, time.Now()) {
			ep = Episode{}
			return nil
		}
		ev, err := escalatedEvent(tx, session, ep.EventID)
		if err != nil {
			lookErr = err
			return nil
		}
		payload, lookErr = json.Marshal(ev)
		return nil
	})
	if err != nil {
		e.log.Error("escalation: read for delivery", "key", key, "err", err)
		return
	}
	if !ep.Owed() {
		return
	}
	ch := e.notifier().Channels()
	var r Round
	if lookErr != nil {
		// The event cannot be rendered; nothing can be sent, so every
		// pending channel fails this round and the row records why.
		r = failedRound(ch, ep, lookErr)
	} else {
		r = e.notifier().Deliver(ctx, ep, payload)
	}
	if ctx.Err() != nil {
		return // shutting down: the round did not count; retried at next start
	}

	var next Episode
	e.forgetIndex()
	err = e.st.Update(ctx, func(tx store.Tx) error {
		raw, ok, err := tx.KV(key)
		if err != nil || !ok {
			return err
		}
		cur := e.decodeEpisode(key, raw, true)
		if cur.EventID != ep.EventID || !cur.Owed() {
			next = cur
			return nil // superseded or already delivered
		}
		next = Apply(cur, ch, r, time.Now().UTC(), e.BackoffMin, e.BackoffMax)
		if next.Keep() {
			enc, err := next.Encode()
			if err != nil {
				return err
			}
			return tx.PutKV(key, enc)
		}
		if err := tx.DeleteKV(key); err != nil {
			return err
		}
		index, err := e.escalationIndex(tx)
		if err != nil {
			return err
		}
		return tx.PutKV(IndexKey(e.host), EncodeIndex(removeKey(index, key)))
	})
	if err != nil {
		e.log.Error("escalation: record delivery", "key", key, "err", err)
		return
	}
	e.logRound(session, rule, ep.EventID, r, next)
}

// logRound logs one delivery round's outcome.
func (e *Escalator) logRound(session string, rule Rule, event int64, r Round, next Episode) {
	attrs := []any{"session", session, "rule", rule, "event", event}
	if r.CommandRan {
		if r.CommandErr != nil {
			e.log.Warn("escalation command failed", append(attrs, "exit", r.CommandExit, "err", r.CommandErr)...)
		} else {
			e.log.Info("escalation command ran", append(attrs, "exit", r.CommandExit)...)
		}
	}
	if r.WebhookTried {
		if r.WebhookErr != nil {
			var retry time.Time
			if next.NextAttempt != nil {
				retry = *next.NextAttempt
			}
			e.log.Warn("escalation webhook failed", append(attrs, "attempts", next.Attempts, "retry_at", retry, "err", r.WebhookErr)...)
		} else {
			e.log.Info("escalation webhook delivered", append(attrs, "attempts", next.Attempts)...)
		}
	}
}

// escalatedEvent finds the escalated event id of a session.
func escalatedEvent(tx store.Tx, session string, id int64) (herd.Event, error) {
	events, err := tx.Events(store.EventFilter{Session: session, Kind: herd.EventEscalated, AfterID: id - 1})
	if err != nil {
		return herd.Event{}, err
	}
	for _, ev := range events {
		if ev.ID == id {
			return ev, nil
		}
	}
	return herd.Event{}, fmt.Errorf("escalation: event %d of %s: %w", id, session, store.ErrNotFound)
}

// failedRound is a round in which every pending channel failed with err.
func failedRound(ch Channels, ep Episode, err error) Round {
	cmd, hook := ch.Pending(ep)
	return Round{
		CommandRan: cmd, CommandExit: -1, CommandErr: err,
		WebhookTried: hook, WebhookErr: err,
	}
}
