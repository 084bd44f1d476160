package attention

import (
	"errors"
	"slices"
	"time"

	"herd"
	"herd/internal/store"
)

// write re-evaluates the changed targets from fresh rows and writes them;
// each firing appends its escalated event (escalations) or composes its
// message (notifications) in the same transaction as its episode.
// episodes receives the written state.
func (t *Tracker) write(tx store.Tx, set *settings, changed []target, now time.Time, episodes map[string]Episode) error {
	index, _, err := t.readIndex(tx)
	if err != nil {
		return err
	}
	before := slices.Clone(index)
	var fired []*herd.Event
	for _, tg := range changed {
		s, err := tx.Session(tg.session)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		if err == nil && s.Host != t.host {
			// The session lives on another host now, whose daemon owns
			// the row (and delivers what it still owes): this host only
			// forgets it, lest it close that host's episode, which would
			// then open and tell again.
			index = removeKey(index, tg.key)
			delete(episodes, tg.key)
			continue
		}
		live := err == nil
		if !live {
			s = herd.Session{Name: tg.session}
		}
		raw, ok, err := tx.KV(tg.key)
		if err != nil {
			return err
		}
		ep := t.decode(tg.key, raw, ok)
		c := t.condition(set, tg, s, live)
		th := set.threshold(tg.track, tg.rule)
		fire, next := Evaluate(c, ep, now, th)
		if _, err := next.Encode(); err != nil {
			continue // unstorable (logged by the read pass); never fire what cannot be recorded
		}
		if fire {
			next = Fire(next, set.names(tg.track))
			switch tg.track {
			case TrackEscalation:
				msg, data := Escalation(tg.rule, next, th, now)
				if ep.Owed() {
					data["supersedes_event"] = ep.EventID
				}
				ev := &herd.Event{Time: now, Host: t.host, Session: tg.session, Incarnation: s.Incarnation,
					Kind: herd.EventEscalated, Reason: string(tg.rule), Message: msg, Data: data}
				if err := tx.AppendEvent(ev); err != nil {
					return err
				}
				next.EventID = ev.ID
				fired = append(fired, ev)
			case TrackNotify:
				cause, err := causeOf(tx, s, tg.rule)
				if err != nil {
					return err
				}
				m := Compose(s, tg.rule, cause, next.Since)
				next.Message = &m
				t.log.Info("attention: a session needs a person", "session", s.Name, "need", tg.rule, "title", m.Title)
			}
		}
		prune(&next, set, tg.track)
		if next.Keep(keepOwed(tg.track)) {
			enc, err := next.Encode()
			if err != nil {
				return err
			}
			if err := tx.PutKV(tg.key, enc); err != nil {
				return err
			}
			index = addKey(index, tg.key)
		} else {
			if ok {
				if err := tx.DeleteKV(tg.key); err != nil {
					return err
				}
			}
			index = removeKey(index, tg.key)
		}
		episodes[tg.key] = tg.named(next)
	}
	if !slices.Equal(before, index) {
		if err := tx.PutKV(IndexKey(t.host), EncodeIndex(index)); err != nil {
			return err
		}
	}
	for _, ev := range fired {
		t.metrics.Escalation(ev.Reason)
		t.log.Warn("escalated", "session", ev.Session, "rule", ev.Reason, "event", ev.ID, "msg", ev.Message)
	}
	return nil
}

// causeOf reads the event that says why session s needs rule r: its last
// activity event of the current incarnation (waiting, blocked) or its
// last stalled event. A failed session's exit is on the session itself.
func causeOf(tx store.Tx, s herd.Session, r Rule) (Cause, error) {
	kind := herd.EventActivity
	switch r {
	case RuleStalled:
		kind = herd.EventStalled
	case RuleFailed:
		return Cause{}, nil
	}
	evs, err := tx.Events(store.EventFilter{Session: s.Name, Kind: kind, Limit: 1})
	if err != nil {
		return Cause{}, err
	}
	if len(evs) == 1 && evs[0].Incarnation == s.Incarnation {
		return Cause{Reason: evs[0].Reason, Message: evs[0].Message, Data: evs[0].Data}, nil
	}
	return Cause{}, nil
}
