// Package prober decides, every probe interval and the moment a watched
// process exits, whether each live session's agent is alive: the runtime
// axis (its tmux pane) and the process axis (its verified identity) go
// through liveness.Decide, and the verdict is reported to status.
package prober

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"herd"
	"herd/internal/loop"
	"herd/internal/proc"
	"herd/internal/runtime"
	"herd/internal/status"
)

// Tmux is the tmux runtime as the prober sees it: listings and a nudge,
// nothing that launches or kills (*tmux.Runtime in the daemon).
type Tmux interface {
	// Observe lists every pane of the server with one call. A failed
	// listing carries its error (never "no sessions"); no server running
	// is a good listing with NoServer set.
	Observe(ctx context.Context) runtime.Snapshot
	// ObserveSession lists the panes of session name alone, for a death
	// a pidfd proved; only that session may be decided from it.
	ObserveSession(ctx context.Context, name string) runtime.Snapshot
	// Nudge sends SIGCHLD to the server of the last good listing, which
	// some tmux versions need to report a pane's process exit.
	Nudge()
}

// Options configure a Prober.
type Options struct {
	Status *status.Manager
	Proc   proc.FS
	BootID string
	// Tmux is the tmux runtime whose sessions are listed; nil lists
	// none.
	Tmux Tmux
	// Interval is the probe period (and each tick's deadline); Concurrency
	// bounds the sessions decided at once.
	Interval    time.Duration
	Concurrency int
	// MassDeathFraction is probe.mass_death_fraction: one listing
	// accounting more than this fraction of at least 5 sessions dead is
	// inconclusive (see liveness.BreakMassDeath).
	MassDeathFraction float64
	// Exits tells how an agent under a launcher ended (nil: only the
	// zombie it leaves, when seen, tells).
	Exits ExitLog
	Log   *slog.Logger
}

// Prober watches this host's live sessions.
type Prober struct {
	o    Options
	st   *status.Manager
	trig chan struct{}
	// targeted holds a token per death being confirmed (maxTargeted).
	targeted chan struct{}
	group    loop.Group
	ctx      context.Context // parents every watcher; never used to kill agents
	cancel   context.CancelFunc

	// roundMu serializes rounds and guards the buffers below, which the
	// live set is read into, reused from one round to the next.
	roundMu sync.Mutex
	roles   []herd.Role
	live    []status.Live

	// bootTime (read once, through bootOnce) converts start times.
	bootOnce sync.Once
	bootTime time.Time

	mu sync.Mutex // guards the fields below
	// watched maps an incarnation id to its watchers.
	watched map[string]*watchSet
	// tmux is the memory between tmux listings.
	tmux tmuxMemory
	// lastRound is when the last probe round ended.
	lastRound time.Time
	// provisional holds the incarnations whose agent is a launcher taken
	// for it (FoundLauncher): its child is looked for at every round.
	provisional map[string]bool
	// launching holds, by name, when a tmux launch began: its session
	// exists before its record, and is not reported as unmanaged meanwhile.
	launching map[string]time.Time
}

// maxTargeted bounds the deaths proven by pidfds that are confirmed at
// once, each by a listing of its session alone; more wait their turn (a
// full round accounts most of them first).
const maxTargeted = 4

// New returns a prober; Run starts its loop. Watchers may be added before
// Run (launches of the reboot sweep).
func New(o Options) *Prober {
	ctx, cancel := context.WithCancel(context.Background())
	p := &Prober{o: o, st: o.Status, trig: make(chan struct{}, 1), ctx: ctx, cancel: cancel, watched: map[string]*watchSet{},
		launching: map[string]time.Time{}, targeted: make(chan struct{}, maxTargeted), provisional: map[string]bool{}}
	p.group.Log = o.Log
	if o.Status != nil {
		p.follow(ctx)
	}
	return p
}

// follow ends an incarnation's watchers once a death of it is accounted,
// by whatever path, until ctx is done.
func (p *Prober) follow(ctx context.Context) {
	changes, unsubscribe := p.st.Subscribe()
	p.group.Go("changes", func() {
		defer unsubscribe()
		for {
			select {
			case <-ctx.Done():
				return
			case c, ok := <-changes:
				if !ok {
					return
				}
				if c.What.Has(status.ChangeDied) {
					p.Unwatch(c.Incarnation)
				}
			}
		}
	})
}

// Run probes every interval, and at once when kicked, until ctx is done.
func (p *Prober) Run(ctx context.Context) {
	loop.Loop{Name: "probe", Log: p.o.Log, Every: p.o.Interval, First: p.o.Interval, Trigger: p.trig}.Run(ctx, func(ctx context.Context) time.Duration {
		p.Once(ctx)
		return 0
	})
}

// Close stops every watcher and waits for the prober's goroutines. Agents
// keep running.
func (p *Prober) Close() {
	p.cancel()
	p.group.Wait()
}

// Kick asks for a probe round now, with a full tmux listing.
func (p *Prober) Kick() {
	p.mu.Lock()
	p.tmux.kicked = true
	p.mu.Unlock()
	loop.Wake(p.trig)
}

// Once runs one probe round over this host's live sessions. The round ends
// on time: a call still running then (a hung tmux) goes on in the
// background, bounded by its own timeout, and its sessions read unknown
// for this round.
func (p *Prober) Once(ctx context.Context) {
	start := time.Now()
	defer func() {
		d := time.Since(start)
		p.st.Metrics.Tick(d)
		p.mu.Lock()
		p.lastRound = time.Now()
		p.mu.Unlock()
	}()
	tickCtx, cancel := context.WithTimeout(ctx, p.o.Interval)
	defer cancel()
	// The live set is read into the prober's own buffers, without the
	// sessions that are not live (read only for a listing, see
	// probeTmux): a quiet round copies nothing.
	p.roundMu.Lock()
	defer p.roundMu.Unlock()
	roles, live, err := p.st.AppendListing(tickCtx, p.roles[:0], p.live[:0])
	p.roles, p.live = roles, live
	defer clear(p.roles) // nothing is held past the round
	defer clear(p.live)
	if err != nil {
		switch {
		case ctx.Err() != nil: // a shutdown is no error
		case errors.Is(err, context.DeadlineExceeded):
			// A busy machine: the store did not answer within the
			// round. Nothing is lost; the next round reads again.
			p.o.Log.Warn("probe: round skipped: the store did not answer within the round", "interval", p.o.Interval, "err", err)
		default:
			p.o.Log.Error("probe: read store", "err", err)
		}
		return
	}
	// The tmux sessions are moved to the front of live (the prober's
	// buffer): a round allocates nothing per tmux session.
	tmuxes := live[:0]
	var unfinished []status.Live
	for _, it := range live {
		if unconfirmed(it.Inc) || p.unproven(it.Inc) {
			unfinished = append(unfinished, it)
			continue
		}
		if it.S.RuntimeKind == herd.RuntimeTmux {
			tmuxes = append(tmuxes, it)
		} else {
			p.probeExec(tickCtx, it.S, it.Inc)
		}
	}
	p.probeTmux(tickCtx, tmuxes)
	p.resolveUnconfirmedAll(ctx, unfinished)
}

// probeExec checks one exec session's agent through /proc.
func (p *Prober) probeExec(ctx context.Context, s herd.Session, inc herd.Incarnation) {
	if inc.Identity.Zero() {
		p.findAgent(ctx, s, inc)
		return
	}
	if p.isProvisional(inc.ID) {
		inc = p.followLauncher(ctx, s, inc)
	}
	if p.isWatched(inc) {
		return // its watcher reports the death the moment it happens
	}
	switch p.o.Proc.Check(inc.Identity, p.o.BootID) {
	case herd.Alive:
		p.markAlive(ctx, s, inc, herd.EventAdopted)
	case herd.Dead:
		p.recordDeath(ctx, status.Death{Session: s.Name, Incarnation: inc.ID, Exit: herd.Exit{Reason: herd.ReasonProcessGone}})
	default:
		p.markUnknown(ctx, s, inc.ID, "process identity cannot be read")
	}
}

// recordDeath hands a death to status, logging a failure; it reports
// whether this call accounted it.
func (p *Prober) recordDeath(ctx context.Context, dt status.Death) bool {
	ok, err := p.st.RecordDeath(ctx, dt)
	if err != nil && ctx.Err() == nil {
		p.o.Log.Error("record death", "session", dt.Session, "err", err)
	}
	return ok
}

// logged logs a failed report to status: the next round looks again.
func (p *Prober) logged(ctx context.Context, name, what string, err error) {
	if err != nil && ctx.Err() == nil {
		p.o.Log.Warn("probe: "+what, "session", name, "err", err)
	}
}

// findAgent looks for the agent under a wrapper and returns the
// incarnation with its identity when found; the wrapper dying first is a
// death of the incarnation.
func (p *Prober) findAgent(ctx context.Context, s herd.Session, inc herd.Incarnation) herd.Incarnation {
	names, ok := p.agentNames(ctx, s)
	if !ok {
		return inc
	}
	fs, boot := p.o.Proc, p.o.BootID
	// The launch could not prove the process the runtime named was ours,
	// or the agent under a launcher or wrapper had not started: it is
	// adopted once the process carries the marker.
	if id, found := FindAgent(fs, boot, names, inc); found.Found() && fs.Check(inc.Root, boot) == herd.Alive {
		if root, ok := p.proveRoot(inc); ok {
			inc.Root = root
		}
		inc.Identity = id
		if found == FoundLauncher {
			p.o.Log.Info("a launcher started no agent child within the grace; taken for the agent until it does", "session", s.Name, "pid", id.PID)
			p.setProvisional(inc.ID, true)
		}
		p.markAlive(ctx, s, inc, "")
		return inc
	}
	// A root that is our child is reaped by its watcher, with its status.
	if !p.watchingPID(inc.ID, inc.Root.PID) && fs.Check(inc.Root, boot) == herd.Dead {
		p.recordDeath(ctx, status.Death{Session: s.Name, Incarnation: inc.ID, Exit: herd.Exit{Reason: herd.ReasonProcessGone}})
	}
	return inc
}

// markAlive records that an incarnation's agent is alive and watches it.
// kind is the event to record (adopted, or none).
func (p *Prober) markAlive(ctx context.Context, s herd.Session, inc herd.Incarnation, kind string) {
	_, err := p.st.Confirmed(ctx, status.Confirm{Session: s.Name, Inc: inc, Kind: kind, Held: func() bool { return p.holds(inc.ID) }}, func() {
		// Only once committed (a rolled-back write must leave no watcher,
		// or later rounds would take the agent as adopted already), under
		// the session's lock and only while inc is current: a stop or
		// death that ended it meanwhile leaves no watcher behind.
		p.Watch(s.Name, inc, nil)
	})
	p.logged(ctx, s.Name, "mark alive", err)
}

// markUnknown records that a session cannot be read; nothing destructive
// follows from it.
func (p *Prober) markUnknown(ctx context.Context, s herd.Session, inc, why string) {
	_, err := p.st.Unknown(ctx, s.Name, inc, why)
	p.logged(ctx, s.Name, "mark unknown", err)
}

// markPending returns an unknown session to pending: its pane reads alive
// again and the agent under its wrapper has not been seen yet (markAlive
// takes it to running once it is).
func (p *Prober) markPending(ctx context.Context, s herd.Session, inc string) {
	_, err := p.st.Reachable(ctx, s.Name, inc)
	p.logged(ctx, s.Name, "mark pending", err)
}

// LastRound returns when the last probe round ended (zero before the
// first): a supervisor that stops probing stops being healthy.
func (p *Prober) LastRound() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lastRound
}

// Last returns the last good tmux snapshot (empty before the first).
func (p *Prober) Last() runtime.Snapshot {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.tmux.last
}
