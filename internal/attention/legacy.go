package attention

import (
	"encoding/json"
	"time"

	"herd/internal/store"
)

// Rows of the former layout, when escalations and notifications kept
// episodes of their own kinds, are read so that an upgraded daemon still
// delivers what was owed and does not tell twice of an episode already
// told.

// legacyEscalation is the delivery part of a former escalation row: one
// round for both channels.
type legacyEscalation struct {
	Delivered   *bool      `json:"delivered"`
	Attempts    int        `json:"attempts"`
	NextAttempt *time.Time `json:"next_attempt"`
	LastError   string     `json:"last_error"`
	CommandDone bool       `json:"command_done"`
	WebhookDone bool       `json:"webhook_done"`
}

// upgrade gives a former escalation row still owed its deliveries: the
// command unless it ran, the webhook unless it answered. Channels no
// longer configured are pruned by the next look. raw is the row ep was
// decoded from.
func upgrade(ep Episode, raw []byte) Episode {
	if ep.Channels != nil || ep.FiredAt == nil || ep.EventID == 0 {
		return ep
	}
	var old legacyEscalation
	if json.Unmarshal(raw, &old) != nil || old.Delivered == nil || *old.Delivered {
		return ep
	}
	hook := &Delivery{Done: old.WebhookDone, Attempts: old.Attempts, LastError: old.LastError}
	if old.NextAttempt != nil {
		hook.Next = *old.NextAttempt
	}
	ep.Channels = map[string]*Delivery{
		ChannelCommand: {Done: old.CommandDone},
		ChannelWebhook: hook,
	}
	return ep
}

// legacyNotifyKey is where the former notifier kept a host's episodes,
// all in one row.
func legacyNotifyKey(host string) string { return "notify/" + host }

// legacyNotify is one session's episode in that row.
type legacyNotify struct {
	Incarnation string               `json:"incarnation"`
	Need        Rule                 `json:"need"`
	Since       time.Time            `json:"since"`
	FiredAt     *time.Time           `json:"fired_at"`
	Message     *Message             `json:"message"`
	Channels    map[string]*Delivery `json:"channels"`
}

// migrateNotify moves the former notify row of this host, raw, into one
// row per episode (unless a row of the same key exists) and deletes it.
// A garbled row is dropped: its episodes start over.
func (t *Tracker) migrateNotify(tx store.Tx, raw string) error {
	var old map[string]*legacyNotify
	if err := json.Unmarshal([]byte(raw), &old); err != nil {
		t.log.Error("attention: unreadable former notify episodes; starting over", "err", err)
		old = nil
	}
	index, _, err := t.readIndex(tx)
	if err != nil {
		return err
	}
	for session, o := range old {
		if o == nil || o.Need == "" {
			continue
		}
		key := Key(TrackNotify, session, o.Need)
		if _, ok, err := tx.KV(key); err != nil || ok {
			if err != nil {
				return err
			}
			continue
		}
		ep := Episode{Open: true, Incarnation: o.Incarnation, Since: o.Since, FiredAt: o.FiredAt, Message: o.Message, Channels: o.Channels}
		enc, err := ep.Encode()
		if err != nil {
			continue
		}
		if err := tx.PutKV(key, enc); err != nil {
			return err
		}
		index = addKey(index, key)
	}
	if err := tx.PutKV(IndexKey(t.host), EncodeIndex(index)); err != nil {
		return err
	}
	return tx.DeleteKV(legacyNotifyKey(t.host))
}
