package attention

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"herd"
	"herd/internal/store"
)

// Backoff is the delay after the attempts-th failed attempt: lo, doubling,
// capped at hi. A non-positive lo means BackoffMin.
func Backoff(attempts int, lo, hi time.Duration) time.Duration {
	if lo <= 0 {
		lo = BackoffMin
	}
	if hi < lo {
		hi = lo
	}
	d := lo
	for i := 1; i < attempts; i++ {
		if d > hi/2 {
			return hi
		}
		d *= 2
	}
	return min(d, hi)
}

// deliver makes one attempt of job j and records its outcome. It runs in
// a worker, never on the timer; the row is re-read before writing, so a
// newer firing that superseded this one meanwhile is left alone.
func (t *Tracker) deliver(ctx context.Context, j job) {
	tr, session, rule, ok := ParseKey(j.key)
	if !ok {
		return
	}
	ch := t.settings.Load().channel(tr, j.channel)
	if ch == nil {
		return // no longer configured: the next look drops what it owed
	}
	ep, note, lookErr, err := t.readDue(ctx, j, tr, session)
	if err != nil {
		t.log.Error("attention: read for delivery", "key", j.key, "err", err)
		return
	}
	if ep.FiredAt == nil {
		return
	}
	sent := time.Now()
	sendErr := lookErr // a note that cannot be made fails the attempt, and the row says why
	if lookErr == nil {
		sendCtx, cancel := context.WithTimeout(ctx, t.Timeout)
		if tr == TrackNotify && t.Links != nil {
			note.Links = t.Links.Links(sendCtx, session)
		}
		sendErr = ch.Send(sendCtx, note)
		cancel()
	}
	if ctx.Err() != nil {
		return // shutting down: the attempt did not count; tried again at the next start
	}
	d, written, kept, err := t.recordDelivery(ctx, j, tr, ep, ch, sendErr)
	if err != nil {
		t.log.Error("attention: record delivery", "key", j.key, "channel", j.channel, "err", err)
		return
	}
	if d.Attempts == 0 {
		return // nothing recorded
	}
	t.showDelivery(j, d, written, kept)
	t.metrics.Notification(j.channel, sendErr == nil)
	attrs := []any{"track", tr, "session", session, "rule", rule, "channel", j.channel, "attempts", d.Attempts}
	if tr == TrackEscalation {
		attrs = append(attrs, "event", ep.EventID)
	}
	switch {
	case sendErr == nil:
		t.log.Info("delivered", append(attrs, "took", time.Since(sent).Round(time.Millisecond))...)
	case d.Done:
		t.log.Warn("delivery failed; not tried again", append(attrs, "err", sendErr)...)
	default:
		t.log.Warn("delivery failed; will retry", append(attrs, "retry_at", d.Next, "err", sendErr)...)
	}
}

// readDue reads job j's episode and makes its note when the channel's
// delivery is due; a zero episode (FiredAt nil) when it is not.
func (t *Tracker) readDue(ctx context.Context, j job, tr Track, session string) (ep Episode, note Note, lookErr, err error) {
	err = t.st.View(ctx, func(tx store.Tx) error {
		raw, ok, err := tx.KV(j.key)
		if err != nil || !ok {
			return err
		}
		ep = t.decode(j.key, raw, true)
		if d := ep.Channels[j.channel]; ep.FiredAt == nil || d == nil || d.Done || d.Next.After(time.Now()) {
			ep = Episode{}
			return nil
		}
		note, lookErr = t.note(tx, tr, session, ep, j.channel)
		return nil
	})
	return ep, note, lookErr, err
}

// recordDelivery records the outcome of one attempt of job j on the
// episode ep it was made for (re-read: a newer firing, or a delivery
// already done, is left alone): the channel's delivery, a notified event,
// and the episode kept or forgotten. d.Attempts is zero when nothing was
// recorded; written is the episode as recorded, kept whether it is still
// stored.
func (t *Tracker) recordDelivery(ctx context.Context, j job, tr Track, ep Episode, ch Channel, sendErr error) (d Delivery, written Episode, kept bool, err error) {
	now := time.Now().UTC()
	t.forgetIndex()
	wctx, cancel := context.WithTimeout(ctx, tickTimeout)
	defer cancel()
	err = t.st.Update(wctx, func(tx store.Tx) error {
		raw, ok, err := tx.KV(j.key)
		if err != nil || !ok {
			return err
		}
		cur := t.decode(j.key, raw, true)
		cd := cur.Channels[j.channel]
		if cur.FiredAt == nil || !cur.FiredAt.Equal(*ep.FiredAt) || cd == nil || cd.Done {
			return nil // superseded, or already delivered
		}
		d = Record(*cd, sendErr, once(ch), now, t.BackoffMin, t.BackoffMax)
		cur.Channels[j.channel] = &d
		if sendErr == nil && tr == TrackNotify && cur.Message != nil {
			ev := NotifiedEvent(*cur.Message, j.channel)
			ev.Time = now
			ev.Data["attempts"] = d.Attempts
			ev.Data["latency_ms"] = now.Sub(cur.Message.Since).Milliseconds()
			if err := tx.AppendEvent(&ev); err != nil {
				return err
			}
		}
		written, kept = cur, cur.Keep(keepOwed(tr))
		if kept {
			enc, err := cur.Encode()
			if err != nil {
				return err
			}
			return tx.PutKV(j.key, enc)
		}
		if err := tx.DeleteKV(j.key); err != nil {
			return err
		}
		index, _, err := t.readIndex(tx)
		if err != nil {
			return err
		}
		return tx.PutKV(IndexKey(t.host), EncodeIndex(removeKey(index, j.key)))
	})
	return d, written, kept, err
}

// showDelivery has the readers see a channel's outcome now, not at the
// next look (unless a look since holds a newer firing).
func (t *Tracker) showDelivery(j job, d Delivery, written Episode, kept bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if o, ok := t.open[j.key]; ok && o.FiredAt != nil && o.FiredAt.Equal(*written.FiredAt) {
		if kept {
			o.Channels = maps.Clone(o.Channels)
			o.Channels[j.channel] = &d
			t.open[j.key] = o
		} else {
			delete(t.open, j.key)
		}
	}
}

// note is what channel gets of the firing ep of session on track tr: the
// escalated event as stored (with its id), or the notification.
func (t *Tracker) note(tx store.Tx, tr Track, session string, ep Episode, channel string) (Note, error) {
	if tr == TrackNotify {
		if ep.Message == nil {
			return Note{}, errors.New("attention: a notification without a message")
		}
		return Note{Message: *ep.Message, Event: NotifiedEvent(*ep.Message, channel)}, nil
	}
	events, err := tx.Events(store.EventFilter{Session: session, Kind: herd.EventEscalated, AfterID: ep.EventID - 1})
	if err != nil {
		return Note{}, err
	}
	for _, ev := range events {
		if ev.ID == ep.EventID {
			return Note{Event: ev}, nil
		}
	}
	return Note{}, fmt.Errorf("attention: event %d of %s: %w", ep.EventID, session, store.ErrNotFound)
}

// forgetIndex makes the next look read the index again: a write of it is
// under way.
func (t *Tracker) forgetIndex() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.indexOK = false
	t.indexGen++
}

// decode parses a stored episode; a garbled row is logged and read as no
// episode.
func (t *Tracker) decode(key, raw string, ok bool) Episode {
	if !ok {
		return Episode{}
	}
	ep, err := Decode(raw)
	if err != nil {
		t.log.Error("attention: unreadable episode; starting over", "key", key, "err", err)
		return Episode{}
	}
	return ep
}

// readIndex reads this host's index of stored episode keys, reporting
// whether it was read whole (false when it was garbled: it is logged and
// rebuilt from what the rules see, and stored episodes may be missing
// from it).
func (t *Tracker) readIndex(tx store.Tx) (keys []string, whole bool, err error) {
	raw, _, err := tx.KV(IndexKey(t.host))
	if err != nil {
		return nil, false, err
	}
	keys, err = DecodeIndex(raw)
	if err != nil {
		t.log.Error("attention: unreadable index; rebuilding", "err", err)
		return nil, false, nil
	}
	slices.Sort(keys)
	return slices.Compact(keys), true, nil
}

func addKey(keys []string, key string) []string {
	i, found := slices.BinarySearch(keys, key)
	if found {
		return keys
	}
	return slices.Insert(keys, i, key)
}

func removeKey(keys []string, key string) []string {
	i, found := slices.BinarySearch(keys, key)
	if !found {
		return keys
	}
	return slices.Delete(keys, i, i+1)
}
