package attention

import (
	"context"
	"slices"
	"time"

	"herd"
	"herd/internal/store"
)

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
	var listed []herd.Session
	if t.live != nil {
		all, gen, changed, err := t.live.SessionsSince(ctx, t.viewGen)
		if err != nil {
			return err
		}
		if changed {
			t.view, t.viewGen = all, gen
		} else if t.quietUnder == set && t.stillQuiet(now) {
			return nil
		}
		listed = t.view
		t.quietUnder = nil
		if t.quiet(listed, tracks, now) {
			t.quietUnder = set
			return nil
		}
	}
	t.settle()
	snap, err := t.read(ctx, listed, tracks)
	if err != nil {
		return err
	}
	if !t.migrated {
		if snap.legacyOK {
			t.forgetIndex()
			if err := t.st.Update(ctx, func(tx store.Tx) error { return t.migrateNotify(tx, snap.legacy) }); err != nil {
				return err
			}
			t.migrated = true
			return t.look(ctx, now) // with the rows moved
		}
		t.migrated = true
	}
	changed, episodes := t.evaluate(set, snap, now)
	if len(changed) > 0 {
		t.forgetIndex()
		err = t.st.Update(ctx, func(tx store.Tx) error {
			return t.write(tx, set, changed, now, episodes)
		})
		if err != nil {
			return err
		}
	}
	t.publish(snap.sessions, episodes, now)
	return nil
}

// snapshot is what a look read.
type snapshot struct {
	// sessions are this host's sessions, by name.
	sessions map[string]herd.Session
	// targets are the episodes to evaluate: every rule of every local
	// session, and every stored episode.
	targets []target
	// stored holds the stored rows of targets, by key.
	stored map[string]string
	// legacy is the former notify row, read until it was looked for.
	legacy   string
	legacyOK bool
}

// read takes a snapshot in one read transaction: the sessions (listed,
// or read when there is no live set), the index and the stored rows.
func (t *Tracker) read(ctx context.Context, listed []herd.Session, tracks []Track) (snapshot, error) {
	t.mu.Lock()
	gen := t.indexGen
	t.mu.Unlock()
	var snap snapshot
	err := t.st.View(ctx, func(tx store.Tx) error {
		snap = snapshot{sessions: map[string]herd.Session{}, stored: map[string]string{}}
		if !t.migrated {
			var err error
			if snap.legacy, snap.legacyOK, err = tx.KV(legacyNotifyKey(t.host)); err != nil {
				return err
			}
		}
		all := listed
		if t.live == nil {
			var err error
			if all, err = tx.SessionsOnHost(t.host); err != nil {
				return err
			}
		}
		seen := map[string]bool{}
		add := func(tg target) {
			if !seen[tg.key] {
				seen[tg.key] = true
				snap.targets = append(snap.targets, tg)
			}
		}
		for _, s := range all {
			if s.Host != t.host {
				continue
			}
			snap.sessions[s.Name] = s
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
			for _, tg := range snap.targets {
				keys = append(keys, tg.key)
			}
		}
		for _, key := range keys {
			raw, ok, err := tx.KV(key)
			if err != nil {
				return err
			}
			if ok {
				snap.stored[key] = raw
			}
		}
		return nil
	})
	return snap, err
}

// evaluate decides every target of snap at now: which change (to be
// written), and every episode as it would be after this look.
func (t *Tracker) evaluate(set *settings, snap snapshot, now time.Time) (changed []target, episodes map[string]Episode) {
	episodes = map[string]Episode{}
	for _, tg := range snap.targets {
		raw, ok := snap.stored[tg.key]
		s, live := snap.sessions[tg.session]
		c := t.condition(set, tg, s, live)
		if !ok && !c.Active {
			// Nothing stored and nothing that can fire: the common case,
			// decided without evaluating or encoding anything.
			t.noteClear(tg, c, now)
			continue
		}
		fire, next := Evaluate(c, t.decode(tg.key, raw, ok), now, set.threshold(tg.track, tg.rule))
		if fire {
			next = Fire(next, set.names(tg.track))
		}
		prune(&next, set, tg.track)
		enc, err := next.Encode()
		if err != nil {
			t.log.Error("attention: skip episode", "key", tg.key, "err", err)
			continue
		}
		keep := next.Keep(keepOwed(tg.track))
		if fire || (keep && enc != raw) || (!keep && ok) {
			changed = append(changed, tg)
		}
		episodes[tg.key] = tg.named(next)
		t.noteClear(tg, c, now)
	}
	return changed, episodes
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
	t.open, t.marked = open, marks(open)
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

// stillQuiet is the tick of an idle host whose sessions have not changed
// since a look found them quiet: unless a stored episode appeared
// meanwhile, every clear sighting that look noted holds at now too, and
// nothing else is done.
func (t *Tracker) stillQuiet(now time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.indexOK || len(t.index) > 0 {
		return false
	}
	t.quietAt = now
	return true
}

// settle writes the clear sightings of the quiet ticks (quietAt) into
// clearSeen, before a look notes its own.
func (t *Tracker) settle() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.settleLocked()
}

// settleLocked is settle with mu held.
func (t *Tracker) settleLocked() {
	if t.quietAt.IsZero() {
		return
	}
	for key := range t.clearSeen {
		t.clearSeen[key] = t.quietAt
	}
	t.quietAt = time.Time{}
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
	t.settleLocked()
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
	clear(t.marked)
	return true
}

// marks returns, by track, the sessions with an open, fired episode.
func marks(open map[string]Episode) map[Track]map[string]bool {
	m := map[Track]map[string]bool{}
	for _, ep := range open {
		if !ep.Fired() {
			continue
		}
		if m[ep.Track] == nil {
			m[ep.Track] = map[string]bool{}
		}
		m[ep.Track][ep.Session] = true
	}
	return m
}
