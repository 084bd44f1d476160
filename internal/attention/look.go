package attention

import (
	"context"
	"errors"
	"slices"
	"time"

	"herd"
	"herd/internal/store"
)

// rulesOf returns the rules track tr watches.
func rulesOf(tr Track) []Rule {
	if tr == TrackNotify {
		return NotifyRules
	}
	return EscalationRules
}

// keepOwed reports whether track tr keeps a closed episode while its
// firing is owed: an escalation is delivered even after its condition
// clears; a notification is about a need that lasts, and goes with it.
func keepOwed(tr Track) bool { return tr == TrackEscalation }

// hinted reports whether track tr's conditions carry a start hint that a
// clear sighting bounds (the escalation waiting rule's LastActivityAt).
func hinted(tr Track) bool { return tr == TrackEscalation }

// tracks returns the tracks that can open episodes under set: the
// escalation track always (its escalated event is recorded with or
// without a channel), the notify track only while it has a channel
// (nobody to tell: no episode, no `!`).
func (s *settings) tracks() []Track {
	if len(s.channels[TrackNotify]) == 0 {
		return []Track{TrackEscalation}
	}
	return []Track{TrackEscalation, TrackNotify}
}

// target is one episode to evaluate.
type target struct {
	key     string
	track   Track
	session string
	rule    Rule
}

// named fills an episode's name from its target.
func (tg target) named(ep Episode) Episode {
	ep.Track, ep.Session, ep.Rule = tg.track, tg.session, tg.rule
	return ep
}

// look evaluates every rule of every active track for every local
// session, and every stored episode, at now. A read pass finds what
// changes; only then a write transaction re-evaluates those from fresh
// rows and writes each firing's event together with its episode. Due
// deliveries are handed to the workers.
func (t *Tracker) look(ctx context.Context, now time.Time) error {
	set := t.settings.Load()
	tracks := set.tracks()
	var (
		targets  []target
		sessions = map[string]herd.Session{}
		episodes = map[string]Episode{}
		stored   = map[string]string{}
	)
	var listed []herd.Session
	if t.sessions != nil {
		var err error
		if listed, err = t.sessions(ctx); err != nil {
			return err
		}
		if t.quiet(listed, tracks, now) {
			return nil
		}
	}
	t.mu.Lock()
	gen := t.indexGen
	t.mu.Unlock()
	var legacy string
	var legacyOK bool
	err := t.st.View(ctx, func(tx store.Tx) error {
		targets = targets[:0]
		clear(sessions)
		clear(stored)
		if !t.migrated {
			var err error
			if legacy, legacyOK, err = tx.KV(legacyNotifyKey(t.host)); err != nil {
				return err
			}
		}
		all := listed
		if t.sessions == nil {
			var err error
			if all, err = tx.SessionsOnHost(t.host); err != nil {
				return err
			}
		}
		seen := map[string]bool{}
		add := func(tg target) {
			if !seen[tg.key] {
				seen[tg.key] = true
				targets = append(targets, tg)
			}
		}
		for _, s := range all {
			if s.Host != t.host {
				continue
			}
			sessions[s.Name] = s
			for _, tr := range tracks {
				for _, r := range rulesOf(tr) {
					add(target{Key(tr, s.Name, r), tr, s.Name, r})
				}
			}
		}
		index, whole, err := t.readIndex(tx)
		if err != nil {
			return err
		}
		t.mu.Lock()
		if t.indexGen == gen {
			t.index, t.indexOK = slices.Clone(index), whole
		}
		t.mu.Unlock()
		for _, key := range index {
			if tr, name, r, ok := ParseKey(key); ok {
				add(target{key, tr, name, r})
			}
		}
		// Every stored episode is in the index (both are written in one
		// transaction), so only indexed keys are read: one read per
		// stored episode, not one per session and rule. An unreadable
		// index falls back to reading every key.
		keys := index
		if !whole {
			keys = keys[:0:0]
			for _, tg := range targets {
				keys = append(keys, tg.key)
			}
		}
		for _, key := range keys {
			raw, ok, err := tx.KV(key)
			if err != nil {
				return err
			}
			if ok {
				stored[key] = raw
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if !t.migrated {
		if legacyOK {
			t.forgetIndex()
			if err := t.st.Update(ctx, func(tx store.Tx) error { return t.migrateNotify(tx, legacy) }); err != nil {
				return err
			}
			t.migrated = true
			return t.look(ctx, now) // with the rows moved
		}
		t.migrated = true
	}

	var changed []target
	for _, tg := range targets {
		raw, ok := stored[tg.key]
		ep := t.decode(tg.key, raw, ok)
		s, live := sessions[tg.session]
		c := t.condition(set, tg, s, live)
		if !ok && !c.Active {
			// Nothing stored and nothing that can fire: the common case,
			// decided without evaluating or encoding anything.
			t.noteClear(tg, c, now)
			continue
		}
		fire, next := Evaluate(c, ep, now, set.threshold(tg.track, tg.rule))
		if fire {
			next = Fire(next, set.names(tg.track))
		}
		prune(&next, set, tg.track)
		enc, encErr := next.Encode()
		if encErr != nil {
			t.log.Error("attention: skip episode", "key", tg.key, "err", encErr)
			continue
		}
		keep := next.Keep(keepOwed(tg.track))
		if fire || (keep && enc != raw) || (!keep && ok) {
			changed = append(changed, tg)
		}
		episodes[tg.key] = tg.named(next)
		t.noteClear(tg, c, now)
	}
	if len(changed) > 0 {
		t.forgetIndex()
		err = t.st.Update(ctx, func(tx store.Tx) error {
			return t.write(tx, set, changed, now, episodes)
		})
		if err != nil {
			return err
		}
	}
	t.publish(sessions, episodes, now)
	return nil
}

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
		live := err == nil && s.Host == t.host
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
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

// condition is what target tg sees of session s (live: s is a local
// session record) at this look under set.
func (t *Tracker) condition(set *settings, tg target, s herd.Session, live bool) Condition {
	if !live || !slices.Contains(set.tracks(), tg.track) {
		return Condition{}
	}
	if tg.track == TrackNotify {
		return ObserveNeed(s, tg.rule)
	}
	c := Observe(s, tg.rule)
	t.mu.Lock()
	c.NotBefore = t.clearSeen[clearKey{tg.session, tg.rule}]
	t.mu.Unlock()
	return c
}

// prune drops what a firing still owes a channel its track no longer has.
func prune(ep *Episode, set *settings, tr Track) {
	for name, d := range ep.Channels {
		if !d.Done && set.channel(tr, name) == nil {
			delete(ep.Channels, name)
		}
	}
}

// noteClear remembers when a hinted condition was last seen clear.
func (t *Tracker) noteClear(tg target, c Condition, now time.Time) {
	if c.Active || c.Exact || !hinted(tg.track) {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.clearSeen[clearKey{tg.session, tg.rule}] = now
}

// publish keeps the stored episodes for the readers and hands due
// deliveries to the workers.
func (t *Tracker) publish(sessions map[string]herd.Session, episodes map[string]Episode, now time.Time) {
	open := make(map[string]Episode, len(episodes))
	var due []job
	for key, ep := range episodes {
		if !ep.Keep(keepOwed(ep.Track)) {
			continue
		}
		open[key] = ep
		for name, d := range ep.Channels {
			if !d.Done && !d.Next.After(now) {
				due = append(due, job{key, name})
			}
		}
	}
	t.mu.Lock()
	t.open = open
	for key := range t.clearSeen {
		if sessions[key.session].Name == "" {
			delete(t.clearSeen, key)
		}
	}
	var send []job
	for _, j := range due {
		if !t.inflight[j] && t.jobs != nil {
			t.inflight[j] = true
			send = append(send, j)
		}
	}
	jobs := t.jobs
	t.mu.Unlock()
	for _, j := range send {
		select {
		case jobs <- j:
		default: // pool saturated: a later look tries again
			t.done(j)
		}
	}
}

// quiet is the look of an idle host, decided without the store: no stored
// episode (the index, known empty) and no condition holding on any of
// listed. It keeps the clear sightings as a full look would, and builds
// nothing per session.
func (t *Tracker) quiet(listed []herd.Session, tracks []Track, now time.Time) bool {
	for _, s := range listed {
		if s.Host != t.host {
			continue
		}
		if NeedOf(s) != "" && slices.Contains(tracks, TrackNotify) {
			return false
		}
		for _, r := range EscalationRules {
			if Observe(s, r).Active {
				return false
			}
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.indexOK || len(t.index) > 0 {
		return false
	}
	for _, s := range listed {
		if s.Host != t.host {
			continue
		}
		for _, r := range EscalationRules {
			if c := Observe(s, r); !c.Exact {
				t.clearSeen[clearKey{s.Name, r}] = now
			}
		}
	}
	// What was not seen clear now belongs to a session gone.
	for key, at := range t.clearSeen {
		if !at.Equal(now) {
			delete(t.clearSeen, key)
		}
	}
	clear(t.open) // no episode is stored, so none is open
	return true
}
