// Package daemon is herd's supervisor: it launches, probes, restarts and stops agent sessions and serves the API.
package daemon

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"herd"
	"herd/internal/config"
	"herd/internal/execrt"
	"herd/internal/proc"
	"herd/internal/store"
)

// Options configure a Daemon.
type Options struct {
	StateDir string
	Config   *config.Config
	Store    store.Store
	Logger   *slog.Logger
	Version  string
	// Proc is the /proc to read; proc.Real() when zero.
	Proc proc.FS
	// StopGrace is how long the stop path waits after SIGTERM before SIGKILL.
	StopGrace time.Duration
}

// Daemon supervises this host's sessions.
type Daemon struct {
	cfg      *config.Config
	st       store.Store
	log      *slog.Logger
	version  string
	stateDir string
	host     string
	bootID   string
	proc     proc.FS
	exec     *execrt.Runtime
	grace    time.Duration

	// kick wakes the reconcile loop at once (after a death or an API change).
	kick chan struct{}
	// probeKick wakes the prober at once (a pidfd reported an exit).
	probeKick chan struct{}
	// locks serializes every state change of one session (launch, death,
	// stop), so that two paths never act on the same slot at once.
	locks keyedMutex
	// watchCtx parents every watcher; cancelled when the daemon stops. It is
	// never used to kill agents: agents outlive the daemon.
	watchCtx context.Context

	mu sync.Mutex // guards the fields below
	// watched maps an incarnation id to its watchers.
	watched map[string]*watchSet
	// stopping holds incarnations the stop path is taking down: their
	// deaths are the stop path's to record, not crashes.
	stopping map[string]bool

	// stopSlots bounds the stops that run side by side (a scale-down of a
	// large role, a role deletion); stopsUnderWay holds, by session, the
	// end of each such stop.
	stopSlots     chan struct{}
	stopsUnderWay map[string]chan struct{}
	// ops counts the stops and launches in flight; Run returns only once
	// they are done (the store and the state-dir lock outlive them).
	ops opTracker

	// tmuxState is the tmux prober's memory between listings.
	tmuxState tmuxState
	// esc evaluates and delivers escalations on its own clock.
	esc *escalator
	// wdog is the watchdog's memory of activity, output and stalls.
	wdog *wdState
	// reapMu serializes reaper passes.
	reapMu sync.Mutex
}

// New returns a daemon; Run starts it.
func New(o Options) (*Daemon, error) {
	if o.Config == nil || o.Store == nil {
		return nil, errors.New("daemon: config and store are required")
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	if o.Proc.Root == "" {
		o.Proc = proc.Real()
	}
	if o.StopGrace == 0 {
		o.StopGrace = 5 * time.Second
	}
	boot, err := proc.BootID()
	if err != nil {
		return nil, fmt.Errorf("daemon: %w", err)
	}
	host := o.Config.Daemon.Host
	if host == "" {
		if host, err = os.Hostname(); err != nil {
			return nil, fmt.Errorf("daemon: hostname: %w", err)
		}
	}
	d := &Daemon{
		cfg: o.Config, st: o.Store, log: o.Logger, version: o.Version,
		stateDir: o.StateDir, host: host, bootID: boot, proc: o.Proc, grace: o.StopGrace,
		exec:          &execrt.Runtime{LogDir: filepath.Join(o.StateDir, "logs")},
		kick:          make(chan struct{}, 1),
		probeKick:     make(chan struct{}, 1),
		watched:       make(map[string]*watchSet),
		stopping:      make(map[string]bool),
		stopSlots:     make(chan struct{}, maxParallelStops),
		stopsUnderWay: make(map[string]chan struct{}),
		esc:           newEscalator(o.Config),
		wdog:          newWDState(o.Proc, o.Logger),
	}
	return d, nil
}

// Run supervises until ctx is done, serving the API on ln. Agents keep
// running after Run returns.
func (d *Daemon) Run(ctx context.Context, ln net.Listener) error {
	watchCtx, cancelWatchers := context.WithCancel(context.Background())
	defer cancelWatchers()
	d.watchCtx = watchCtx

	d.log.Info("daemon starting", "host", d.host, "boot_id", d.bootID, "socket", ln.Addr().String())
	if err := d.sweepAfterReboot(ctx); err != nil {
		d.log.Error("reboot sweep", "err", err)
	}
	srv := &http.Server{Handler: d.routes(), ReadHeaderTimeout: 5 * time.Second}
	var wg sync.WaitGroup
	// The API and the loops on their own clocks (escalations, watchdog,
	// reaper) start first: a hung runtime during adoption must not hold
	// them back.
	wg.Go(func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) && !errors.Is(err, net.ErrClosed) {
			d.log.Error("api server", "err", err)
		}
	})
	for _, f := range d.extraLoops() {
		wg.Go(func() { f(ctx) })
	}
	if err := d.resumeAfterReboot(ctx); err != nil {
		d.log.Error("resume after reboot", "err", err)
	}
	d.adopt(ctx)
	wg.Go(func() { d.reconcileLoop(ctx) })
	wg.Go(func() { d.probeLoop(ctx) })

	<-ctx.Done()
	d.log.Info("daemon stopping; agents keep running")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	srv.Shutdown(shutdownCtx)
	wg.Wait()
	d.ops.closeAndWait()
	return nil
}

// extraLoops lists the loops of the subsystems that run on their own
// clocks; each runs until ctx is done.
func (d *Daemon) extraLoops() []func(context.Context) {
	return []func(context.Context){d.watchdogLoop, d.reaperLoop, d.escalationLoop}
}

// wake asks a loop to run now without blocking.
func wake(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// event fills the common fields of an event.
func (d *Daemon) event(s herd.Session, inc, kind, reason, msg string, data map[string]any) *herd.Event {
	return &herd.Event{Time: time.Now().UTC(), Host: d.host, Session: s.Name, Incarnation: inc, Kind: kind, Reason: reason, Message: msg, Data: data}
}

// newID returns a fresh, opaque, roughly time-ordered incarnation id.
func newID() string {
	var b [5]byte
	rand.Read(b[:])
	return fmt.Sprintf("%x%s", time.Now().UnixMilli(), hex.EncodeToString(b[:]))
}

// keyedMutex is a set of mutexes by key.
type keyedMutex struct {
	mu sync.Mutex // guards m
	m  map[string]chan struct{}
}

func (k *keyedMutex) slot(key string) chan struct{} {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.m == nil {
		k.m = make(map[string]chan struct{})
	}
	ch, ok := k.m[key]
	if !ok {
		ch = make(chan struct{}, 1)
		k.m[key] = ch
	}
	return ch
}

// Lock locks key's mutex and returns its unlock.
func (k *keyedMutex) Lock(key string) func() {
	ch := k.slot(key)
	ch <- struct{}{}
	return func() { <-ch }
}

// LockCtx is Lock giving up when ctx is done first, so that a probe tick
// never waits past its deadline on a session a slow stop is holding.
func (k *keyedMutex) LockCtx(ctx context.Context, key string) (unlock func(), err error) {
	ch := k.slot(key)
	select {
	case ch <- struct{}{}:
		return func() { <-ch }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (d *Daemon) isStopping(inc string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.stopping[inc]
}

func (d *Daemon) setStopping(inc string, on bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if on {
		d.stopping[inc] = true
	} else {
		delete(d.stopping, inc)
	}
}

// localSessions returns the roles and this host's sessions.
func (d *Daemon) snapshot(ctx context.Context) (roles []herd.Role, sessions []herd.Session, err error) {
	err = d.st.View(ctx, func(tx store.Tx) error {
		if roles, err = tx.Roles(); err != nil {
			return err
		}
		all, err := tx.Sessions()
		if err != nil {
			return err
		}
		for _, s := range all {
			if s.Host == d.host {
				sessions = append(sessions, s)
			}
		}
		return nil
	})
	return roles, sessions, err
}

// errShuttingDown refuses an operation that would start after Run began
// waiting for the operations in flight.
var errShuttingDown = errors.New("the daemon is shutting down")

// opTracker counts operations in flight and, once closed, refuses new ones.
type opTracker struct {
	mu     sync.Mutex
	cond   *sync.Cond
	n      int
	closed bool
}

// begin registers an operation; false means the daemon is shutting down.
func (o *opTracker) begin() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return false
	}
	o.n++
	return true
}

// end marks an operation begun with begin as done.
func (o *opTracker) end() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.n--
	if o.n == 0 && o.cond != nil {
		o.cond.Broadcast()
	}
}

// closeAndWait refuses new operations and waits for those in flight.
func (o *opTracker) closeAndWait() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.closed = true
	if o.cond == nil {
		o.cond = sync.NewCond(&o.mu)
	}
	for o.n > 0 {
		o.cond.Wait()
	}
}
