package escalation

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"time"

	"herd"
	"herd/internal/config"
	"herd/internal/loop"
	"herd/internal/metrics"
	"herd/internal/store"
)

// Escalation loop defaults.
const (
	// escalationWorkers bounds concurrent deliveries.
	escalationWorkers = 4
	// escalationTickTimeout bounds one evaluation's store access.
	escalationTickTimeout = 5 * time.Second
)

// Escalator is one daemon's escalation machinery: the rule timer and the
// delivery workers. Its exported knobs are set before Run; tests shrink
// them.
type Escalator struct {
	st   store.Store
	host string
	log  *slog.Logger

	// Tick is the rule timer's period: min(1s, probe interval).
	Tick time.Duration
	// thresholds of the rules.
	thresholds Thresholds
	// Notifier delivers escalations; its channels may be empty.
	Notifier *Notifier
	// live holds what a reload changed (Reconfigure).
	live override
	// BackoffMin and BackoffMax bound the retry delay of a failed delivery.
	BackoffMin, BackoffMax time.Duration
	// Workers is the size of the delivery pool.
	Workers int
	// Sessions, when set, lists this host's sessions (the status
	// component's live set) instead of a read of the sessions table every
	// tick.
	Sessions func(ctx context.Context) ([]herd.Session, error)
	// Metrics counts escalations and deliveries; nil counts nothing.
	Metrics *metrics.Metrics
	// jobs carries episode keys due for delivery to the workers.
	jobs chan string

	mu sync.Mutex // guards the fields below
	// fired holds the sessions with an open, fired episode.
	fired map[string]bool
	// inflight holds the episode keys being delivered: one delivery per
	// escalation at a time.
	inflight map[string]bool
	// clearSeen is when the timer last saw each rule's condition of a
	// session clear: a condition seen since cannot have begun earlier.
	// Only conditions whose start is a hint (not Exact) are kept.
	clearSeen map[clearKey]time.Time
	// index is this host's index of stored episode keys as last read
	// (indexOK; a write of it forgets it). The escalator is its only
	// writer, so while it is empty and no condition holds, a tick reads
	// nothing from the store.
	index   []string
	indexOK bool
	// indexGen counts the writes of the index begun (forgetIndex): a read
	// that raced one is not kept.
	indexGen uint64
}

// clearKey names one rule of one session.
type clearKey struct {
	session string
	rule    Rule
}

// NewEscalator returns the escalator of host's sessions; Run starts it.
func NewEscalator(st store.Store, host string, cfg *config.Config, log *slog.Logger) *Escalator {
	tick := min(time.Second, cfg.Probe.Interval)
	if tick <= 0 {
		tick = time.Second
	}
	return &Escalator{
		st: st, host: host, log: log,
		Tick:       tick,
		thresholds: ThresholdsOf(cfg),
		Notifier: &Notifier{
			Command:        cfg.Escalation.Command,
			Webhook:        cfg.Escalation.Webhook,
			CommandTimeout: CommandTimeout,
			WebhookTimeout: WebhookTimeout,
		},
		BackoffMin: BackoffMin,
		BackoffMax: BackoffMax,
		Workers:    escalationWorkers,
		fired:      map[string]bool{},
		inflight:   map[string]bool{},
		clearSeen:  map[clearKey]time.Time{},
	}
}

// event fills the common fields of an event.
func (e *Escalator) event(s herd.Session, inc, kind, reason, msg string, data map[string]any) *herd.Event {
	return &herd.Event{Time: time.Now().UTC(), Host: e.host, Session: s.Name, Incarnation: inc, Kind: kind, Reason: reason, Message: msg, Data: data}
}

// Run evaluates escalation rules on a timer of its own until ctx is done.
// It reads only the store: no probe, tmux call or session lock can delay
// it. Due deliveries go to a small worker pool, so a slow notifier never
// delays the timer either.
func (e *Escalator) Run(ctx context.Context) {
	e.jobs = make(chan string, 64)
	var g loop.Group
	g.Log = e.log
	defer g.Wait()
	for range max(1, e.Workers) {
		g.Go("escalation delivery", func() {
			for {
				select {
				case <-ctx.Done():
					return
				case key := <-e.jobs:
					e.deliver(ctx, key)
					e.done(key)
				}
			}
		})
	}
	loop.Loop{Name: "escalation", Log: e.log, Every: e.Tick}.Run(ctx, func(ctx context.Context) time.Duration {
		tickCtx, cancel := context.WithTimeout(ctx, escalationTickTimeout)
		defer cancel()
		if err := e.escalateOnce(tickCtx, time.Now().UTC()); err != nil && ctx.Err() == nil {
			e.log.Error("escalation: evaluate", "err", err)
		}
		return 0
	})
}

// Escalated reports whether a session has an open escalation.
func (e *Escalator) Escalated(session string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.fired[session]
}

// target is one (session, rule) pair to evaluate.
type target struct {
	key     string
	session string
	rule    Rule
}

// escalateOnce evaluates every rule for every local session, and every
// stored episode, at now. A read pass finds what changes; only then a write
// transaction re-evaluates those from fresh rows and writes each fired
// event together with its episode.
func (e *Escalator) escalateOnce(ctx context.Context, now time.Time) error {
	var (
		targets  []target
		sessions = map[string]herd.Session{}
		episodes = map[string]Episode{}
		stored   = map[string]string{}
	)
	var listed []herd.Session
	if e.Sessions != nil {
		var err error
		if listed, err = e.Sessions(ctx); err != nil {
			return err
		}
		if e.quiet(listed, now) {
			return nil
		}
	}
	e.mu.Lock()
	gen := e.indexGen
	e.mu.Unlock()
	err := e.st.View(ctx, func(tx store.Tx) error {
		targets = targets[:0]
		clear(sessions)
		clear(stored)
		all := listed
		if e.Sessions == nil {
			var err error
			if all, err = tx.SessionsOnHost(e.host); err != nil {
				return err
			}
		}
		seen := map[string]bool{}
		add := func(key, session string, r Rule) {
			if !seen[key] {
				seen[key] = true
				targets = append(targets, target{key, session, r})
			}
		}
		for _, s := range all {
			if s.Host != e.host {
				continue
			}
			sessions[s.Name] = s
			for _, r := range Rules {
				add(Key(s.Name, r), s.Name, r)
			}
		}
		index, whole, err := e.readIndex(tx)
		if err != nil {
			return err
		}
		e.mu.Lock()
		if e.indexGen == gen {
			e.index, e.indexOK = slices.Clone(index), whole
		}
		e.mu.Unlock()
		for _, key := range index {
			if name, r, ok := ParseKey(key); ok {
				add(key, name, r)
			}
		}
		// Every stored episode is in the index (both are written in one
		// transaction), so only indexed keys are read: one read per open
		// episode, not one per session and rule. An unreadable index
		// falls back to reading every key.
		keys := index
		if !whole {
			keys = keys[:0:0]
			for _, t := range targets {
				keys = append(keys, t.key)
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

	var changed []target
	for _, t := range targets {
		raw, ok := stored[t.key]
		ep := e.decodeEpisode(t.key, raw, ok)
		s, live := sessions[t.session]
		c := e.condition(t, s, live)
		if !ok && !c.Active {
			// Nothing stored and nothing that can fire: the common case,
			// decided without evaluating or encoding anything.
			e.noteClear(t.session, t.rule, c, now)
			continue
		}
		fire, next := Evaluate(c, ep, now, e.th().For(t.rule))
		e.settle(&next)
		enc, encErr := next.Encode()
		if encErr != nil {
			e.log.Error("escalation: skip session", "key", t.key, "err", encErr)
			continue
		}
		if fire || (next.Keep() && enc != raw) || (!next.Keep() && ok) {
			changed = append(changed, t)
		}
		episodes[t.key] = next
		e.noteClear(t.session, t.rule, c, now)
	}
	if len(changed) > 0 {
		e.forgetIndex()
		err = e.st.Update(ctx, func(tx store.Tx) error {
			return e.escalateTx(tx, changed, now, episodes)
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
func (e *Escalator) escalateTx(tx store.Tx, changed []target, now time.Time, episodes map[string]Episode) error {
	index, err := e.escalationIndex(tx)
	if err != nil {
		return err
	}
	before := slices.Clone(index)
	var fired []*herd.Event
	for _, t := range changed {
		s, err := tx.Session(t.session)
		live := err == nil && s.Host == e.host
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		raw, ok, err := tx.KV(t.key)
		if err != nil {
			return err
		}
		ep := e.decodeEpisode(t.key, raw, ok)
		c := e.condition(t, s, live)
		th := e.th().For(t.rule)
		fire, next := Evaluate(c, ep, now, th)
		if _, err := next.Encode(); err != nil {
			continue // unstorable (logged by the read pass); never fire what cannot be recorded
		}
		if fire {
			msg, data := Describe(t.rule, next, th, now)
			if ep.Owed() {
				data["supersedes_event"] = ep.EventID
			}
			if !live {
				s = herd.Session{Name: t.session}
			}
			ev := e.event(s, s.Incarnation, herd.EventEscalated, string(t.rule), msg, data)
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
		if err := tx.PutKV(IndexKey(e.host), EncodeIndex(index)); err != nil {
			return err
		}
	}
	for _, ev := range fired {
		e.Metrics.Escalation(ev.Reason)
		e.log.Warn("escalated", "session", ev.Session, "rule", ev.Reason, "event", ev.ID, "msg", ev.Message)
	}
	return nil
}

// condition is what rule t sees of session s (live: s is a local session
// record) at this tick.
func (e *Escalator) condition(t target, s herd.Session, live bool) Condition {
	if !live {
		return Condition{}
	}
	c := Observe(s, t.rule)
	e.mu.Lock()
	c.NotBefore = e.clearSeen[clearKey{t.session, t.rule}]
	e.mu.Unlock()
	return c
}

// settle marks an owed escalation delivered when no notifier is
// configured: its event is all there is to deliver.
func (e *Escalator) settle(ep *Episode) {
	if ch := e.notifier().Channels(); ep.Owed() && !ch.Command && !ch.Webhook {
		ep.Delivered = true
	}
}

// noteClear remembers when a condition was last seen clear; one whose
// start is exact needs no lower bound.
func (e *Escalator) noteClear(session string, r Rule, c Condition, now time.Time) {
	if c.Active || c.Exact {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.clearSeen[clearKey{session, r}] = now
}

// publish updates the fired set and hands due deliveries to the workers.
func (e *Escalator) publish(sessions map[string]herd.Session, episodes map[string]Episode, now time.Time) {
	fired := map[string]bool{}
	var due []string
	for key, ep := range episodes {
		name, _, ok := ParseKey(key)
		if !ok {
			continue
		}
		if ep.Fired() {
			fired[name] = true
		}
		if Due(ep, now) {
			due = append(due, key)
		}
	}
	e.mu.Lock()
	e.fired = fired
	for key := range e.clearSeen {
		if sessions[key.session].Name == "" {
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
func (e *Escalator) done(key string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.inflight, key)
}
