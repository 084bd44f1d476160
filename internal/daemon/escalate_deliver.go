package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"herd"
	"herd/internal/escalation"
	"herd/internal/store"
)

// deliver runs one delivery round of the escalation stored under key and
// records its outcome. It runs in a worker, never on the rule timer; the
// row is re-read before writing, so a newer escalation that superseded
// this one meanwhile is left alone.
func (d *Daemon) deliver(ctx context.Context, e *escalator, key string) {
	session, rule, ok := escalation.ParseKey(key)
	if !ok {
		return
	}
	var (
		ep      escalation.Episode
		payload []byte
		lookErr error
	)
	err := d.st.View(ctx, func(tx store.Tx) error {
		raw, ok, err := tx.KV(key)
		if err != nil || !ok {
			return err
		}
		ep = d.decodeEpisode(key, raw, true)
		if !escalation.Due(ep, time.Now()) {
			ep = escalation.Episode{}
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
		d.log.Error("escalation: read for delivery", "key", key, "err", err)
		return
	}
	if !ep.Owed() {
		return
	}
	ch := e.notifier.Channels()
	var r escalation.Round
	if lookErr != nil {
		// The event cannot be rendered; nothing can be sent, so every
		// pending channel fails this round and the row records why.
		r = failedRound(ch, ep, lookErr)
	} else {
		r = e.notifier.Deliver(ctx, ep, payload)
	}
	if ctx.Err() != nil {
		return // shutting down: the round did not count; retried at next start
	}

	var next escalation.Episode
	err = d.st.Update(ctx, func(tx store.Tx) error {
		raw, ok, err := tx.KV(key)
		if err != nil || !ok {
			return err
		}
		cur := d.decodeEpisode(key, raw, true)
		if cur.EventID != ep.EventID || !cur.Owed() {
			next = cur
			return nil // superseded or already delivered
		}
		next = escalation.Apply(cur, ch, r, time.Now().UTC(), e.backoffMin, e.backoffMax)
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
		index, err := d.escalationIndex(tx)
		if err != nil {
			return err
		}
		return tx.PutKV(escalation.IndexKey(d.host), escalation.EncodeIndex(removeKey(index, key)))
	})
	if err != nil {
		d.log.Error("escalation: record delivery", "key", key, "err", err)
		return
	}
	d.logRound(session, rule, ep.EventID, r, next)
}

// logRound logs one delivery round's outcome.
func (d *Daemon) logRound(session string, rule escalation.Rule, event int64, r escalation.Round, next escalation.Episode) {
	attrs := []any{"session", session, "rule", rule, "event", event}
	if r.CommandRan {
		if r.CommandErr != nil {
			d.log.Warn("escalation command failed", append(attrs, "exit", r.CommandExit, "err", r.CommandErr)...)
		} else {
			d.log.Info("escalation command ran", append(attrs, "exit", r.CommandExit)...)
		}
	}
	if r.WebhookTried {
		if r.WebhookErr != nil {
			var retry time.Time
			if next.NextAttempt != nil {
				retry = *next.NextAttempt
			}
			d.log.Warn("escalation webhook failed", append(attrs, "attempts", next.Attempts, "retry_at", retry, "err", r.WebhookErr)...)
		} else {
			d.log.Info("escalation webhook delivered", append(attrs, "attempts", next.Attempts)...)
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
func failedRound(ch escalation.Channels, ep escalation.Episode, err error) escalation.Round {
	cmd, hook := ch.Pending(ep)
	return escalation.Round{
		CommandRan: cmd, CommandExit: -1, CommandErr: err,
		WebhookTried: hook, WebhookErr: err,
	}
}
