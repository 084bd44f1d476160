package placement

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"herd"
	"herd/internal/hosts"
	"herd/internal/loop"
	"herd/internal/store"
)

// LockKey is the PostgreSQL advisory lock the placement leader holds:
// "herdplac".
const LockKey = 0x68657264706c6163

// KVLeader is the kv key naming the host whose daemon leads placement.
const KVLeader = "placement_leader"

// Options configure a Leader.
type Options struct {
	Store store.Store
	// Host is this daemon's host.
	Host string
	// HostTimeout: a host whose heartbeat is older is not up (its slots
	// move only with failover).
	HostTimeout time.Duration
	// Lease is fleet.lease: a failover slot moves off a host that is not
	// up only once its lease ended hosts.Margin ago, by the database's
	// clock. Zero judges by the heartbeat alone.
	Lease time.Duration
	// Interval is how often the leader assigns, and how often the others
	// try to become the leader.
	Interval time.Duration
	// Changed is called after a pass changed placements (the local
	// reconciler runs at once).
	Changed func()
	Log     *slog.Logger
	// Writes counts the writes of the store behind Store when Store is
	// a wrapper that does not count them itself (nil: Store's own count,
	// if it keeps one).
	Writes store.WriteCounter
}

// Leader is the placement leader election and, while this daemon leads,
// the assignment pass. On a store that can elect (store.Locker) one
// daemon at a time leads: whoever holds the advisory lock; when its
// daemon goes away the server releases the lock and the next daemon to
// try takes it. On any other store (SQLite: one daemon) this daemon
// leads.
type Leader struct {
	o    Options
	kick chan struct{}

	mu sync.Mutex // guards the fields below
	// lock is the held election lock; nil when not leading (or with no
	// Locker).
	lock    store.Lock
	leading bool
	// bare: the last pass, begun when the store had counted bareWrites
	// writes, found no placed role and no placement. On a store that
	// cannot elect (one daemon, which writes every row itself) nothing
	// can be placed until its next write, so passes are skipped till
	// then: an idle daemon reads no roles every interval.
	bare       bool
	bareWrites uint64

	// electFailing is when the election began to fail (zero: it answers);
	// electLogged when that was last logged (see electFailed).
	electFailing, electLogged time.Time
}

// electLogEvery is how often an election that keeps failing (the store
// away) is logged again.
const electLogEvery = time.Minute

// NewLeader returns a Leader; Run elects and assigns.
func NewLeader(o Options) *Leader {
	if o.Interval <= 0 {
		o.Interval = time.Second
	}
	if o.Changed == nil {
		o.Changed = func() {}
	}
	return &Leader{o: o, kick: make(chan struct{}, 1)}
}

// Leading reports whether this daemon leads placement now.
func (l *Leader) Leading() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.leading
}

// Kick asks for a pass now (a role was applied or scaled).
func (l *Leader) Kick() { loop.Wake(l.kick) }

// Run tries to lead every interval and, while leading, assigns; it
// gives the lock up when ctx is done.
func (l *Leader) Run(ctx context.Context) {
	defer l.resign("shutdown")
	loop.Loop{Name: "placement", Log: l.o.Log, Every: l.o.Interval, Trigger: l.kick}.Run(ctx, func(ctx context.Context) time.Duration {
		l.Tick(ctx)
		return 0
	})
}

// Tick is one round of Run: take or check the lead, and while leading
// run one pass; it reports whether this daemon leads.
func (l *Leader) Tick(ctx context.Context) bool {
	if !l.elect(ctx) {
		return false
	}
	c, err := l.Pass(ctx)
	if err != nil {
		if ctx.Err() == nil {
			l.o.Log.Warn("placement pass", "err", err)
		}
		return true
	}
	if !c.Empty() {
		l.o.Log.Info("placement changed", "put", len(c.Put), "forgotten", len(c.Delete))
		l.o.Changed()
	}
	return true
}

// Close gives a held lead up (Run does when its context ends).
func (l *Leader) Close() { l.resign("closed") }

// elect reports whether this daemon leads, taking the lock when free and
// checking a held one.
func (l *Leader) elect(ctx context.Context) bool {
	locker, ok := l.o.Store.(store.Locker)
	if !ok {
		l.setLeading(true, nil)
		return true
	}
	l.mu.Lock()
	held := l.lock
	l.mu.Unlock()
	if held != nil {
		if err := held.Check(ctx); err != nil {
			if ctx.Err() == nil {
				l.o.Log.Warn("placement leadership lost", "err", err)
				l.resign("lost")
			}
			return false
		}
		return true
	}
	lock, err := locker.TryLock(ctx, LockKey)
	if err != nil {
		if ctx.Err() == nil {
			l.electFailed(err, time.Now())
		}
		return false
	}
	l.electAnswered(time.Now())
	if lock == nil {
		return false
	}
	l.setLeading(true, lock)
	l.o.Log.Info("placement leader", "host", l.o.Host)
	return true
}

// electFailed logs a failed election: the first of a run of failures,
// then once every electLogEvery (an election is tried at every kick, many
// a second while the store is away).
func (l *Leader) electFailed(err error, now time.Time) {
	l.mu.Lock()
	first := l.electFailing.IsZero()
	if first {
		l.electFailing = now
	}
	log := first || now.Sub(l.electLogged) >= electLogEvery
	if log {
		l.electLogged = now
	}
	since := l.electFailing
	l.mu.Unlock()
	if log {
		l.o.Log.Warn("placement election", "err", err, "failing_since", since.Format(time.RFC3339))
	}
}

// electAnswered ends a run of failed elections, and says so.
func (l *Leader) electAnswered(now time.Time) {
	l.mu.Lock()
	since := l.electFailing
	l.electFailing = time.Time{}
	l.mu.Unlock()
	if !since.IsZero() {
		l.o.Log.Info("placement election answers again", "failed_for", now.Sub(since).Round(time.Millisecond))
	}
}

func (l *Leader) setLeading(leading bool, lock store.Lock) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.leading, l.lock = leading, lock
}

// resign gives a held lock up.
func (l *Leader) resign(why string) {
	l.mu.Lock()
	lock := l.lock
	l.lock, l.leading = nil, false
	l.mu.Unlock()
	if lock != nil {
		lock.Release()
		l.o.Log.Info("placement leadership given up", "host", l.o.Host, "why", why)
	}
}

// Pass runs one assignment: the roles, the current placements and the
// hosts up now (this one always) go through Assign, and its change is
// written; an elected leader also names itself in kv. The steady state (nothing
// to change) is one read-only transaction; only a change takes a write
// transaction, which reads and decides again inside it.
func (l *Leader) Pass(ctx context.Context) (Change, error) {
	var c Change
	var write bool
	writes, counted := l.lonelyWrites()
	if counted {
		l.mu.Lock()
		skip := l.bare && l.bareWrites == writes
		l.mu.Unlock()
		if skip {
			return c, nil
		}
	}
	err := l.o.Store.View(ctx, func(tx store.Tx) error {
		var err error
		var bare bool
		c, write, bare, err = l.plan(tx)
		if err == nil && counted {
			l.mu.Lock()
			l.bare, l.bareWrites = bare, writes
			l.mu.Unlock()
		}
		return err
	})
	if err != nil || !write {
		return c, err
	}
	err = l.o.Store.Update(ctx, func(tx store.Tx) error {
		var err error
		if c, write, _, err = l.plan(tx); err != nil || !write {
			return err
		}
		if _, elected := l.o.Store.(store.Locker); elected {
			if err := tx.PutKV(KVLeader, l.o.Host); err != nil {
				return err
			}
		}
		for _, p := range c.Put {
			if err := tx.PutPlacement(p); err != nil {
				return err
			}
		}
		for _, s := range c.Delete {
			if err := tx.DeletePlacement(s.Role, s.Index); err != nil {
				return err
			}
		}
		return nil
	})
	return c, err
}

// lonelyWrites returns the count of writes of a store that cannot elect
// (this daemon is its one writer) and that counts them; counted is false
// otherwise.
func (l *Leader) lonelyWrites() (n uint64, counted bool) {
	if _, elected := l.o.Store.(store.Locker); elected {
		return 0, false
	}
	wc, ok := l.o.Store.(store.WriteCounter)
	if l.o.Writes != nil {
		wc, ok = l.o.Writes, true
	}
	if !ok {
		return 0, false
	}
	return wc.Writes(), true
}

// plan reads what a pass needs and returns its change, and whether
// anything is to be written (the change, or kv not naming this leader).
// A store with no placed role and no placement (bare) reads no hosts.
func (l *Leader) plan(tx store.Tx) (c Change, write, bare bool, err error) {
	if _, elected := l.o.Store.(store.Locker); elected {
		// Named only where there is an election: a lone daemon leads
		// trivially.
		v, ok, err := tx.KV(KVLeader)
		if err != nil {
			return c, false, false, err
		}
		write = !ok || v != l.o.Host
	}
	roles, err := tx.Roles()
	if err != nil {
		return c, false, false, err
	}
	current, err := tx.Placements()
	if err != nil {
		return c, false, false, err
	}
	placed := false
	for _, r := range roles {
		placed = placed || r.Placed()
	}
	if !placed && len(current) == 0 {
		return c, write, true, nil
	}
	all, err := tx.Hosts()
	if err != nil {
		return c, false, false, err
	}
	sessions, err := tx.Sessions()
	if err != nil {
		return c, false, false, err
	}
	now := time.Now().UTC()
	var released func(string) bool
	if l.o.Lease > 0 {
		// The database's clock judges leases: it set them.
		dbNow, err := tx.Now()
		if err != nil {
			return c, false, false, err
		}
		released = Released(all, dbNow, hosts.Margin(l.o.Lease))
	}
	c = Assign(roles, current, sessions, Live(l.o.Host, all, now, l.o.HostTimeout), released, now)
	return c, write || !c.Empty(), false, nil
}

// Released returns whether a host's lease ended more than margin before
// dbNow (the database's clock); a host never recorded holds no lease.
func Released(all []herd.Host, dbNow time.Time, margin time.Duration) func(string) bool {
	byName := make(map[string]herd.Host, len(all))
	for _, h := range all {
		byName[h.Name] = h
	}
	return func(name string) bool {
		h, ok := byName[name]
		return !ok || hosts.Released(h, dbNow, margin)
	}
}

// Live is the set of hosts up at now: a heartbeat within timeout, and
// self, which is answering.
func Live(self string, all []herd.Host, now time.Time, timeout time.Duration) map[string]bool {
	live := map[string]bool{self: true}
	for _, h := range all {
		if hosts.Status(h, now, timeout) == hosts.Up {
			live[h.Name] = true
		}
	}
	return live
}
