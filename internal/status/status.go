// Package status is the sole writer of session state: one lock per
// session, one named change per way a session can change (launch, confirm,
// death, stop, activity, stall...), each one transaction that decides the
// session's new state, the single crash-accounting function, the one set
// of takedowns under way, and the subscription that publishes every
// committed change. No other package writes a session or an incarnation
// (TestSoleWriter holds it).
package status

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"sync"
	"time"

	"herd"
	"herd/internal/metrics"
	"herd/internal/store"
)

// Manager writes session state. Observers (prober, watchdog, reaper) report
// what they saw through it; nothing else writes a session's state.
type Manager struct {
	st       store.Store
	raw      store.Store // the backend st writes through to
	host     string
	log      *slog.Logger
	defaults herd.RestartPolicy

	// Metrics counts crashes; nil counts nothing. Set before the daemon
	// runs.
	Metrics *metrics.Metrics

	// witness tells what the watchdog saw of an ending incarnation, for
	// its summary event; set once, before any death is recorded (see
	// SetWitness).
	witness Witness

	// hub publishes committed changes to the subscribers (Subscribe).
	hub hub

	// OOMKilled, when set, reports whether the kernel killed a process of
	// an incarnation for its memory limit: such a death is recorded with
	// reason oom. Set before the daemon runs.
	OOMKilled func(inc string) bool

	// live is the in-memory live set the loops read (see live.go).
	live liveSet
	// out is the store's outage: the journal the writes go to while it is
	// away (see outage.go).
	out *outage

	// locks serializes every state change of one session (launch, death,
	// stop), so that two paths never act on the same slot at once. A
	// session's lock is taken before any lock of a component.
	locks keyedMutex

	mu sync.Mutex // guards the fields below
	// takedowns holds, by incarnation, the takedowns under way and the
	// exit reason each records itself: the stop path ("": every death of
	// the incarnation is its to record) and the stall kill
	// (stall_killed). A death reported meanwhile by anyone else is not a
	// crash.
	takedowns map[string]map[string]int
}

// New returns the state writer of host's sessions. defaults is the
// restart policy of a session whose role is gone.
func New(st store.Store, host string, defaults herd.RestartPolicy, log *slog.Logger) *Manager {
	m := &Manager{raw: st, host: host, defaults: defaults, log: log, takedowns: map[string]map[string]int{}}
	m.live.host, m.live.applyMu, m.live.maxAge = host, make(chan struct{}, 1), liveMaxAge
	m.out = &outage{log: log}
	m.live.out = m.out
	if _, shared := st.(store.Listener); !shared {
		m.live.maxAge = soleMaxAge
	}
	if wc, ok := st.(store.WriteCounter); ok {
		m.live.backendSeen = wc.Writes()
	}
	m.st = wrap(st, &m.live, m.out)
	return m
}

// Witness tells what it saw of an incarnation that is ending, for the
// incarnation's summary event: the watchdog.
type Witness interface {
	// Summary returns what was seen of incarnation inc (last output,
	// activity counts...), nil when nothing. It may read files.
	Summary(inc string) map[string]any
}

// SetWitness sets the source of ending incarnations' summaries; the
// watchdog registers itself once, before the daemon runs.
func (m *Manager) SetWitness(w Witness) { m.witness = w }

// Store is the store the manager writes through. Every write of the
// daemon goes through it: what a committed transaction puts or deletes
// reaches the live set without a read (a write around it costs the next
// reader a read of the store).
func (m *Manager) Store() store.Store { return m.st }

// Host is this daemon's host name.
func (m *Manager) Host() string { return m.host }

// Event fills the common fields of an event.
func (m *Manager) Event(s herd.Session, inc, kind, reason, msg string, data map[string]any) *herd.Event {
	return &herd.Event{Time: time.Now().UTC(), Host: m.host, Session: s.Name, Incarnation: inc, Kind: kind, Reason: reason, Message: msg, Data: data}
}

// NewID returns a fresh, opaque, roughly time-ordered incarnation id.
func NewID() string {
	var b [5]byte
	rand.Read(b[:])
	return fmt.Sprintf("%x%s", time.Now().UnixMilli(), hex.EncodeToString(b[:]))
}

// Lock takes session name's lock and returns its unlock.
func (m *Manager) Lock(name string) func() { return m.locks.Lock(name) }

// LockCtx is Lock giving up when ctx is done first, so that a probe tick
// never waits past its deadline on a session a slow stop is holding.
func (m *Manager) LockCtx(ctx context.Context, name string) (func(), error) {
	return m.locks.LockCtx(ctx, name)
}

// update applies fn to a live session under its lock, only while inc is
// still its current incarnation; the session is written only when fn
// changed it, and the events fn returns are appended in the same
// transaction. then, when set, runs once the transaction has committed
// with inc current, still under the session's lock: what must follow only
// a committed write (a watcher of the incarnation) goes there, so that a
// rolled-back write leaves nothing behind and a stop that ends the
// incarnation cannot slip in between. The committed change is published.
// applied reports whether inc was current.
func (m *Manager) update(ctx context.Context, name, inc string, fn func(tx store.Tx, s *herd.Session) ([]*herd.Event, error), then func()) (applied bool, err error) {
	return m.updateAs(ctx, name, inc, 0, fn, then)
}

// updateAs is update publishing what besides what it sees change (a
// change that is an event only: outdated).
func (m *Manager) updateAs(ctx context.Context, name, inc string, what What, fn func(tx store.Tx, s *herd.Session) ([]*herd.Event, error), then func()) (applied bool, err error) {
	unlock, err := m.locks.LockCtx(ctx, name)
	if err != nil {
		return false, err // busy (a stop in progress): the caller looks again later
	}
	defer unlock()
	var change Change
	current := false
	err = m.st.Update(ctx, func(tx store.Tx) error {
		current, change = false, Change{}
		s, err := tx.Session(name)
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		if s.Incarnation != inc || !s.State.Live() {
			return nil
		}
		before := s
		itx := &incWrites{Tx: tx}
		events, err := fn(itx, &s)
		if err != nil {
			return err
		}
		change = Change{Session: name, Incarnation: inc, State: s.State, Activity: s.Activity}
		if itx.wrote {
			change.What |= ChangeIncarnation
		}
		if !reflect.DeepEqual(before, s) {
			if err := tx.PutSession(s); err != nil {
				return err
			}
			change.What |= diff(before, s)
		}
		for _, e := range events {
			if err := tx.AppendEvent(e); err != nil {
				return err
			}
		}
		if change.What == 0 && len(events) > 0 {
			change.What = ChangeEvent
		}
		change.What |= what
		current = true
		return nil
	})
	if err != nil {
		return false, err
	}
	if current && then != nil {
		then()
	}
	if current && change.What != 0 {
		m.publish(change)
	}
	return current, nil
}

// incWrites is a transaction that notes whether an incarnation was
// written.
type incWrites struct {
	store.Tx
	wrote bool
}

func (t *incWrites) PutIncarnation(inc herd.Incarnation) error {
	t.wrote = true
	return t.Tx.PutIncarnation(inc)
}

// diff says what changed from a to b.
func diff(a, b herd.Session) What {
	var w What
	if a.State != b.State || a.Runtime != b.Runtime || a.Process != b.Process {
		w |= ChangeState
	}
	if a.Activity != b.Activity || !reflect.DeepEqual(a.LastActivityAt, b.LastActivityAt) {
		w |= ChangeActivity
	}
	if w == 0 {
		w = ChangeState // another field of the session
	}
	return w
}

// BeginTakedown registers a takedown of incarnation inc that records its
// death itself with exit reason owner ("" for the stop path). It reports
// false when a takedown with the same owner is already under way.
func (m *Manager) BeginTakedown(inc, owner string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	t := m.takedowns[inc]
	if t == nil {
		t = map[string]int{}
		m.takedowns[inc] = t
	}
	if owner != "" && t[owner] > 0 {
		return false
	}
	t[owner]++
	return true
}

// EndTakedown ends a takedown begun with BeginTakedown.
func (m *Manager) EndTakedown(inc, owner string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t := m.takedowns[inc]
	if t[owner]--; t[owner] <= 0 {
		delete(t, owner)
	}
	if len(t) == 0 {
		delete(m.takedowns, inc)
	}
}

// takenDown reports whether a death report must be left to a takedown
// under way: any takedown but one that records this very exit reason.
func (m *Manager) takenDown(inc, reason string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for owner := range m.takedowns[inc] {
		if owner == "" || owner != reason {
			return true
		}
	}
	return false
}

// Live is a live session with its open incarnation.
type Live struct {
	S   herd.Session
	Inc herd.Incarnation
}

// liveOneStored reads one session of this host and, when it is live, its
// open incarnation from the store; ok is false when it is neither.
func (m *Manager) liveOneStored(ctx context.Context, name string) (l Live, ok bool, err error) {
	err = m.st.View(ctx, func(tx store.Tx) error {
		l, ok = Live{}, false
		s, err := tx.Session(name)
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		if s.Host != m.host || !s.State.Live() || s.Incarnation == "" {
			return nil
		}
		inc, err := tx.Incarnation(s.Incarnation)
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		if inc.EndedAt == nil {
			l, ok = Live{S: s, Inc: inc}, true
		}
		return nil
	})
	return l, ok, err
}

// Role reads one role.
func (m *Manager) Role(ctx context.Context, name string) (r herd.Role, err error) {
	err = m.st.View(ctx, func(tx store.Tx) error {
		r, err = tx.Role(name)
		return err
	})
	return r, err
}

// Session reads one session.
func (m *Manager) Session(ctx context.Context, name string) (s herd.Session, err error) {
	err = m.st.View(ctx, func(tx store.Tx) error {
		s, err = tx.Session(name)
		return err
	})
	return s, err
}

// Incarnation reads one incarnation.
func (m *Manager) Incarnation(ctx context.Context, id string) (inc herd.Incarnation, err error) {
	err = m.st.View(ctx, func(tx store.Tx) error {
		inc, err = tx.Incarnation(id)
		return err
	})
	return inc, err
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

// LockCtx is Lock giving up when ctx is done first.
func (k *keyedMutex) LockCtx(ctx context.Context, key string) (unlock func(), err error) {
	ch := k.slot(key)
	select {
	case ch <- struct{}{}:
		return func() { <-ch }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Seen returns what the watchdog saw of an ending incarnation, nil when
// nothing; callers gather it before their write transaction (it reads
// files).
func (m *Manager) Seen(inc string) map[string]any {
	if m.witness == nil {
		return nil
	}
	return m.witness.Summary(inc)
}
