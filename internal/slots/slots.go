// Package slots fills and empties this host's session slots: launches,
// the one stop path (every takedown, the stall kill included, goes through
// it), the reconcile loop with its placed slots, the reboot sweep and
// resume, and restart, reset and signal. The daemon runs it; the verbs,
// roles, the reaper and the watchdog call it. It writes session state only
// through internal/status and ends processes only through
// internal/takedown. It changes a role in one place only: a stopped
// session resumed counts toward its role's replicas again (countAgain);
// every other change of a role is internal/roles'.
package slots

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"herd"
	"herd/internal/cgroup"
	"herd/internal/loop"
	"herd/internal/prober"
	"herd/internal/proc"
	"herd/internal/reconcile"
	"herd/internal/runtime"
	"herd/internal/status"
	"herd/internal/takedown"
	"herd/internal/worktree"
)

// Options configure Slots.
type Options struct {
	Status *status.Manager
	Prober *prober.Prober
	// Runtimes maps a runtime kind (tmux, exec) to its runtime.
	Runtimes map[string]runtime.Runtime
	Proc     proc.FS
	BootID   string
	// Socket is the daemon's API socket, passed to agents (HERD_SOCKET).
	Socket string
	// MCPCommand is the argv of herd's MCP server ([herd, "mcp"]), given
	// to the agents of a role with mcp = true; nil gives none.
	MCPCommand []string
	// Grace is how long a stop waits after SIGTERM before SIGKILL.
	Grace time.Duration
	// Interval is the reconcile period.
	Interval time.Duration
	// Worktrees makes and removes the git worktrees of roles that ask for
	// one per session.
	Worktrees *worktree.Manager
	// Contain ends what is left of an incarnation's process tree after its
	// agent: processes that left its process group (setsid, double
	// forks), found by cgroup or by the HERD_INCARNATION marker; nil ends
	// the process group only.
	Contain *cgroup.Containment
	// EnterCommand is the argv prefix that runs a command inside a cgroup
	// (herd's own `cgexec`: the argv gets PATH, "--" and the command): a
	// tmux pane's process joins its incarnation's cgroup with it before
	// exec'ing the agent. Empty: tmux agents start outside any cgroup and
	// are contained by their marker.
	EnterCommand []string
	// HostTimeout ([fleet] host_timeout): another host's daemon silent
	// this long is stale, and its slots of a failover role may move here.
	HostTimeout time.Duration
	// Lease is this daemon's lease (fleet.lease): failover slots launch
	// only while it is held (see fenceCheck). Nil: no fencing (one
	// daemon).
	Lease Lease
	// Gates hold launches back: a role whose account is rate limited, or
	// whose budget for the day is spent, launches nothing until its gate
	// opens (no crash counted, no backoff spent: the slot just waits).
	Gates []Gate
	// Demand, when set, is what the task queue asks of the task roles
	// (their replicas up to max_replicas, the replicas holding a task
	// kept): the tasks component's, read at each round.
	Demand func() reconcile.Demand
	Log    *slog.Logger
}

// Gate holds the launches of a role back.
type Gate interface {
	// LaunchHeld returns until when a launch of role r waits at now, and
	// why; zero until: it does not wait.
	LaunchHeld(r herd.Role, now time.Time) (until time.Time, why string)
}

// Slots launches and stops this host's sessions.
type Slots struct {
	o    Options
	st   *status.Manager
	kick chan struct{}
	// ops counts the stops and launches in flight; Close returns only once
	// they are done (the store and the state-dir lock outlive them).
	ops   opTracker
	group loop.Group
	// stopSlots bounds the stops that run side by side (a scale-down of a
	// large role, a role deletion).
	stopSlots chan struct{}
	// stopsWaiting counts the bounded stops waiting, without a slot, for
	// another stop of the same session.
	stopsWaiting atomic.Int32

	listMu sync.Mutex // guards listed
	// listed is the reconciler's copy of the roles and sessions, of the
	// live set's generation gen (see status.ListingSince).
	listed struct {
		gen      uint64
		roles    []herd.Role
		sessions []herd.Session
		// live are the open incarnations of the listing: what Fence
		// ends when the store cannot be read.
		live []status.Live
	}
	// td ends incarnations and retries what they leave behind.
	td *takedown.Takedown
	// cleanup ends, after deaths, the processes carrying the dead
	// incarnations' markers: one scan of /proc for all of them.
	cleanup *cgroup.Sweeper
	// changes is the writer's subscription (see follow), unsubscribe its
	// cancel.
	changes     <-chan status.Change
	unsubscribe func()

	mu sync.Mutex // guards the fields below
	// stopsUnderWay holds, by session, the end of each bounded stop.
	stopsUnderWay map[string]chan struct{}
	// binaries maps a session whose incarnation runs an agent binary
	// replaced on disk to that incarnation (see noteBinary).
	binaries map[string]string
	// fenceable holds, by session, the last incarnation of a failover
	// slot this daemon launched (see Fence).
	fenceable map[string]herd.Incarnation
	// fencedPending maps the incarnations fenced whose stop is not yet
	// recorded to their session (see RecordFenced).
	fencedPending map[string]string
	// held holds, by session, until when its launch was last held (see
	// noteHeld).
	held map[string]time.Time
	// restarting counts, by session, the restarts under way (see
	// holdRestarting).
	restarting map[string]int
	// placementsAway is set while the placements cannot be read (the
	// store away): Reconcile says so once.
	placementsAway atomic.Bool
}

// New returns Slots; Run starts the reconcile loop.
func New(o Options) *Slots {
	s := &Slots{
		o: o, st: o.Status, kick: make(chan struct{}, 1),
		stopSlots: make(chan struct{}, maxParallelStops), stopsUnderWay: map[string]chan struct{}{}, held: map[string]time.Time{},
		restarting: map[string]int{},
	}
	s.td = takedown.New(takedown.Options{
		Status: o.Status, Runtimes: o.Runtimes, Proc: o.Proc, BootID: o.BootID, Contain: o.Contain, Ops: &s.ops, Log: o.Log,
	})
	s.cleanup = cgroup.NewSweeper(cgroup.SweeperOptions{FS: o.Proc, BootID: o.BootID, Log: o.Log})
	s.group.Log = o.Log
	if s.o.Worktrees == nil {
		s.o.Worktrees = &worktree.Manager{}
	}
	// Subscribed at once, so that the deaths accounted before Run (the
	// adoption round) are cleaned up when it starts.
	s.changes, s.unsubscribe = o.Status.Subscribe()
	return s
}

// Kick asks the reconcile loop to run now.
func (s *Slots) Kick() { loop.Wake(s.kick) }

// Run reconciles every interval, at once when kicked, and exactly when a
// backoff expires, and retries what stops left behind, until ctx is done.
func (s *Slots) Run(ctx context.Context) {
	s.group.Go("changes", func() { s.follow(ctx) })
	s.group.Go("leftovers", func() { s.td.Run(ctx) })
	s.group.Go("crash cleanup", func() { s.cleanup.Run(ctx) })
	loop.Loop{Name: "reconcile", Log: s.o.Log, Every: s.o.Interval, Trigger: s.kick}.Run(ctx, func(ctx context.Context) time.Duration {
		next := s.Reconcile(ctx)
		if next.IsZero() {
			return 0
		}
		return max(time.Until(next), time.Millisecond)
	})
}

// follow acts on the writer's changes until ctx is done: a death accounted
// (by whatever path) is checked for a resume the agent refused, gets its
// incarnation's leftovers cleaned up and the slot reconciled at once (its relaunch, or its backoff's timer); an
// outdated binary is kept for rollouts.
func (s *Slots) follow(ctx context.Context) {
	defer s.unsubscribe()
	for {
		select {
		case <-ctx.Done():
			return
		case c, ok := <-s.changes:
			if !ok {
				return
			}
			s.noteBinary(c)
			if c.What.Has(status.ChangeDied) {
				// Before its pane is taken down: what it printed is
				// read there.
				s.checkRefusedResume(ctx, c.Incarnation)
			}
			if c.What.Has(status.ChangeLeftover) {
				s.leftover(ctx, c)
			}
			if c.What.Has(status.ChangeDied) {
				s.Ended(c.Incarnation)
				s.Kick()
			}
		}
	}
}

// Close refuses new launches and stops, waits for those in flight and
// for every goroutine Slots started, and then finishes the crash
// cleanups queued (within a takedown's bound).
func (s *Slots) Close() {
	s.ops.closeAndWait()
	s.group.Wait()
	ctx, cancel := s.KillContext(context.Background())
	defer cancel()
	if err := s.cleanup.Drain(ctx); err != nil {
		s.o.Log.Warn("crash cleanup not finished at shutdown", "err", err)
	}
}

// stopSlack bounds a takedown beyond its grace period: the SIGKILL wait,
// the pane kill and the store write.
const stopSlack = 30 * time.Second

// KillContext is the context of a takedown: it runs to its end whatever
// its caller does (a grace period cut short by a cancelled caller — a
// client gone, the daemon shutting down — would SIGKILL at once and leave
// a death the next probe counts as a crash), bounded by the grace period
// plus slack.
func (s *Slots) KillContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), s.o.Grace+stopSlack)
}

// runtime returns the runtime of kind.
func (s *Slots) runtime(kind string) (runtime.Runtime, error) {
	if rt, ok := s.o.Runtimes[kind]; ok {
		return rt, nil
	}
	return nil, errors.New("unknown runtime " + kind)
}

// errShuttingDown refuses an operation that would start after Close began
// waiting for the operations in flight.
var errShuttingDown = errors.New("the daemon is shutting down")

// opTracker counts operations in flight and, once closed, refuses new ones.
type opTracker struct {
	mu     sync.Mutex // guards the fields below
	cond   *sync.Cond
	n      int
	closed bool
}

// Begin registers an operation; false means the daemon is shutting down.
func (o *opTracker) Begin() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return false
	}
	o.n++
	return true
}

// End marks an operation begun with Begin as done.
func (o *opTracker) End() {
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
