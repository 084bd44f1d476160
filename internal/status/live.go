package status

import (
	"context"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"herd"
	"herd/internal/store"
)

// How long the live set is served from memory without a read of the
// store: a backstop for a write neither this daemon made nor a hint
// announced. Nothing of this host's own rows is written elsewhere in
// normal operation; on a shared store (PostgreSQL) another host writes
// roles without a hint, and a notification can be lost with its
// connection, so the set is read again after liveMaxAge. A store only
// this daemon opens (SQLite: one host, one daemon) has no other writer
// in normal operation, and every write of this process is counted
// (store.WriteCounter): there the backstop is only for a hand edit of
// the database, and comes after soleMaxAge.
const (
	liveMaxAge = 10 * time.Second
	soleMaxAge = 5 * time.Minute
)

// liveSet is every role, and this host's sessions and open incarnations,
// kept in memory and served to the loops (prober, watchdog, reconcile,
// escalation) and to the API instead of a read of the store by each,
// every second.
//
// It is written through: every write transaction of this daemon runs
// through the manager's store (writeThrough), which applies what a
// committed transaction put or deleted to the set, in commit order. A
// write of this process that went around the manager's store (the
// backend counts every write: store.WriteCounter) makes the next reader
// read the store again, as does a hint.
//
// The set is authoritative for this host's sessions and incarnations: in a
// fleet only this host's daemon writes them (another host's request
// arrives as a command row, which this daemon claims and executes: its own
// writes). Other hosts' changes reach it as hints (Invalidate, from the
// store's notifications), and readers of other hosts' rows (the API's
// fleet-wide views) read the store, never this set. liveMaxAge is the
// backstop for a write no hint announced (soleMaxAge on a store no other
// host shares).
type liveSet struct {
	host string
	// out is the store's outage: while it is away, the set is the
	// truth of this host's rows (the journal holds what it holds) and is
	// served without the backstop's read.
	out *outage
	// maxAge is the backstop's age: liveMaxAge, or soleMaxAge on a store
	// no other host shares.
	maxAge time.Duration

	// hints counts the hints (Invalidate): a read taken before the last
	// hint is no longer served.
	hints atomic.Uint64
	// reads counts the reads of the store that filled the set.
	reads atomic.Uint64

	// applyMu serializes this daemon's write transactions, each with
	// the apply of its writes (held across the backend's Update): a
	// mutex of capacity one whose wait can end with a context.
	applyMu chan struct{}

	mu sync.Mutex // guards the fields below
	// ok: the set holds a read (taken at readAt, after hintsAt hints) and
	// every write of this daemon committed since.
	ok      bool
	hintsAt uint64
	readAt  time.Time
	// installed numbers the read the set holds; reads numbers them all.
	installed, started uint64
	// seq counts the transactions applied. While reads are under way
	// (readers > 0), each transaction's writes are also kept in journal,
	// so that a read can be brought up to date when it is installed.
	seq     uint64
	readers int
	journal []journalEntry
	// readingHints is the hint count the last read begun saw.
	readingHints uint64
	// inflight: a write transaction of this daemon is under way;
	// backendSeen is the backend's write count after the last one (see
	// bypassedLocked).
	inflight    bool
	backendSeen uint64
	// roles and sessions are by name; incs are this host's open
	// incarnations by id.
	roles    []herd.Role
	sessions []herd.Session
	incs     map[string]herd.Incarnation
	// live is the live sessions with their incarnation, rebuilt when
	// stale.
	live      []Live
	liveStale bool
	// gen counts the changes of the set's content (a write applied, a
	// read installed): a reader that holds the copy of a generation
	// needs no new one while it is current (ListingSince).
	gen uint64
}

// journalEntry is the writes of one transaction applied at seq.
type journalEntry struct {
	seq uint64
	ops []op
}

// begin marks a write transaction of this daemon under way; called with
// applyMu held.
func (ls *liveSet) begin(backend store.Store) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	ls.bypassedLocked(backend)
	ls.inflight = true
}

// commit applies a committed transaction's writes (nil: it wrote nothing
// the set holds, or did not commit) and ends it; called with applyMu held.
func (ls *liveSet) commit(backend store.Store, ops []op) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	ls.inflight = false
	if wc, ok := backend.(store.WriteCounter); ok {
		// This transaction counts one; more is a write that went
		// around the manager's store meanwhile.
		if n := wc.Writes(); n != ls.backendSeen+1 {
			ls.hints.Add(1)
			ls.backendSeen = n
		} else {
			ls.backendSeen = n
		}
	}
	if len(ops) == 0 {
		return
	}
	ls.seq++
	if ls.readers > 0 {
		ls.journal = append(ls.journal, journalEntry{seq: ls.seq, ops: slices.Clone(ops)})
	}
	if ls.ok {
		ls.applyLocked(ops)
	}
}

// commitJournaled applies a transaction the journal took (the store is
// away): the backend's write count did not move.
func (ls *liveSet) commitJournaled(backend store.Store, ops []op) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	ls.inflight = false
	if wc, ok := backend.(store.WriteCounter); ok {
		ls.backendSeen = wc.Writes() // the write that found the store away
	}
	if len(ops) == 0 {
		return
	}
	ls.seq++
	if ls.readers > 0 {
		ls.journal = append(ls.journal, journalEntry{seq: ls.seq, ops: slices.Clone(ops)})
	}
	if ls.ok {
		ls.applyLocked(ops)
	}
}

// bypassedLocked turns a write of this process that went around the
// manager's store (the backend counted more writes than the manager ran)
// into a hint. While a transaction of the manager's is under way the
// count cannot be told apart from its own: its commit looks.
func (ls *liveSet) bypassedLocked(backend store.Store) {
	wc, ok := backend.(store.WriteCounter)
	if !ok || ls.inflight {
		return
	}
	if ls.out.away() {
		// The store's writes meanwhile are the journal's, written back:
		// the set holds them already.
		ls.backendSeen = wc.Writes()
		return
	}
	if n := wc.Writes(); n != ls.backendSeen {
		ls.hints.Add(1)
		ls.backendSeen = n
	}
}

// applyLocked applies one transaction's writes.
func (ls *liveSet) applyLocked(ops []op) {
	for _, o := range ops {
		switch o.kind {
		case opPutRole:
			ls.roles = putByName(ls.roles, o.role, func(r herd.Role) string { return r.Name })
		case opDeleteRole:
			ls.roles = deleteByName(ls.roles, o.name, func(r herd.Role) string { return r.Name })
			ls.sessions = slices.DeleteFunc(ls.sessions, func(s herd.Session) bool { return s.Role == o.name })
		case opPutSession:
			if o.s.Host == ls.host {
				ls.sessions = putByName(ls.sessions, o.s, func(s herd.Session) string { return s.Name })
			} else {
				ls.sessions = deleteByName(ls.sessions, o.s.Name, func(s herd.Session) string { return s.Name })
			}
		case opDeleteSession:
			ls.sessions = deleteByName(ls.sessions, o.name, func(s herd.Session) string { return s.Name })
		case opPutIncarnation:
			if o.inc.Host == ls.host && o.inc.EndedAt == nil {
				ls.incs[o.inc.ID] = o.inc
			} else {
				delete(ls.incs, o.inc.ID)
			}
		}
	}
	ls.liveStale = true
	ls.gen++
}

// putByName inserts or replaces v in xs, kept sorted by name.
func putByName[T any](xs []T, v T, name func(T) string) []T {
	i, found := sort.Find(len(xs), func(i int) int { return strings.Compare(name(v), name(xs[i])) })
	if found {
		xs[i] = v
		return xs
	}
	return slices.Insert(xs, i, v)
}

// deleteByName removes the element called n from xs, kept sorted by name.
func deleteByName[T any](xs []T, n string, name func(T) string) []T {
	i, found := sort.Find(len(xs), func(i int) int { return strings.Compare(n, name(xs[i])) })
	if !found {
		return xs
	}
	return slices.Delete(xs, i, i+1)
}

// validLocked reports whether the set can be served without a read.
func (ls *liveSet) validLocked(backend store.Store) bool {
	ls.bypassedLocked(backend)
	return ls.ok && ls.hintsAt == ls.hints.Load() && (time.Since(ls.readAt) < ls.maxAge || ls.out.away())
}

// refreshingLocked reports whether the set, too old to be valid but
// holding every write of this daemon, is being read again after the last
// hint already: it is served meanwhile rather than read once more by each
// loop that ticks during the read.
func (ls *liveSet) refreshingLocked() bool {
	return ls.ok && ls.readers > 0 && ls.readingHints == ls.hints.Load() && ls.hintsAt == ls.readingHints
}

// liveLocked returns the live sessions with their incarnation, rebuilt
// when a write changed them.
func (ls *liveSet) liveLocked() []Live {
	if ls.liveStale {
		ls.live = ls.live[:0]
		for _, s := range ls.sessions {
			if inc, ok := ls.incs[s.Incarnation]; ok && s.State.Live() {
				ls.live = append(ls.live, Live{S: s, Inc: inc})
			}
		}
		ls.liveStale = false
	}
	return ls.live
}

// Invalidate makes the next read of the live set read the store: a hint
// that another process (another host's daemon) committed something that
// may bear on this host (a command for it, a role it reconciles).
func (m *Manager) Invalidate() { m.live.Invalidate() }

// Invalidate makes the next reader read the store.
func (ls *liveSet) Invalidate() { ls.hints.Add(1) }

// LiveReads counts the reads of the store that filled the live set: the
// set is written through, so reads are for hints, for writes around the
// manager's store, and for the liveMaxAge backstop.
func (m *Manager) LiveReads() uint64 { return m.live.reads.Load() }

// Live returns this host's sessions and, for the live ones, their open
// incarnation, from memory while the set is valid, else from the store
// in one transaction. The slices are the caller's.
func (m *Manager) Live(ctx context.Context) (all []herd.Session, live []Live, err error) {
	_, all, live, err = m.Listing(ctx)
	return all, live, err
}

// Listing is Live with the roles.
func (m *Manager) Listing(ctx context.Context) (roles []herd.Role, all []herd.Session, live []Live, err error) {
	roles, all, live, _, err = m.listing(ctx)
	return roles, all, live, err
}

// ListingSince is Listing when the set changed since generation gen (a
// write, a hint, the backstop's age; 0: never read), with the generation
// of the copy; while it has not, it copies nothing and reports changed
// false: a loop that ticks over a quiet fleet keeps its own copy.
func (m *Manager) ListingSince(ctx context.Context, gen uint64) (roles []herd.Role, all []herd.Session, live []Live, next uint64, changed bool, err error) {
	ls := &m.live
	ls.mu.Lock()
	if gen != 0 && ls.validLocked(m.raw) && ls.gen == gen {
		ls.mu.Unlock()
		return nil, nil, nil, gen, false, nil
	}
	ls.mu.Unlock()
	roles, all, live, next, err = m.listing(ctx)
	return roles, all, live, next, err == nil, err
}

// SessionsSince is Live's sessions when the set changed since generation
// gen (a write, a hint, the backstop's age; 0: never read), with the
// generation of the copy; while it has not, it copies nothing and reports
// changed false: a component that keeps its own view of the sessions (the
// attention tracker) reads only what changed it.
func (m *Manager) SessionsSince(ctx context.Context, gen uint64) (all []herd.Session, next uint64, changed bool, err error) {
	ls := &m.live
	ls.mu.Lock()
	if gen != 0 && ls.gen == gen && (ls.validLocked(m.raw) || ls.refreshingLocked()) {
		ls.mu.Unlock()
		return nil, gen, false, nil
	}
	ls.mu.Unlock()
	_, all, _, next, err = m.listing(ctx)
	return all, next, err == nil, err
}

// listing is Listing with the generation of the copy (0: a read of the
// store that is not the set's).
func (m *Manager) listing(ctx context.Context) (roles []herd.Role, all []herd.Session, live []Live, gen uint64, err error) {
	ls := &m.live
	ls.mu.Lock()
	if ls.validLocked(m.raw) || ls.refreshingLocked() {
		roles, all, live = slices.Clone(ls.roles), slices.Clone(ls.sessions), slices.Clone(ls.liveLocked())
		gen = ls.gen
		ls.mu.Unlock()
		return roles, all, live, gen, nil
	}
	ls.readers++
	ls.started++
	no, from, hints := ls.started, ls.seq, ls.hints.Load()
	ls.readingHints = hints
	ls.mu.Unlock()

	at := time.Now()
	roles, sessions, open, err := m.readLive(ctx)
	ls.reads.Add(1)

	ls.mu.Lock()
	defer ls.mu.Unlock()
	ls.readers--
	if err == nil && no > ls.installed {
		ls.installLocked(roles, sessions, open, from)
		ls.ok, ls.installed, ls.hintsAt, ls.readAt = true, no, hints, at
	}
	if ls.readers == 0 {
		ls.journal = nil
	}
	if err != nil {
		return nil, nil, nil, 0, err
	}
	if ls.installed == no {
		return slices.Clone(ls.roles), slices.Clone(ls.sessions), slices.Clone(ls.liveLocked()), ls.gen, nil
	}
	// A later read was installed first: this one's answer is still a
	// read of the store.
	byID := make(map[string]herd.Incarnation, len(open))
	for _, inc := range open {
		byID[inc.ID] = inc
	}
	for _, s := range sessions {
		if inc, ok := byID[s.Incarnation]; ok && s.State.Live() {
			live = append(live, Live{S: s, Inc: inc})
		}
	}
	return roles, sessions, live, 0, nil
}

// installLocked fills the set from a read, then applies the writes
// committed since the read began (applied at a seq after from): a write
// the read already saw is applied again, to the same effect.
func (ls *liveSet) installLocked(roles []herd.Role, sessions []herd.Session, open []herd.Incarnation, from uint64) {
	// Kept in Go's order of names (a PostgreSQL collation may order
	// them otherwise), for the binary searches of the writes.
	ls.roles = slices.Clone(roles)
	slices.SortFunc(ls.roles, func(a, b herd.Role) int { return strings.Compare(a.Name, b.Name) })
	ls.sessions = slices.Clone(sessions)
	slices.SortFunc(ls.sessions, func(a, b herd.Session) int { return strings.Compare(a.Name, b.Name) })
	ls.incs = make(map[string]herd.Incarnation, len(open))
	for _, inc := range open {
		ls.incs[inc.ID] = inc
	}
	for _, e := range ls.journal {
		if e.seq > from {
			ls.applyLocked(e.ops)
		}
	}
	ls.live, ls.liveStale = nil, true
	ls.gen++
}

// readLive reads every role, this host's sessions and its open
// incarnations: three queries in one transaction, whatever the number of
// sessions.
func (m *Manager) readLive(ctx context.Context) (roles []herd.Role, sessions []herd.Session, open []herd.Incarnation, err error) {
	err = m.st.View(ctx, func(tx store.Tx) error {
		if roles, err = tx.Roles(); err != nil {
			return err
		}
		if sessions, err = tx.SessionsOnHost(m.host); err != nil {
			return err
		}
		open, err = tx.OpenIncarnationsOnHost(m.host)
		return err
	})
	return roles, sessions, open, err
}

// LiveOne returns one session of this host and, when it is live, its open
// incarnation; ok is false when it is neither. It is served from the live
// set while that is valid, else read from the store.
func (m *Manager) LiveOne(ctx context.Context, name string) (l Live, ok bool, err error) {
	ls := &m.live
	ls.mu.Lock()
	if ls.validLocked(m.raw) {
		defer ls.mu.Unlock()
		i, found := sort.Find(len(ls.sessions), func(i int) int { return strings.Compare(name, ls.sessions[i].Name) })
		if !found {
			return Live{}, false, nil
		}
		s := ls.sessions[i]
		inc, open := ls.incs[s.Incarnation]
		if !open || !s.State.Live() || s.Incarnation == "" {
			return Live{}, false, nil
		}
		return Live{S: s, Inc: inc}, true, nil
	}
	ls.mu.Unlock()
	return m.liveOneStored(ctx, name)
}

// AppendListing appends every role to roles and this host's live sessions
// to live, as Listing reads them, without copying the other sessions:
// a loop that reuses its buffers from one tick to the next (the watchdog)
// allocates nothing while the set is served from memory.
func (m *Manager) AppendListing(ctx context.Context, roles []herd.Role, live []Live) ([]herd.Role, []Live, error) {
	ls := &m.live
	ls.mu.Lock()
	if ls.validLocked(m.raw) || ls.refreshingLocked() {
		roles, live = append(roles, ls.roles...), append(live, ls.liveLocked()...)
		ls.mu.Unlock()
		return roles, live, nil
	}
	ls.mu.Unlock()
	r, _, l, err := m.Listing(ctx)
	return append(roles, r...), append(live, l...), err
}
