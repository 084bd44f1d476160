package status

import (
	"context"
	"errors"
	"slices"
	"time"

	"herd"
	"herd/internal/store"
	"herd/internal/store/journal"
)

// opKind is what one write of a transaction did to a row the live set
// holds.
type opKind uint8

const (
	opPutRole opKind = iota
	opDeleteRole
	opPutSession
	opDeleteSession
	opPutIncarnation
)

// op is one write of a transaction to a role, a session or an
// incarnation, as the store took it (a copy: the caller may change its
// value afterwards).
type op struct {
	kind opKind
	name string // the role or session deleted
	role herd.Role
	s    herd.Session
	inc  herd.Incarnation
}

// writeThrough is the manager's store: every write transaction of this
// daemon runs through it, and what a committed one put or deleted
// (roles, sessions, incarnations) is applied to the live set in commit
// order, so that the set stays equal to the store with no read.
//
// While the store is away (out), its transactions run on the journal
// instead (see outage.go), and are applied to the live set all the same.
type writeThrough struct {
	store.Store
	ls  *liveSet
	out *outage
}

// The backend's notifications and elections stay visible through the
// manager's store (the daemon listens on it; the placement leader locks
// through it).
type (
	writeThroughListener struct {
		writeThrough
		store.Listener
	}
	writeThroughLocker struct {
		writeThrough
		store.Locker
	}
	writeThroughBoth struct {
		writeThrough
		store.Listener
		store.Locker
	}
)

var (
	_ store.Store    = writeThrough{}
	_ store.Listener = writeThroughListener{}
	_ store.Locker   = writeThroughLocker{}
	_ store.Listener = writeThroughBoth{}
	_ store.Locker   = writeThroughBoth{}
	_ store.Health   = writeThrough{}
)

// wrap returns st as the manager's store: a writeThrough that keeps what
// else st implements.
func wrap(st store.Store, ls *liveSet, out *outage) store.Store {
	w := writeThrough{Store: st, ls: ls, out: out}
	l, listens := st.(store.Listener)
	k, locks := st.(store.Locker)
	switch {
	case listens && locks:
		return writeThroughBoth{w, l, k}
	case listens:
		return writeThroughListener{w, l}
	case locks:
		return writeThroughLocker{w, k}
	}
	return w
}

// Update runs fn in a write transaction and, once it has committed,
// applies its writes to the live set. This daemon's write transactions
// run one at a time (with SQLite they do anyway: one writer), so that
// their writes reach the set in the order the store committed them. A
// transaction rolled back (fn failed) applies nothing; one whose commit
// failed may have committed or not, and makes the next reader read the
// store.
func (w writeThrough) Update(ctx context.Context, fn func(store.Tx) error) error {
	ls := w.ls
	// A turn that waits past ctx gives up, as the backend's own wait for
	// its writer does.
	unlock, err := ls.lockApply(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	ls.begin(w.Store)
	var (
		rec  recorder
		jrec journal.Recorder
		fnOK bool
		done bool
	)
	defer func() {
		if !done { // fn panicked: the backend rolled back
			ls.commit(w.Store, nil)
		}
	}()
	run := func(tx store.Tx) error {
		// A backend may run fn again (a serialization conflict): only the
		// last run's writes are the transaction's.
		rec.ops = rec.ops[:0]
		jrec.Tx = tx
		jrec.Reset()
		fnOK = false
		if err := fn(recordingTx{Tx: &jrec, rec: &rec}); err != nil {
			return err
		}
		fnOK = true
		return nil
	}
	journaled := w.out.away()
	if journaled {
		err = w.out.j.Update(ctx, run)
	} else {
		err = w.Store.Update(ctx, run)
		if w.out.unreachable(err) {
			err = w.journalLocked(ctx, err, fnOK, jrec.Ops, run)
			journaled = true
		}
	}
	done = true
	switch {
	case err == nil && journaled:
		ls.commitJournaled(w.Store, rec.ops)
	case err == nil:
		ls.commit(w.Store, rec.ops)
	case fnOK && len(rec.ops) > 0 && !journaled:
		ls.commit(w.Store, nil)
		ls.Invalidate() // the commit's outcome is unknown
	default:
		ls.commit(w.Store, nil)
	}
	return err
}

// journalLocked turns to the journal a transaction the store could not
// take (cause): it begins the outage, then records the transaction's
// writes (ops, when fn ran to its end: a commit whose outcome is unknown,
// written to the store later only if it did not commit) or runs it
// again on the journal (it did not commit). Called with applyMu held.
func (w writeThrough) journalLocked(ctx context.Context, cause error, fnOK bool, ops []journal.Op, run func(store.Tx) error) error {
	if err := w.out.enterLocked(ctx, w.ls, cause); err != nil {
		return errors.Join(cause, err)
	}
	var unknown *store.CommitUnknownError
	if fnOK && errors.As(cause, &unknown) {
		return w.out.j.Record(ctx, slices.Clone(ops), unknown.XID)
	}
	return w.out.j.Update(ctx, run)
}

// View runs fn in a read transaction of the store, or of the journal
// while the store is away; a read that finds the store unreachable begins
// the outage.
func (w writeThrough) View(ctx context.Context, fn func(store.Tx) error) error {
	if w.out.away() {
		return w.out.j.View(ctx, fn)
	}
	err := w.Store.View(ctx, fn)
	if !w.out.unreachable(err) {
		return err
	}
	unlock, lerr := w.ls.lockApply(ctx)
	if lerr != nil {
		return err
	}
	lerr = w.out.enterLocked(ctx, w.ls, err)
	unlock()
	if lerr != nil {
		return errors.Join(err, lerr)
	}
	return w.out.j.View(ctx, fn)
}

// Away is store.Health: whether the store is away, and since when.
func (w writeThrough) Away() (time.Time, bool) { return w.out.Away() }

// recorder holds the writes of one run of a transaction.
type recorder struct {
	ops []op
}

// recordingTx records the writes the live set holds, each once the store
// has taken it.
type recordingTx struct {
	store.Tx
	rec *recorder
}

func (t recordingTx) PutRole(r herd.Role) error {
	if err := t.Tx.PutRole(r); err != nil {
		return err
	}
	t.rec.ops = append(t.rec.ops, op{kind: opPutRole, role: cloneRole(r)})
	return nil
}

func (t recordingTx) DeleteRole(name string) error {
	if err := t.Tx.DeleteRole(name); err != nil {
		return err
	}
	t.rec.ops = append(t.rec.ops, op{kind: opDeleteRole, name: name})
	return nil
}

func (t recordingTx) PutSession(s herd.Session) error {
	if err := t.Tx.PutSession(s); err != nil {
		return err
	}
	t.rec.ops = append(t.rec.ops, op{kind: opPutSession, s: cloneSession(s)})
	return nil
}

func (t recordingTx) DeleteSession(name string) error {
	if err := t.Tx.DeleteSession(name); err != nil {
		return err
	}
	t.rec.ops = append(t.rec.ops, op{kind: opDeleteSession, name: name})
	return nil
}

func (t recordingTx) PutIncarnation(inc herd.Incarnation) error {
	if err := t.Tx.PutIncarnation(inc); err != nil {
		return err
	}
	t.rec.ops = append(t.rec.ops, op{kind: opPutIncarnation, inc: cloneIncarnation(inc)})
	return nil
}

// The clones below copy what a row refers to, and hold every time in UTC
// with no monotonic reading, as a read of the store returns it.

func cloneTime(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return t.UTC()
}

func cloneTimePtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	c := cloneTime(*t)
	return &c
}

func cloneIntPtr(p *int) *int {
	if p == nil {
		return nil
	}
	c := *p
	return &c
}

func cloneExit(e *herd.Exit) *herd.Exit {
	if e == nil {
		return nil
	}
	c := *e
	c.Code, c.Signal, c.At = cloneIntPtr(e.Code), cloneIntPtr(e.Signal), cloneTime(e.At)
	return &c
}

func cloneSession(s herd.Session) herd.Session {
	s.LastCrashAt, s.BackoffUntil = cloneTimePtr(s.LastCrashAt), cloneTimePtr(s.BackoffUntil)
	s.StartedAt, s.LastActivityAt = cloneTimePtr(s.StartedAt), cloneTimePtr(s.LastActivityAt)
	s.StateSince = cloneTime(s.StateSince)
	s.Exit = cloneExit(s.Exit)
	if s.Snapshot != nil {
		c := *s.Snapshot
		c.Argv, c.EnvNames = slices.Clone(c.Argv), slices.Clone(c.EnvNames)
		s.Snapshot = &c
	}
	return s
}

func cloneIncarnation(inc herd.Incarnation) herd.Incarnation {
	inc.Argv = slices.Clone(inc.Argv)
	inc.StartedAt = cloneTime(inc.StartedAt)
	inc.EndedAt = cloneTimePtr(inc.EndedAt)
	inc.Exit = cloneExit(inc.Exit)
	if inc.Exit != nil {
		inc.Exit.Message = "" // an incarnation's exit keeps no message
	}
	return inc
}

func cloneRole(r herd.Role) herd.Role {
	r.Command = slices.Clone(r.Command)
	if r.Env != nil {
		env := make(map[string]string, len(r.Env))
		for k, v := range r.Env {
			env[k] = v
		}
		r.Env = env
	}
	r.UpdatedAt = cloneTime(r.UpdatedAt)
	r.WorktreeSetup, r.WorktreeInclude = slices.Clone(r.WorktreeSetup), slices.Clone(r.WorktreeInclude)
	r.Hosts = slices.Clone(r.Hosts)
	if r.ResumeOnCrash != nil {
		r.ResumeOnCrash = herd.Bool(*r.ResumeOnCrash)
	}
	if r.AutoContinue != nil {
		r.AutoContinue = herd.Bool(*r.AutoContinue)
	}
	return r
}
