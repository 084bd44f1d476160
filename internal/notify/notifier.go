package notify

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"herd"
	"herd/internal/api"
	"herd/internal/config"
	"herd/internal/escalation"
	"herd/internal/loop"
	"herd/internal/store"
)

// Defaults of the notifier's loop and retries.
const (
	// DefaultTick is how often the notifier looks when nobody kicks it.
	DefaultTick = time.Second
	// tickTimeout bounds one look's store access.
	tickTimeout = 5 * time.Second
	// minGap spaces looks: kicks that come faster (a burst of session
	// changes) are served together, at most this late.
	minGap = 50 * time.Millisecond
	// idleEvery is the loop's period while no channel is configured:
	// nothing can be notified until a reload sets one (Reconfigure kicks
	// the loop), so an idle daemon is not woken every tick for nothing.
	idleEvery = time.Minute
)

// Options configure a Notifier.
type Options struct {
	Store store.Store
	Host  string
	// Config is the [notify] table at start; Reconfigure replaces it.
	Config config.Notify
	Log    *slog.Logger
	// Tick is the loop's period (DefaultTick when zero); Kick runs a look
	// at once.
	Tick time.Duration
	// Client makes the HTTP requests; http.DefaultClient when nil.
	Client *http.Client
	// BackoffMin and BackoffMax bound the delay before a failed delivery
	// is tried again (escalation's defaults when zero).
	BackoffMin, BackoffMax time.Duration
}

// Notifier is one daemon's attention machinery: it watches this host's
// sessions, opens an episode when one needs a person, and, once the
// episode has lasted [notify] after, delivers one notification on every
// configured channel, retrying each failed channel with backoff while
// the need lasts. Each delivery records a notified event. Deliveries run
// on goroutines of their own: a slow channel never holds the loop.
type Notifier struct {
	o    Options
	log  *slog.Logger
	kick chan struct{}
	// channels are the configured channels; a reload swaps them.
	channels atomic.Pointer[settings]
	// deliveries are the delivery goroutines under way, waited for by Run.
	deliveries loop.Group
	// writeMu serializes writes of the persisted episodes, so that a
	// newer snapshot is never overwritten by an older one.
	writeMu sync.Mutex

	mu sync.Mutex // guards the fields below
	// eps holds each session's current episode, by session name.
	eps map[string]*Episode
	// loaded: eps was read from the store.
	loaded bool
	// inflight holds "session/channel" of the deliveries under way.
	inflight map[string]bool
}

// settings are the [notify] values in force and their channels.
type settings struct {
	after    time.Duration
	channels []Channel
}

// New returns a notifier of host's sessions; Run starts it.
func New(o Options) *Notifier {
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.Tick <= 0 {
		o.Tick = DefaultTick
	}
	if o.BackoffMin <= 0 {
		o.BackoffMin = escalation.BackoffMin
	}
	if o.BackoffMax <= 0 {
		o.BackoffMax = escalation.BackoffMax
	}
	n := &Notifier{o: o, log: o.Log, kick: make(chan struct{}, 1), eps: map[string]*Episode{}, inflight: map[string]bool{}}
	n.deliveries.Log = o.Log
	n.Reconfigure(o.Config)
	return n
}

// Reconfigure applies a reloaded [notify] from the next look on. A
// notification already sent is not sent again on a new channel; one still
// owed to a channel no longer configured is dropped.
func (n *Notifier) Reconfigure(c config.Notify) {
	n.channels.Store(&settings{after: c.After, channels: Channels(c, n.o.Client)})
	n.Kick()
}

// Kick asks for a look now, without blocking (status calls it after each
// change of a session).
func (n *Notifier) Kick() { loop.Wake(n.kick) }

// Open reports whether session has an open notification: its episode
// fired and the need lasts.
func (n *Notifier) Open(session string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.eps[session].Fired()
}

// Describe returns session's open notification for describe, nil when
// none.
func (n *Notifier) Describe(session string) *api.Notification {
	n.mu.Lock()
	defer n.mu.Unlock()
	ep := n.eps[session]
	if !ep.Fired() || ep.Message == nil {
		return nil
	}
	v := &api.Notification{Need: string(ep.Need), Since: ep.Since, Title: ep.Message.Title, Action: ep.Message.Action,
		Channels: map[string]api.NotificationChannel{}}
	for name, d := range ep.Channels {
		c := api.NotificationChannel{Delivered: d.Done, Attempts: d.Attempts, LastError: d.LastError}
		if !d.Done && !d.Next.IsZero() {
			next := d.Next
			c.NextTry = &next
		}
		v.Channels[name] = c
	}
	return v
}

// kvKey is where a host's episodes are kept.
func kvKey(host string) string { return "notify/" + host }

// Run looks at this host's sessions every tick and at each kick until
// ctx is done (with no channel configured, every idleEvery); deliveries
// under way are waited for.
func (n *Notifier) Run(ctx context.Context) {
	defer n.deliveries.Wait()
	var last time.Time
	loop.Loop{Name: "notify", Log: n.log, Every: max(n.o.Tick, idleEvery), Trigger: n.kick}.Run(ctx, func(ctx context.Context) time.Duration {
		if since := time.Since(last); since < minGap {
			return minGap - since // a burst of kicks: one look for all of them
		}
		last = time.Now()
		tickCtx, cancel := context.WithTimeout(ctx, tickTimeout)
		defer cancel()
		wait, err := n.Tick(tickCtx, time.Now())
		if err != nil && ctx.Err() == nil {
			n.log.Error("notify: look", "err", err)
			wait = n.o.Tick // looked at again as before
		}
		n.start(ctx, time.Now())
		if (wait == 0 || wait > n.o.Tick) && len(n.channels.Load().channels) > 0 {
			wait = n.o.Tick // channels to serve: the usual tick
		}
		return wait
	})
}

// Tick is one look at now: episodes opened, fired and closed. It returns
// how soon the next look is needed (0: at the usual tick).
func (n *Notifier) Tick(ctx context.Context, now time.Time) (time.Duration, error) {
	set := n.channels.Load()
	if len(set.channels) == 0 {
		return 0, n.idle(ctx) // nobody to tell: no episode, no `!`, no reads
	}
	if err := n.load(ctx); err != nil {
		return 0, err
	}
	var sessions []herd.Session
	err := n.o.Store.View(ctx, func(tx store.Tx) (err error) {
		sessions, err = tx.SessionsOnHost(n.o.Host)
		return err
	})
	if err != nil {
		return 0, err
	}
	byName := make(map[string]herd.Session, len(sessions))
	changed := false
	var fire []herd.Session
	n.mu.Lock()
	for _, s := range sessions {
		if s.Host != n.o.Host {
			continue
		}
		byName[s.Name] = s
		need := NeedOf(s)
		cur := n.eps[s.Name]
		next, f := Evaluate(need, s.Incarnation, cur, now, set.after)
		if next != cur {
			changed = true
			if next == nil {
				delete(n.eps, s.Name)
			} else {
				n.eps[s.Name] = next
			}
		}
		if f {
			fire = append(fire, s)
		}
	}
	for name := range n.eps {
		if _, ok := byName[name]; !ok {
			delete(n.eps, name) // the session is gone
			changed = true
		}
	}
	n.mu.Unlock()

	if len(fire) > 0 {
		causes := n.causes(ctx, fire)
		n.mu.Lock()
		for _, s := range fire {
			ep := n.eps[s.Name]
			if ep == nil || ep.Fired() || ep.Incarnation != s.Incarnation {
				continue
			}
			at := now.UTC()
			msg := Compose(s, ep.Need, causes[s.Name], ep.Since)
			ep.FiredAt, ep.Message = &at, &msg
			ep.Channels = map[string]*Delivery{}
			for _, ch := range set.channels {
				ep.Channels[ch.Name()] = &Delivery{Next: at}
			}
			changed = true
			n.log.Info("notify: a session needs attention", "session", s.Name, "need", ep.Need, "title", msg.Title)
		}
		n.mu.Unlock()
	}
	if changed {
		if err := n.persist(ctx, nil); err != nil {
			return 0, err
		}
	}
	return n.nextLook(now, set.after), nil
}

// idle drops every episode when no channel is configured (a reload took
// the last one away). Episodes stored by an earlier daemon stay stored
// until a channel comes back and they are read.
func (n *Notifier) idle(ctx context.Context) error {
	n.mu.Lock()
	had := len(n.eps) > 0
	n.eps = map[string]*Episode{}
	n.mu.Unlock()
	if !had {
		return nil
	}
	return n.persist(ctx, nil)
}

// nextLook is how soon a debounce ends or a retry is due, 0 when neither
// comes before the usual tick.
func (n *Notifier) nextLook(now time.Time, after time.Duration) time.Duration {
	n.mu.Lock()
	defer n.mu.Unlock()
	var soonest time.Duration
	note := func(at time.Time) {
		d := max(at.Sub(now), time.Millisecond)
		if soonest == 0 || d < soonest {
			soonest = d
		}
	}
	for _, ep := range n.eps {
		if !ep.Fired() {
			note(ep.Since.Add(after))
		} else if at, ok := ep.Due(); ok {
			note(at)
		}
	}
	return soonest
}

// causes reads, for each session about to notify, the event that says
// why: its last activity event of the current incarnation (waiting,
// blocked) or its last stalled event. A failed read leaves the cause out.
func (n *Notifier) causes(ctx context.Context, ss []herd.Session) map[string]Cause {
	out := map[string]Cause{}
	err := n.o.Store.View(ctx, func(tx store.Tx) error {
		for _, s := range ss {
			kind := herd.EventActivity
			switch NeedOf(s) {
			case NeedStalled:
				kind = herd.EventStalled
			case NeedFailed:
				continue // the exit is on the session
			}
			evs, err := tx.Events(store.EventFilter{Session: s.Name, Kind: kind, Limit: 1})
			if err != nil {
				return err
			}
			if len(evs) == 1 && evs[0].Incarnation == s.Incarnation {
				out[s.Name] = Cause{Reason: evs[0].Reason, Message: evs[0].Message, Data: evs[0].Data}
			}
		}
		return nil
	})
	if err != nil {
		n.log.Warn("notify: read what sessions need; sending without it", "err", err)
	}
	return out
}

// load reads the persisted episodes once.
func (n *Notifier) load(ctx context.Context) error {
	n.mu.Lock()
	loaded := n.loaded
	n.mu.Unlock()
	if loaded {
		return nil
	}
	var raw string
	var ok bool
	err := n.o.Store.View(ctx, func(tx store.Tx) (err error) {
		raw, ok, err = tx.KV(kvKey(n.o.Host))
		return err
	})
	if err != nil {
		return err
	}
	eps := map[string]*Episode{}
	if ok {
		if err := json.Unmarshal([]byte(raw), &eps); err != nil {
			n.log.Error("notify: unreadable stored episodes; starting over", "err", err)
			eps = map[string]*Episode{}
		}
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.loaded {
		for name, ep := range eps {
			if ep == nil || ep.Need == "" {
				delete(eps, name)
			}
		}
		n.eps, n.loaded = eps, true
	}
	return nil
}

// persist writes the episodes, with ev (a notified event) in the same
// transaction when given.
func (n *Notifier) persist(ctx context.Context, ev *herd.Event) error {
	n.writeMu.Lock()
	defer n.writeMu.Unlock()
	n.mu.Lock()
	raw, err := json.Marshal(n.eps)
	n.mu.Unlock()
	if err != nil {
		return err
	}
	return n.o.Store.Update(ctx, func(tx store.Tx) error {
		if ev != nil {
			e := *ev
			if err := tx.AppendEvent(&e); err != nil {
				return err
			}
		}
		return tx.PutKV(kvKey(n.o.Host), string(raw))
	})
}

// start begins each delivery that is due and not under way.
func (n *Notifier) start(ctx context.Context, now time.Time) {
	set := n.channels.Load()
	type job struct {
		session string
		ch      Channel
		msg     Message
		inc     string
		need    Need
	}
	var jobs []job
	n.mu.Lock()
	for name, ep := range n.eps {
		if !ep.Fired() || ep.Message == nil {
			continue
		}
		for _, ch := range set.channels {
			d := ep.Channels[ch.Name()]
			key := name + "/" + ch.Name()
			if d == nil || d.Done || d.Next.After(now) || n.inflight[key] {
				continue
			}
			n.inflight[key] = true
			jobs = append(jobs, job{name, ch, *ep.Message, ep.Incarnation, ep.Need})
		}
	}
	n.mu.Unlock()
	for _, j := range jobs {
		n.deliveries.Go("notify delivery", func() {
			defer func() {
				n.mu.Lock()
				delete(n.inflight, j.session+"/"+j.ch.Name())
				n.mu.Unlock()
			}()
			n.deliver(ctx, j.session, j.inc, j.need, j.ch, j.msg)
		})
	}
}

// deliver tries one channel once and records the outcome: a notified
// event on success, the next try's time on failure.
func (n *Notifier) deliver(ctx context.Context, session, inc string, need Need, ch Channel, msg Message) {
	sent := time.Now()
	err := ch.Send(ctx, msg)
	if ctx.Err() != nil {
		return // shutting down: tried again at the next start
	}
	now := time.Now().UTC()
	var attempts int
	var retry time.Time
	n.mu.Lock()
	ep := n.eps[session]
	if ep == nil || ep.Incarnation != inc || ep.Need != need || ep.Channels[ch.Name()] == nil {
		n.mu.Unlock()
		return // the need went away meanwhile: nothing to record
	}
	d := ep.Channels[ch.Name()]
	d.Attempts++
	attempts = d.Attempts
	if err == nil {
		d.Done, d.LastError, d.Next = true, "", time.Time{}
	} else {
		d.LastError = clip(err.Error(), 512)
		retry = now.Add(escalation.Backoff(d.Attempts, n.o.BackoffMin, n.o.BackoffMax))
		d.Next = retry
	}
	n.mu.Unlock()

	var ev *herd.Event
	if err == nil {
		e := Event(msg, ch.Name())
		e.Time = now
		e.Data["attempts"] = attempts
		e.Data["latency_ms"] = now.Sub(msg.Since).Milliseconds()
		ev = &e
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), tickTimeout)
	defer cancel()
	if perr := n.persist(wctx, ev); perr != nil {
		n.log.Error("notify: record delivery", "session", session, "channel", ch.Name(), "err", perr)
	}
	if err != nil {
		n.log.Warn("notify: delivery failed; will retry", "session", session, "channel", ch.Name(),
			"attempts", attempts, "retry_at", retry, "err", err)
		n.Kick()
		return
	}
	n.log.Info("notified", "session", session, "channel", ch.Name(), "need", need, "took", time.Since(sent).Round(time.Millisecond))
}
