package daemon

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"herd"
	"herd/internal/config"
	"herd/internal/escalation"
	"herd/internal/store"
)

// Escalation loop defaults.
const (
	// escalationWorkers bounds concurrent deliveries.
	escalationWorkers = 4
	// escalationTickTimeout bounds one evaluation's store access.
	escalationTickTimeout = 5 * time.Second
)

// escalator is one daemon's escalation machinery: the rule timer and the
// delivery workers. Its knobs are set before Run; tests shrink them.
type escalator struct {
	// tick is the rule timer's period: min(1s, probe interval).
	tick time.Duration
	// thresholds of the rules.
	thresholds escalation.Thresholds
	// notifier delivers escalations; its channels may be empty.
	notifier *escalation.Notifier
	// backoffMin and backoffMax bound the retry delay of a failed delivery.
	backoffMin, backoffMax time.Duration
	// workers is the size of the delivery pool.
	workers int
	// jobs carries episode keys due for delivery to the workers.
	jobs chan string

	mu sync.Mutex // guards the fields below
	// fired holds the sessions with an open, fired episode.
	fired map[string]bool
	// inflight holds the episode keys being delivered: one delivery per
	// escalation at a time.
	inflight map[string]bool
	// clearSeen is when the timer last saw each episode key's condition
	// clear: a condition seen since cannot have begun earlier.
	clearSeen map[string]time.Time
}

func newEscalator(cfg *config.Config) *escalator {
	tick := min(time.Second, cfg.Probe.Interval)
	if tick <= 0 {
		tick = time.Second
	}
	return &escalator{
		tick:       tick,
		thresholds: escalation.ThresholdsOf(cfg),
		notifier: &escalation.Notifier{
			Command:        cfg.Escalation.Command,
			Webhook:        cfg.Escalation.Webhook,
			CommandTimeout: escalation.CommandTimeout,
			WebhookTimeout: escalation.WebhookTimeout,
		},
		backoffMin: escalation.BackoffMin,
		backoffMax: escalation.BackoffMax,
		workers:    escalationWorkers,
		fired:      map[string]bool{},
		inflight:   map[string]bool{},
		clearSeen:  map[string]time.Time{},
	}
}

// escalator returns d's escalator.
func (d *Daemon) escalator() *escalator { return d.esc }

// escalationLoop evaluates escalation rules on a timer of its own. It reads
// only the store: no probe, tmux call or session lock can delay it. Due
// deliveries go to a small worker pool, so a slow notifier never delays
// the timer either.
func (d *Daemon) escalationLoop(ctx context.Context) {
	e := d.escalator()
	e.jobs = make(chan string, 64)
	var wg sync.WaitGroup
	defer wg.Wait()
	for range max(1, e.workers) {
		wg.Go(func() {
			for {
				select {
				case <-ctx.Done():
					return
				case key := <-e.jobs:
					d.deliver(ctx, e, key)
					e.done(key)
				}
			}
		})
	}
	ticker := time.NewTicker(e.tick)
	defer ticker.Stop()
	for {
		tickCtx, cancel := context.WithTimeout(ctx, escalationTickTimeout)
		if err := d.escalateOnce(tickCtx, e, time.Now().UTC()); err != nil && ctx.Err() == nil {
			d.log.Error("escalation: evaluate", "err", err)
		}
		cancel()
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

// escalated reports whether a session has an open escalation.
func (d *Daemon) escalated(session string) bool {
	e := d.esc
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.fired[session]
}

// target is one (session, rule) pair to evaluate.
type target struct {
	key     string
	session string
	rule    escalation.Rule
}

// escalateOnce evaluates every rule for every local session, and every
// stored episode, at now. A read pass finds what changes; only then a write
// transaction re-evaluates those from fresh rows and writes each fired
// event together with its episode.
func (d *Daemon) escalateOnce(ctx context.Context, e *escalator, now time.Time) error {
	var (
		targets  []target
		sessions = map[string]herd.Session{}
		episodes = map[string]escalation.Episode{}
		stored   = map[string]string{}
	)
	err := d.st.View(ctx, func(tx store.Tx) error {
		all, err := tx.Sessions()
		if err != nil {
			return err
		}
		seen := map[string]bool{}
		add := func(key, session string, r escalation.Rule) {
			if !seen[key] {
				seen[key] = true
				targets = append(targets, target{key, session, r})
			}
		}
		for _, s := range all {
			if s.Host != d.host {
				continue
			}
			sessions[s.Name] = s
			for _, r := range escalation.Rules {
				add(escalation.Key(s.Name, r), s.Name, r)
			}
		}
		index, err := d.escalationIndex(tx)
		if err != nil {
			return err
		}
		for _, key := range index {
			if name, r, ok := escalation.ParseKey(key); ok {
				add(key, name, r)
			}
		}
		for _, t := range targets {
			raw, ok, err := tx.KV(t.key)
			if err != nil {
				return err
			}
			if ok {
				stored[t.key] = raw
			}
		}
		return nil
	})
	if err != nil {
		return err
	}

	var changed []target
	for _, t := range targets {
		raw, ok := stored[t.key]
		ep := d.decodeEpisode(t.key, raw, ok)
		s, live := sessions[t.session]
		c := e.condition(t, s, live)
		fire, next := escalation.Evaluate(c, ep, now, e.thresholds.For(t.rule))
		e.settle(&next)
		enc, encErr := next.Encode()
		if encErr != nil {
			d.log.Error("escalation: skip session", "key", t.key, "err", encErr)
			continue
		}
		if fire || (next.Keep() && enc != raw) || (!next.Keep() && ok) {
			changed = append(changed, t)
		}
		episodes[t.key] = next
		e.noteClear(t.key, c, now)
	}
	if len(changed) > 0 {
		err = d.st.Update(ctx, func(tx store.Tx) error {
			return d.escalateTx(tx, e, changed, now, episodes)
		})
		if err != nil {
			return err
		}
	}
	e.publish(sessions, episodes, now)
	return nil
}

// escalateTx re-evaluates the changed targets from fresh rows and writes
// them; each fire appends its escalated event in the same transaction as
// its episode. episodes receives the written state.
func (d *Daemon) escalateTx(tx store.Tx, e *escalator, changed []target, now time.Time, episodes map[string]escalation.Episode) error {
	index, err := d.escalationIndex(tx)
	if err != nil {
		return err
	}
	before := slices.Clone(index)
	var fired []*herd.Event
	for _, t := range changed {
		s, err := tx.Session(t.session)
		live := err == nil && s.Host == d.host
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		raw, ok, err := tx.KV(t.key)
		if err != nil {
			return err
		}
		ep := d.decodeEpisode(t.key, raw, ok)
		c := e.condition(t, s, live)
		th := e.thresholds.For(t.rule)
		fire, next := escalation.Evaluate(c, ep, now, th)
		if _, err := next.Encode(); err != nil {
			continue // unstorable (logged by the read pass); never fire what cannot be recorded
		}
		if fire {
			msg, data := escalation.Describe(t.rule, next, th, now)
			if ep.Owed() {
				data["supersedes_event"] = ep.EventID
			}
			if !live {
				s = herd.Session{Name: t.session}
			}
			ev := d.event(s, s.Incarnation, herd.EventEscalated, string(t.rule), msg, data)
			ev.Time = now
			if err := tx.AppendEvent(ev); err != nil {
				return err
			}
			next.EventID = ev.ID
			fired = append(fired, ev)
		}
		e.settle(&next)
		if next.Keep() {
			enc, err := next.Encode()
			if err != nil {
				return err
			}
			if err := tx.PutKV(t.key, enc); err != nil {
				return err
			}
			index = addKey(index, t.key)
		} else {
			if ok {
				if err := tx.DeleteKV(t.key); err != nil {
					return err
				}
			}
			index = removeKey(index, t.key)
		}
		episodes[t.key] = next
	}
	if !slices.Equal(before, index) {
		if err := tx.PutKV(escalation.IndexKey(d.host), escalation.EncodeIndex(index)); err != nil {
			return err
		}
	}
	for _, ev := range fired {
		d.log.Warn("escalated", "session", ev.Session, "rule", ev.Reason, "event", ev.ID, "msg", ev.Message)
	}
	return nil
}

// condition is what rule t sees of session s (live: s is a local session
// record) at this tick.
func (e *escalator) condition(t target, s herd.Session, live bool) escalation.Condition {
	if !live {
		return escalation.Condition{}
	}
	c := escalation.Observe(s, t.rule)
	e.mu.Lock()
	c.NotBefore = e.clearSeen[t.key]
	e.mu.Unlock()
	return c
}

// settle marks an owed escalation delivered when no notifier is
// configured: its event is all there is to deliver.
func (e *escalator) settle(ep *escalation.Episode) {
	if ch := e.notifier.Channels(); ep.Owed() && !ch.Command && !ch.Webhook {
		ep.Delivered = true
	}
}

// noteClear remembers when a condition was last seen clear.
func (e *escalator) noteClear(key string, c escalation.Condition, now time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if c.Active {
		return
	}
	e.clearSeen[key] = now
}

// publish updates the fired set and hands due deliveries to the workers.
func (e *escalator) publish(sessions map[string]herd.Session, episodes map[string]escalation.Episode, now time.Time) {
	fired := map[string]bool{}
	var due []string
	for key, ep := range episodes {
		name, _, ok := escalation.ParseKey(key)
		if !ok {
			continue
		}
		if ep.Fired() {
			fired[name] = true
		}
		if escalation.Due(ep, now) {
			due = append(due, key)
		}
	}
	e.mu.Lock()
	e.fired = fired
	for key := range e.clearSeen {
		if name, _, _ := escalation.ParseKey(key); sessions[name].Name == "" {
			delete(e.clearSeen, key)
		}
	}
	var send []string
	for _, key := range due {
		if !e.inflight[key] && e.jobs != nil {
			e.inflight[key] = true
			send = append(send, key)
		}
	}
	e.mu.Unlock()
	for _, key := range send {
		select {
		case e.jobs <- key:
		default: // pool saturated: a later tick tries again
			e.done(key)
		}
	}
}

// done releases an episode key after its delivery round.
func (e *escalator) done(key string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.inflight, key)
}

// decodeEpisode parses a stored episode; a garbled row is logged and read
// as no episode.
func (d *Daemon) decodeEpisode(key, raw string, ok bool) escalation.Episode {
	if !ok {
		return escalation.Episode{}
	}
	ep, err := escalation.Decode(raw)
	if err != nil {
		d.log.Error("escalation: unreadable episode; starting over", "key", key, "err", err)
		return escalation.Episode{}
	}
	return ep
}

// escalationIndex reads this host's index of stored episode keys; a
// garbled index is logged and rebuilt from what the rules see.
func (d *Daemon) escalationIndex(tx store.Tx) ([]string, error) {
	raw, _, err := tx.KV(escalation.IndexKey(d.host))
	if err != nil {
		return nil, err
	}
	keys, err := escalation.DecodeIndex(raw)
	if err != nil {
		d.log.Error("escalation: unreadable index; rebuilding", "err", err)
		return nil, nil
	}
	slices.Sort(keys)
	return slices.Compact(keys), nil
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
