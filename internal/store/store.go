// Package store defines herd's persistent state and the interface every backend implements.
package store

import (
	"context"
	"errors"
	"time"

	"herd"
	"herd/internal/errs"
)

// ErrNotFound is returned when a requested row does not exist.
var ErrNotFound error = errs.New(errs.NotFound, "not found")

// NotFoundError names the row that does not exist, in words a user reads
// ("session worker-7 not found"), with no mention of the backend. It
// matches ErrNotFound under errors.Is.
type NotFoundError struct {
	// What is the kind of row: session, role, incarnation.
	What string
	// Key is its name or id.
	Key string
}

func (e *NotFoundError) Error() string { return e.What + " " + e.Key + " not found" }

// Is makes errors.Is(err, ErrNotFound) hold.
func (e *NotFoundError) Is(target error) bool { return target == ErrNotFound }

// ErrKind makes it a NotFound to the front doors.
func (e *NotFoundError) ErrKind() errs.Kind { return errs.NotFound }

// NamesRow: its message names the row (errs.Named adds nothing).
func (e *NotFoundError) NamesRow() bool { return true }

// Store is herd's persistent state. Every write happens in a transaction;
// write transactions are serializable: a read-modify-write in one never loses
// an update made by another, whichever process or host runs it (SQLite: BEGIN
// IMMEDIATE, one writer at a time; PostgreSQL: SERIALIZABLE, retried).
type Store interface {
	// Update runs fn in a read-write transaction, committed when fn returns nil.
	// fn may run more than once: a backend that detects a conflict at or
	// before commit (PostgreSQL) rolls back and runs fn again in a new
	// transaction. fn must leave no effect but its writes to the Tx, and set
	// what it reports to the caller anew on every run.
	Update(ctx context.Context, fn func(Tx) error) error
	// View runs fn in a read-only transaction.
	View(ctx context.Context, fn func(Tx) error) error
	// Close releases the store.
	Close() error
}

// Channels a Listener reports.
const (
	// ChannelEvents: events were committed (no payload).
	ChannelEvents = "herd_events"
	// ChannelCommands: a command was committed; the payload is its host.
	ChannelCommands = "herd_commands"
	// ChannelPlacements: a placement was put (the payload is its host),
	// or a role was written (no payload: placement is due again).
	ChannelPlacements = "herd_placements"
)

// Listener is implemented by a store that can tell a process promptly that
// another committed events or commands (PostgreSQL: LISTEN/NOTIFY). It is a
// hint only: a lost notification loses nothing, every reader still catches
// up by event id or by polling.
type Listener interface {
	// Listen calls fn for each notification until ctx is done or the
	// connection fails, and returns why it stopped.
	Listen(ctx context.Context, fn func(channel, payload string)) error
}

// Locker is implemented by a store several daemons share that can elect
// one of them (PostgreSQL: a session-level advisory lock held on a
// connection of its own, released by the server when that connection
// goes, so a daemon that dies or loses the network loses it).
type Locker interface {
	// TryLock takes the lock named key without waiting. It returns nil and
	// no error when another process holds it.
	TryLock(ctx context.Context, key int64) (Lock, error)
}

// Lock is a held Locker lock.
type Lock interface {
	// Check returns nil while the lock is still held (its connection
	// answers), an error once it may be lost.
	Check(ctx context.Context) error
	// Release gives the lock and its connection up.
	Release()
}

// WriteCounter is implemented by a Store that counts the write
// transactions it has run, once each has ended (committed or not). A
// reader that keeps what it read in memory reads again once the count
// moved: every write of this process is then seen at once. Writes of
// other processes (other hosts sharing a PostgreSQL store) are not
// counted.
type WriteCounter interface {
	Writes() uint64
}

// EventFilter selects events. Zero fields do not filter.
type EventFilter struct {
	Host    string
	Session string
	Kind    string
	// Task selects the events of one task (their data's "task").
	Task    string
	Since   time.Time
	AfterID int64 // only events with a greater id
	Limit   int   // 0 = no limit; with Limit the newest Limit events are returned
	// Page, with no Limit, returns only the oldest Page events: one page
	// of a long read, read on with AfterID set to the last id returned.
	Page int
}

// SessionPID is a session with the pid of its open incarnation (0 when
// it has none).
type SessionPID struct {
	Session herd.Session
	PID     int
}

// Tx is one transaction. Lists are ordered by name (roles, sessions),
// start time (incarnations) or id (events).
type Tx interface {
	Role(name string) (herd.Role, error)
	Roles() ([]herd.Role, error)
	PutRole(r herd.Role) error
	// DeleteRole removes the role and its sessions (with their crash
	// history). Incarnations and events are kept for the record.
	DeleteRole(name string) error

	Session(name string) (herd.Session, error)
	Sessions() ([]herd.Session, error)
	// SessionsOnHost lists the sessions recorded on host.
	SessionsOnHost(host string) ([]herd.Session, error)
	// SessionsWithPIDs lists every session by name, each with the pid of
	// its incarnation while that is open (the agent's, else the launched
	// root's; 0 when none): one query, for listings.
	SessionsWithPIDs() ([]SessionPID, error)
	// SessionsWithPIDsNotOnHost is SessionsWithPIDs of every host but
	// host, each without its snapshot (Session.Snapshot nil): the rows a
	// listing shows of other hosts, in one query.
	SessionsWithPIDsNotOnHost(host string) ([]SessionPID, error)
	// SessionNamesOnHost lists the names of host's sessions (an index
	// read: no row decoded), in no particular order.
	SessionNamesOnHost(host string) ([]string, error)
	PutSession(s herd.Session) error
	DeleteSession(name string) error

	Incarnation(id string) (herd.Incarnation, error)
	// OpenIncarnations lists incarnations not yet ended, of every host.
	OpenIncarnations() ([]herd.Incarnation, error)
	// OpenIncarnationsOnHost lists the incarnations of host not yet ended.
	OpenIncarnationsOnHost(host string) ([]herd.Incarnation, error)
	PutIncarnation(inc herd.Incarnation) error
	// DeleteIncarnationsEndedBefore deletes at most limit (> 0) of the
	// incarnations that ended before before and before the oldest event
	// left (no event names them any more), and are no session's current
	// one; oldest first. It returns how many it deleted: fewer than limit
	// means none is left.
	DeleteIncarnationsEndedBefore(before time.Time, limit int) (int, error)

	// AppendEvent stores e and sets e.ID. Ids increase, and become visible
	// in increasing order: a reader that has seen id N never later finds a
	// new event with an id at or below N (EventFilter.AfterID is a cursor).
	AppendEvent(e *herd.Event) error
	Events(f EventFilter) ([]herd.Event, error)
	// NewestEventsAfter returns the id just below the n newest events f
	// selects (its Limit and Page aside), or f.AfterID when no more than
	// n match: the cursor from which those n are read in pages.
	NewestEventsAfter(f EventFilter, n int) (int64, error)
	// DeleteEventsBefore deletes the oldest events whose time is before
	// before, at most limit of them (limit > 0), and returns how many it
	// deleted: fewer than limit means none is left.
	DeleteEventsBefore(before time.Time, limit int) (int, error)
	// DeleteEventsBeyond deletes the oldest events beyond the newest keep
	// ids (keep >= 0), at most limit of them (limit > 0), and returns how
	// many it deleted: fewer than limit means none is left. At most keep
	// events remain; fewer where events among the newest keep ids were
	// deleted already (by time).
	DeleteEventsBeyond(keep, limit int) (int, error)

	// Host returns the host called name, or an error wrapping ErrNotFound.
	Host(name string) (herd.Host, error)
	// Hosts lists every host that ever recorded itself.
	Hosts() ([]herd.Host, error)
	// PutHost inserts or replaces h (a daemon's start, or its heartbeat).
	PutHost(h herd.Host) error
	// DeleteHost forgets the host called name; its sessions stay.
	DeleteHost(name string) error
	// SetLease sets the lease of the recorded host called name to end at
	// until (an error wrapping ErrNotFound for a host not recorded).
	SetLease(name string, until time.Time) error
	// Now is the database's clock: leases are set and judged by it, so
	// hosts whose clocks disagree still agree on when a lease ended.
	Now() (time.Time, error)

	// Placements lists every placement, by role and index.
	Placements() ([]herd.Placement, error)
	// PlacementsOnHost lists the placements on host, by role and index.
	PlacementsOnHost(host string) ([]herd.Placement, error)
	// Placement returns the placement of role's slot index, or an error
	// wrapping ErrNotFound.
	Placement(role string, index int) (herd.Placement, error)
	// PutPlacement inserts or replaces the placement of p's role and
	// index and raises its generation, the slot's fencing token
	// (p.Generation is ignored).
	PutPlacement(p herd.Placement) error
	// DeletePlacement forgets the placement of one slot; deleting a
	// missing one is not an error.
	DeletePlacement(role string, index int) error

	// AddCommand stores a new command and sets c.ID; ids increase.
	AddCommand(c *herd.Command) error
	// Command returns the command with id, or an error wrapping ErrNotFound.
	Command(id int64) (herd.Command, error)
	// CommandsOnHost lists host's commands in state, by id.
	CommandsOnHost(host, state string) ([]herd.Command, error)
	// PutCommand replaces the command with c.ID (its state, result and
	// times); it is an error wrapping ErrNotFound when there is none.
	PutCommand(c herd.Command) error

	// KV returns the value of key and whether it exists.
	KV(key string) (string, bool, error)
	PutKV(key, value string) error
	// ClaimKV sets key to value only if key is absent; it reports whether it did.
	ClaimKV(key, value string) (bool, error)
	DeleteKV(key string) error

	// AddUsage adds r's counts and cost to the row of its incarnation,
	// source, model and hour (creating it); r.Hour is truncated to the hour.
	AddUsage(r UsageRow) error
	// Usage lists the usage rows f selects, by hour, incarnation, source
	// and model.
	Usage(f UsageFilter) ([]UsageRow, error)
	// UsageCursor returns how far host's ledger read the file at path, or
	// an error wrapping ErrNotFound.
	UsageCursor(host, path string) (UsageCursor, error)
	// PutUsageCursor inserts or replaces the cursor of c's host and path.
	PutUsageCursor(c UsageCursor) error

	// ClaimAnswer records a as the answer to its need (a.Session, a.Since)
	// unless an answer to that need is recorded that has not expired by
	// a.At; it reports whether it did.
	ClaimAnswer(a Answer) (bool, error)
	// Answer returns the answer to session's need that began at since, or
	// an error wrapping ErrNotFound.
	Answer(session string, since time.Time) (Answer, error)
	// Answers lists the answers that expire after now, by time answered.
	Answers(now time.Time) ([]Answer, error)
	// DeleteAnswer forgets the answer to session's need that began at
	// since; a missing one is not an error.
	DeleteAnswer(session string, since time.Time) error
	// SpendNonce records an answer link's nonce as spent until expires
	// unless it is already; it reports whether it did.
	SpendNonce(nonce string, expires time.Time) (bool, error)
	// NonceSpent reports whether nonce is recorded as spent.
	NonceSpent(nonce string) (bool, error)
	// AddTask stores t as a new task and sets t.ID (t-<n>, n increasing).
	AddTask(t *herd.Task) error
	// Task returns the task with id, or an error wrapping ErrNotFound.
	Task(id string) (herd.Task, error)
	// Tasks lists the tasks f selects, oldest first.
	Tasks(f TaskFilter) ([]herd.Task, error)
	// PutTask replaces the task with t.ID. While t's state holds a
	// replica (herd.TaskState.Holds), no other task may hold t.Session:
	// that is an error of kind errs.Conflict.
	PutTask(t herd.Task) error

	// DeleteExpiredAnswers deletes at most limit answers and spent nonces
	// that expired before now, and returns how many it deleted.
	DeleteExpiredAnswers(now time.Time, limit int) (int, error)

	// AddUser stores u as a new user and sets u.Seq (increasing, never
	// reused: a name removed and added again is another user). A user
	// of that name already is an error of kind errs.Conflict.
	AddUser(u *User) error
	// User returns the user called name, or an error wrapping ErrNotFound.
	User(name string) (User, error)
	// Users lists every user, by name.
	Users() ([]User, error)
	// DeleteUser forgets the user called name and every token of theirs;
	// deleting a missing one is not an error.
	DeleteUser(name string) error
	// AddUserToken records a token of the user numbered userSeq by its
	// hash (never the token itself); a hash recorded already is an error.
	AddUserToken(hash string, userSeq int64, at time.Time) error
	// TokenUser returns the user whose token has hash, or an error
	// wrapping ErrNotFound.
	TokenUser(hash string) (User, error)
}

// User is a person the console knows by name (herd web user add).
type User struct {
	// Seq numbers the user: tokens and browser sessions belong to it,
	// not to the name.
	Seq  int64
	Name string
	// ReadOnly users see everything and change nothing.
	ReadOnly  bool
	CreatedAt time.Time
}

// TaskFilter selects tasks. Zero fields do not filter.
type TaskFilter struct {
	Role   string
	States []herd.TaskState
	// Held is the session holding the task.
	Held string
	// AfterSeq keeps the tasks numbered above it; Limit the first Limit.
	AfterSeq int64
	Limit    int
}

// Answer is what a person answered to one need of a session: the need is
// the session and the time it began (Since, the inbox item's since). The
// console claims the need before it types the answer, so a need is
// answered once, whatever restarts in between.
type Answer struct {
	Session string
	Since   time.Time
	// Incarnation the need belonged to.
	Incarnation string
	// Who answered (a login, a token, an answer link).
	Who string
	// Choice is what was answered, in words ("option Yes", "text").
	Choice string
	// Nonce is the answer link's nonce, "" when not answered by a link.
	Nonce string
	At    time.Time
	// Expires is when the record may be forgotten.
	Expires time.Time
}

// UsageRow is the usage one incarnation's agent recorded in one source
// for one model within one hour (UTC).
type UsageRow struct {
	Incarnation string
	// Source is what it was read from: "transcript" (the agent's own
	// transcript or rollout file) or "stream" (its JSON output).
	Source  string
	Model   string
	Hour    time.Time
	Session string
	Role    string
	Host    string

	InputTokens      int64
	OutputTokens     int64
	CacheReadTokens  int64
	CacheWriteTokens int64
	CostUSD          float64
}

// UsageFilter selects usage rows. Zero fields do not filter.
type UsageFilter struct {
	// Since keeps the rows of the hour holding Since and later.
	Since   time.Time
	Role    string
	Session string
	Host    string
}

// UsageCursor is how far a host's ledger has read one file.
type UsageCursor struct {
	Host string
	Path string
	// Incarnation is the one the file's usage was last counted to.
	Incarnation string
	// Offset is the byte just after the last whole line read.
	Offset int64
	// Ident tells the file read from another put at the same path.
	Ident string
	// State is the parser's state after the last line read (JSON).
	State     string
	UpdatedAt time.Time
}

// ErrUnreachable marks the error of a store whose server cannot be reached
// (connection refused or reset, the server shutting down or starting up, a
// timeout): the transaction did not commit, or its outcome is unknown (a
// CommitUnknownError). A backend a daemon alone opens (SQLite) never
// returns it.
var ErrUnreachable = errors.New("store unreachable")

// ErrAway is refused work while the store is away: this host's sessions,
// incarnations and events go to a local journal and reach the store when
// it is back, but what is shared by the fleet (hosts, placements, commands,
// kv) waits for the store itself.
var ErrAway = errors.New("the store is away")

// CommitUnknownError is a write transaction whose COMMIT was sent but
// whose answer never came (the connection broke): it may have committed.
// XID names it to a CommitResolver once the server answers again.
type CommitUnknownError struct {
	XID string
	Err error
}

func (e *CommitUnknownError) Error() string {
	return "commit outcome unknown (transaction " + e.XID + "): " + e.Err.Error()
}

// Unwrap makes errors.Is(err, ErrUnreachable) hold, and reaches the cause.
func (e *CommitUnknownError) Unwrap() []error { return []error{ErrUnreachable, e.Err} }

// CommitResolver is implemented by a store that can tell, once it answers
// again, whether a transaction whose commit went unanswered committed.
type CommitResolver interface {
	// Committed reports whether transaction xid committed. An error
	// means it cannot tell yet (the server still away, or the
	// transaction still in progress).
	Committed(ctx context.Context, xid string) (bool, error)
}

// Health is implemented by a store that can be away: whether it answers,
// and since when it does not. It is what a component reads to tell "the
// database is unreachable" (a lease that cannot be renewed, a placement
// that must wait) from an error of its own.
type Health interface {
	// Away reports whether the store is away and since when (the first
	// failure of this outage); away is false while it answers.
	Away() (since time.Time, away bool)
}
