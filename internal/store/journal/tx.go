package journal

import (
	"time"

	"herd"
	"herd/internal/store"
)

// Kinds of Op.
const (
	opPutRole        = "put_role"
	opDeleteRole     = "delete_role"
	opPutSession     = "put_session"
	opDeleteSession  = "delete_session"
	opPutIncarnation = "put_incarnation"
	opAppendEvent    = "append_event"
)

// Op is one write of a transaction, as the store took it: a put carries
// the whole row, a delete its name.
type Op struct {
	Kind        string            `json:"kind"`
	Name        string            `json:"name,omitempty"`
	Role        *herd.Role        `json:"role,omitempty"`
	Session     *herd.Session     `json:"session,omitempty"`
	Incarnation *herd.Incarnation `json:"incarnation,omitempty"`
	Event       *herd.Event       `json:"event,omitempty"`
}

// apply performs o in tx. An event gets a new id from tx.
func (o Op) apply(tx store.Tx) error {
	switch o.Kind {
	case opPutRole:
		return tx.PutRole(*o.Role)
	case opDeleteRole:
		return tx.DeleteRole(o.Name)
	case opPutSession:
		return tx.PutSession(*o.Session)
	case opDeleteSession:
		return tx.DeleteSession(o.Name)
	case opPutIncarnation:
		return tx.PutIncarnation(*o.Incarnation)
	case opAppendEvent:
		e := *o.Event
		e.ID = 0
		return tx.AppendEvent(&e)
	}
	return nil // a kind of a later version: nothing this one can do
}

// Recorder is a transaction that records its writes of roles, sessions,
// incarnations and events as Ops, each once the store under it has taken
// it. A transaction run again (a serialization retry) starts with Reset.
type Recorder struct {
	store.Tx
	Ops []Op
}

// Reset forgets the writes of an earlier run.
func (r *Recorder) Reset() { r.Ops = r.Ops[:0] }

func (r *Recorder) PutRole(v herd.Role) error {
	if err := r.Tx.PutRole(v); err != nil {
		return err
	}
	r.Ops = append(r.Ops, Op{Kind: opPutRole, Role: &v})
	return nil
}

func (r *Recorder) DeleteRole(name string) error {
	if err := r.Tx.DeleteRole(name); err != nil {
		return err
	}
	r.Ops = append(r.Ops, Op{Kind: opDeleteRole, Name: name})
	return nil
}

func (r *Recorder) PutSession(v herd.Session) error {
	if err := r.Tx.PutSession(v); err != nil {
		return err
	}
	r.Ops = append(r.Ops, Op{Kind: opPutSession, Session: &v})
	return nil
}

func (r *Recorder) DeleteSession(name string) error {
	if err := r.Tx.DeleteSession(name); err != nil {
		return err
	}
	r.Ops = append(r.Ops, Op{Kind: opDeleteSession, Name: name})
	return nil
}

func (r *Recorder) PutIncarnation(v herd.Incarnation) error {
	if err := r.Tx.PutIncarnation(v); err != nil {
		return err
	}
	r.Ops = append(r.Ops, Op{Kind: opPutIncarnation, Incarnation: &v})
	return nil
}

func (r *Recorder) AppendEvent(e *herd.Event) error {
	if err := r.Tx.AppendEvent(e); err != nil {
		return err
	}
	c := *e
	r.Ops = append(r.Ops, Op{Kind: opAppendEvent, Event: &c})
	return nil
}

// awayTx is a transaction on the local store while the shared one is
// away: this host's roles, sessions, incarnations and events are read and
// written; what the fleet shares (hosts, placements, commands, kv, answers) and
// the retention's deletes are refused with store.ErrAway.
type awayTx struct {
	store.Tx
}

func (awayTx) Host(string) (herd.Host, error)                    { return herd.Host{}, store.ErrAway }
func (awayTx) Hosts() ([]herd.Host, error)                       { return nil, store.ErrAway }
func (awayTx) PutHost(herd.Host) error                           { return store.ErrAway }
func (awayTx) DeleteHost(string) error                           { return store.ErrAway }
func (awayTx) Placements() ([]herd.Placement, error)             { return nil, store.ErrAway }
func (awayTx) PlacementsOnHost(string) ([]herd.Placement, error) { return nil, store.ErrAway }
func (awayTx) Placement(string, int) (herd.Placement, error)     { return herd.Placement{}, store.ErrAway }

// SetLease and Now are refused: a lease is renewed, and the fleet's
// clock read, on the shared store only; a local answer would let a
// fenced host believe it still holds its lease.
func (awayTx) SetLease(string, time.Time) error    { return store.ErrAway }
func (awayTx) Now() (time.Time, error)             { return time.Time{}, store.ErrAway }
func (awayTx) PutPlacement(herd.Placement) error   { return store.ErrAway }
func (awayTx) DeletePlacement(string, int) error   { return store.ErrAway }
func (awayTx) AddCommand(*herd.Command) error      { return store.ErrAway }
func (awayTx) Command(int64) (herd.Command, error) { return herd.Command{}, store.ErrAway }
func (awayTx) CommandsOnHost(string, string) ([]herd.Command, error) {
	return nil, store.ErrAway
}
func (awayTx) PutCommand(herd.Command) error                  { return store.ErrAway }
func (awayTx) KV(string) (string, bool, error)                { return "", false, store.ErrAway }
func (awayTx) PutKV(string, string) error                     { return store.ErrAway }
func (awayTx) ClaimKV(string, string) (bool, error)           { return false, store.ErrAway }
func (awayTx) DeleteKV(string) error                          { return store.ErrAway }
func (awayTx) DeleteEventsBefore(time.Time, int) (int, error) { return 0, store.ErrAway }

// The answers and spent answer links are the fleet's: an answer recorded
// only here would be forgotten when the shared store is back, and a need
// answered twice.
func (awayTx) ClaimAnswer(store.Answer) (bool, error)      { return false, store.ErrAway }
func (awayTx) AddTask(*herd.Task) error                    { return store.ErrAway }
func (awayTx) Task(string) (herd.Task, error)              { return herd.Task{}, store.ErrAway }
func (awayTx) Tasks(store.TaskFilter) ([]herd.Task, error) { return nil, store.ErrAway }
func (awayTx) PutTask(herd.Task) error                     { return store.ErrAway }
func (awayTx) Answer(string, time.Time) (store.Answer, error) {
	return store.Answer{}, store.ErrAway
}
func (awayTx) Answers(time.Time) ([]store.Answer, error)        { return nil, store.ErrAway }
func (awayTx) DeleteAnswer(string, time.Time) error             { return store.ErrAway }
func (awayTx) SpendNonce(string, time.Time) (bool, error)       { return false, store.ErrAway }
func (awayTx) NonceSpent(string) (bool, error)                  { return false, store.ErrAway }
func (awayTx) DeleteExpiredAnswers(time.Time, int) (int, error) { return 0, store.ErrAway }
func (awayTx) DeleteEventsBeyond(int, int) (int, error)         { return 0, store.ErrAway }
func (awayTx) DeleteIncarnationsEndedBefore(time.Time, int) (int, error) {
	return 0, store.ErrAway
}

// The users and their tokens are the fleet's: a credential the shared
// store cannot confirm is refused, never taken on a local copy's word.
func (awayTx) AddUser(*store.User) error                   { return store.ErrAway }
func (awayTx) User(string) (store.User, error)             { return store.User{}, store.ErrAway }
func (awayTx) Users() ([]store.User, error)                { return nil, store.ErrAway }
func (awayTx) DeleteUser(string) error                     { return store.ErrAway }
func (awayTx) AddUserToken(string, int64, time.Time) error { return store.ErrAway }
func (awayTx) TokenUser(string) (store.User, error)        { return store.User{}, store.ErrAway }
