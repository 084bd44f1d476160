// Package attention owns the episodes of this host's sessions that need a
// person — waiting, blocked, stalled, unknown, failed — and tells one:
// escalated events for [escalation], notifications for [notify], on every
// configured channel, retried with backoff until delivered.
//
// The daemon builds one Tracker on the writer of session state (Live:
// each change it publishes asks for a look), runs it and reconfigures it
// on reload; the API reads from it the `!` marker, describe's
// notification, and Open, the needs-you inbox. It reads sessions and
// writes only its own kv rows and the escalated and notified events: it
// never writes a session, never signals or types into an agent, and never
// lets a slow channel hold its timer. While nothing needs a person and no
// session changes, its tick reads and copies nothing.
package attention

import (
	"context"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"herd"
	"herd/internal/api"
	"herd/internal/config"
	"herd/internal/loop"
	"herd/internal/metrics"
	"herd/internal/status"
	"herd/internal/store"
)

// Defaults of the tracker's timer and deliveries.
const (
	// DefaultTimeout bounds one delivery attempt on any channel; a command
	// still running then is killed with its process group.
	DefaultTimeout = 10 * time.Second
	// BackoffMin is the delay before the first retry of a failed delivery;
	// it doubles per failed attempt up to BackoffMax.
	BackoffMin = time.Second
	// BackoffMax caps the retry delay.
	BackoffMax = 5 * time.Minute
	// defaultWorkers bounds concurrent deliveries.
	defaultWorkers = 4
	// tickTimeout bounds one evaluation's (and one record's) store access.
	tickTimeout = 5 * time.Second
	// minGap spaces looks: kicks that come faster (a burst of session
	// changes) are served together, at most this late.
	minGap = 50 * time.Millisecond
)

// Options configure a Tracker.
type Options struct {
	Store store.Store
	// Host is this daemon's host: only its sessions are watched.
	Host string
	// Config gives the thresholds and channels at start; Reconfigure
	// replaces them.
	Config *config.Config
	Log    *slog.Logger
	// Live, when set, is the writer of this host's sessions: the tracker
	// keeps its own view of them, copied only when the live set changed,
	// instead of a read of the sessions table every tick, and every
	// change the writer publishes (blocked, waiting, failed, ended...)
	// asks for a look at once.
	Live Live
	// Metrics counts escalations and deliveries; nil counts nothing.
	Metrics *metrics.Metrics
	// Client makes the HTTP requests; http.DefaultClient when nil.
	Client *http.Client
}

// Live is the writer of this host's sessions (status.Manager), as the
// tracker reads it.
type Live interface {
	// SessionsSince returns this host's sessions when the live set
	// changed since generation gen (0: never read), with the generation
	// of the copy; else changed false, and nothing is copied.
	SessionsSince(ctx context.Context, gen uint64) (sessions []herd.Session, next uint64, changed bool, err error)
	// Subscribe returns every change committed from now on, and its
	// cancel.
	Subscribe() (<-chan status.Change, func())
}

var _ Live = (*status.Manager)(nil)

// Tracker is one daemon's attention component: a timer that evaluates
// every rule of every track for this host's sessions (and every stored
// episode), and a small pool of workers that deliver what is due. Its
// exported knobs are set before Run; tests shrink them.
type Tracker struct {
	st      store.Store
	host    string
	log     *slog.Logger
	live    Live
	metrics *metrics.Metrics
	client  *http.Client

	// Tick is the timer's period: min(1s, probe interval).
	Tick time.Duration
	// BackoffMin and BackoffMax bound the retry delay of a failed delivery.
	BackoffMin, BackoffMax time.Duration
	// Timeout bounds one delivery attempt.
	Timeout time.Duration
	// Links, when set, gives each notification its links into the
	// console (the web console; set before Run).
	Links Linker
	// Workers is the size of the delivery pool.
	Workers int

	// settings are the thresholds and channels in force; a reload swaps
	// them.
	settings atomic.Pointer[settings]
	// migrated: the former notify row was looked for (touched by look
	// only).
	migrated bool
	// view is this host's sessions as of generation viewGen of the live
	// set; quietUnder, when set, is the settings under which the last
	// look found view quiet. While the set keeps its generation and the
	// settings theirs, a tick copies and walks nothing (touched by look
	// only).
	view       []herd.Session
	viewGen    uint64
	quietUnder *settings
	// kick asks for a look now.
	kick chan struct{}

	mu sync.Mutex // guards the fields below
	// jobs carries deliveries due to the workers; nil until Run.
	jobs chan job
	// open holds every stored episode as the last look left it, by key.
	open map[string]Episode
	// marked holds, by track, the sessions with an open, fired episode:
	// the `!` of every listing, without a walk of open per session.
	marked map[Track]map[string]bool
	// inflight holds the deliveries under way: one per channel of an
	// episode at a time.
	inflight map[job]bool
	// clearSeen is when the timer last saw each hinted condition of a
	// session clear: a condition seen since cannot have begun earlier.
	// While quietAt is set, every one of them was seen clear at quietAt
	// too (a quiet tick saw the sessions unchanged since a quiet look):
	// a look settles that into clearSeen before it evaluates.
	clearSeen map[clearKey]time.Time
	quietAt   time.Time
	// index is this host's index of stored episode keys as last read
	// (indexOK; a write of it forgets it). The tracker is its only
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

// job is one delivery: a channel of the episode stored under key.
type job struct {
	key     string
	channel string
}

// New returns the tracker of host's sessions; Run starts it.
func New(o Options) *Tracker {
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.Config == nil {
		o.Config = config.Default()
	}
	tick := min(time.Second, o.Config.Probe.Interval)
	if tick <= 0 {
		tick = time.Second
	}
	t := &Tracker{
		st: o.Store, host: o.Host, log: o.Log, live: o.Live, metrics: o.Metrics, client: o.Client,
		Tick: tick, BackoffMin: BackoffMin, BackoffMax: BackoffMax, Timeout: DefaultTimeout, Workers: defaultWorkers,
		kick:      make(chan struct{}, 1),
		open:      map[string]Episode{},
		inflight:  map[job]bool{},
		clearSeen: map[clearKey]time.Time{},
	}
	t.Reconfigure(o.Config)
	return t
}

// Reconfigure applies a reloaded [escalation], [notify] and [watchdog]
// liveness_timeout from the next look on. Episodes already open keep
// their state; a firing is not sent again on a channel added since, and
// what it still owes a channel no longer configured is dropped.
func (t *Tracker) Reconfigure(c *config.Config) {
	t.settings.Store(&settings{
		waitingAfter:    c.Escalation.WaitingAfter,
		livenessTimeout: c.Watchdog.LivenessTimeout,
		unknownAfter:    c.Escalation.UnknownAfter,
		after:           c.Notify.After,
		channels: map[Track][]Channel{
			TrackEscalation: EscalationChannels(c.Escalation, t.client),
			TrackNotify:     NotifyChannels(c.Notify, t.client),
		},
	})
	t.Kick()
}

// Kick asks for a look now, without blocking (each change of a session
// the writer publishes kicks it; so does a reload).
func (t *Tracker) Kick() { loop.Wake(t.kick) }

// Run evaluates on its own timer (and at each kick) until ctx is done. It
// reads only the store and the live set: no probe, tmux call or session
// lock can delay it. Due deliveries go to a small worker pool, so a slow
// channel never delays the timer either; Run waits for them.
func (t *Tracker) Run(ctx context.Context) {
	t.mu.Lock()
	t.jobs = make(chan job, 64)
	jobs := t.jobs
	t.mu.Unlock()
	var g loop.Group
	g.Log = t.log
	defer g.Wait()
	for range max(1, t.Workers) {
		g.Go("attention delivery", func() {
			for {
				select {
				case <-ctx.Done():
					return
				case j := <-jobs:
					t.deliver(ctx, j)
					t.done(j)
				}
			}
		})
	}
	if t.live != nil {
		changes, cancel := t.live.Subscribe()
		defer cancel()
		g.Go("attention changes", func() {
			for {
				select {
				case <-ctx.Done():
					return
				case _, ok := <-changes:
					if !ok {
						return
					}
					t.Kick()
				}
			}
		})
	}
	var last time.Time
	loop.Loop{Name: "attention", Log: t.log, Every: t.Tick, Trigger: t.kick}.Run(ctx, func(ctx context.Context) time.Duration {
		if since := time.Since(last); since < minGap {
			return minGap - since // a burst of kicks: one look for all of them
		}
		last = time.Now()
		tickCtx, cancel := context.WithTimeout(ctx, tickTimeout)
		defer cancel()
		if err := t.look(tickCtx, time.Now().UTC()); err != nil && ctx.Err() == nil {
			t.log.Error("attention: evaluate", "err", err)
		}
		return 0
	})
}

// Escalated reports whether a session has an open escalation.
func (t *Tracker) Escalated(session string) bool { return t.fired(TrackEscalation, session) }

// Notified reports whether a session has an open notification.
func (t *Tracker) Notified(session string) bool { return t.fired(TrackNotify, session) }

// fired reports whether a session has an open, fired episode on track tr.
func (t *Tracker) fired(tr Track, session string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.marked[tr][session]
}

// Open returns every open, fired episode of this host's sessions, sorted
// by track, session and rule: the needs-you inbox (the console and the
// MCP server read it). A notify episode carries the message (title,
// reason such as permission_prompt or startup_prompt, action) of the one
// need a session has; an escalation says a need lasted past its
// threshold. Notify episodes exist only while [notify] has a channel: an
// inbox that must list every need at once, channel or not, reads NeedOf
// over the live set and joins these for what was told. The episodes are
// copies.
func (t *Tracker) Open() []Episode {
	t.mu.Lock()
	var out []Episode
	for _, ep := range t.open {
		if ep.Fired() {
			out = append(out, clone(ep))
		}
	}
	t.mu.Unlock()
	slices.SortFunc(out, func(a, b Episode) int {
		return strings.Compare(Key(a.Track, a.Session, a.Rule), Key(b.Track, b.Session, b.Rule))
	})
	return out
}

// Describe returns session's open notification for describe, nil when
// none.
func (t *Tracker) Describe(session string) *api.Notification {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, r := range NotifyRules {
		ep := t.open[Key(TrackNotify, session, r)]
		if !ep.Fired() || ep.Message == nil {
			continue
		}
		v := &api.Notification{Need: string(ep.Rule), Since: ep.Since, Title: ep.Message.Title, Action: ep.Message.Action,
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
	return nil
}

// clone copies an episode deeply.
func clone(ep Episode) Episode {
	if ep.Message != nil {
		m := *ep.Message
		ep.Message = &m
	}
	if ep.Channels != nil {
		chs := make(map[string]*Delivery, len(ep.Channels))
		for name, d := range ep.Channels {
			c := *d
			chs[name] = &c
		}
		ep.Channels = chs
	}
	return ep
}

// done releases a delivery after its attempt.
func (t *Tracker) done(j job) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.inflight, j)
}
