// Package journal keeps a daemon's writes while its shared store
// (PostgreSQL) is away, and writes them there once it answers again: a
// local SQLite store, seeded with the daemon's live set when the outage
// begins, takes every transaction meanwhile, and journals its writes in
// the same local transaction; Replay writes the journal to the shared
// store in order, each entry once (a marker row, written in the same
// transaction, names the last entry applied; an entry whose commit went
// unanswered is asked about by its transaction id). The state writer
// (internal/status) decides when the store is away and routes its
// transactions here; nothing else writes through a Journal.
package journal

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"herd"
	"herd/internal/store"
	"herd/internal/store/sqlite"
)

// Keys of the local store's kv that hold the journal.
const (
	kvID        = "journal.id"    // this journal's id, in the markers
	kvFirst     = "journal.first" // the oldest entry not yet replayed
	kvNext      = "journal.next"  // the seq the next entry gets
	kvSince     = "journal.since" // when the outage began (RFC 3339)
	entryPrefix = "journal.entry."
)

// MarkerKey is the kv key, in the shared store, of host's replay marker:
// "<journal id> <seq>", the last entry of that journal written there.
func MarkerKey(host string) string { return "herd.journal." + host }

// Seed is what the local store starts with: the daemon's live set.
type Seed struct {
	Roles        []herd.Role
	Sessions     []herd.Session
	Incarnations []herd.Incarnation
}

// entry is one journaled transaction: its writes and, for a transaction
// whose commit to the shared store went unanswered, its id there.
type entry struct {
	XID string `json:"xid,omitempty"`
	Ops []Op   `json:"ops"`
}

var _ store.Health = (*Journal)(nil)

// Journal is one daemon's write-behind journal (see the package comment).
type Journal struct {
	path string
	host string

	// fileMu serializes what makes, takes or removes the local store's
	// file (Prepare, Enter, Leave): they share one path.
	fileMu sync.Mutex

	mu sync.Mutex // guards the fields below
	// local is the local store while away (nil otherwise).
	local *sqlite.Store
	since time.Time
	id    string
	// spare is the local store made ready, empty, before an outage
	// (Prepare): an outage begins with a seed only, no file to make.
	spare *sqlite.Store
}

// Open returns the journal kept in the file at path for host. A file left
// by an earlier run with entries not yet replayed is opened as it was:
// the journal is away until Replay has written them.
func Open(ctx context.Context, path, host string) (*Journal, error) {
	j := &Journal{path: path, host: host}
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return j, j.Prepare(ctx)
	}
	local, err := sqlite.Open(ctx, path)
	if err != nil {
		return nil, fmt.Errorf("journal: %w", err)
	}
	var first, next uint64
	var id, since string
	err = local.View(ctx, func(tx store.Tx) (err error) {
		if first, next, err = bounds(tx); err != nil {
			return err
		}
		if id, _, err = tx.KV(kvID); err != nil {
			return err
		}
		since, _, err = tx.KV(kvSince)
		return err
	})
	if err != nil {
		local.Close()
		return nil, fmt.Errorf("journal: %w", err)
	}
	if next <= first || id == "" {
		local.Close()
		if err := removeFiles(path); err != nil {
			return nil, err
		}
		return j, j.Prepare(ctx)
	}
	j.local, j.id = local, id
	j.since, _ = time.Parse(time.RFC3339Nano, since)
	return j, nil
}

// Away reports whether the journal holds the daemon's writes, and since
// when: the shared store is away, or the entries it took meanwhile are
// not all written there yet.
func (j *Journal) Away() (since time.Time, away bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.since, j.local != nil
}

// Prepare makes the local store ready (an empty file) for the next
// outage, so that beginning one writes its seed only. It does nothing
// while away or when one is ready.
func (j *Journal) Prepare(ctx context.Context) error {
	j.fileMu.Lock()
	defer j.fileMu.Unlock()
	return j.prepareLocked(ctx)
}

// prepareLocked is Prepare with fileMu held.
func (j *Journal) prepareLocked(ctx context.Context) error {
	j.mu.Lock()
	ready := j.local != nil || j.spare != nil
	j.mu.Unlock()
	if ready {
		return nil
	}
	if err := removeFiles(j.path); err != nil {
		return err
	}
	spare, err := sqlite.Open(ctx, j.path)
	if err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	j.mu.Lock()
	j.spare = spare
	j.mu.Unlock()
	return nil
}

// Enter begins an outage: the local store, holding seed, takes every
// transaction from now on. Entering while away does nothing.
func (j *Journal) Enter(ctx context.Context, seed Seed) error {
	j.fileMu.Lock()
	defer j.fileMu.Unlock()
	if err := j.prepareLocked(ctx); err != nil {
		return err
	}
	j.mu.Lock()
	local := j.spare
	j.spare = nil
	j.mu.Unlock()
	if local == nil {
		return nil // away already
	}
	var b [8]byte
	rand.Read(b[:])
	id, since := hex.EncodeToString(b[:]), time.Now().UTC()
	err := local.Update(ctx, func(tx store.Tx) error {
		for _, r := range seed.Roles {
			if err := tx.PutRole(r); err != nil {
				return err
			}
		}
		for _, s := range seed.Sessions {
			if err := tx.PutSession(s); err != nil {
				return err
			}
		}
		for _, inc := range seed.Incarnations {
			if err := tx.PutIncarnation(inc); err != nil {
				return err
			}
		}
		for k, v := range map[string]string{kvID: id, kvFirst: "1", kvNext: "1", kvSince: since.Format(time.RFC3339Nano)} {
			if err := tx.PutKV(k, v); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		// Rolled back: still empty, ready for the next try.
		j.mu.Lock()
		j.spare = local
		j.mu.Unlock()
		return fmt.Errorf("journal: seed: %w", err)
	}
	j.mu.Lock()
	j.local, j.id, j.since = local, id, since
	j.mu.Unlock()
	return nil
}

// localStore is the local store, or an error when not away.
func (j *Journal) localStore() (*sqlite.Store, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.local == nil {
		return nil, errors.New("journal: not away")
	}
	return j.local, nil
}

// Update runs fn on the local store and journals its writes in the same
// local transaction.
func (j *Journal) Update(ctx context.Context, fn func(store.Tx) error) error {
	local, err := j.localStore()
	if err != nil {
		return err
	}
	return local.Update(ctx, func(tx store.Tx) error {
		rec := &Recorder{Tx: awayTx{Tx: tx}}
		if err := fn(rec); err != nil {
			return err
		}
		return appendEntry(tx, entry{Ops: rec.Ops})
	})
}

// Record applies the writes of a transaction whose commit to the shared
// store went unanswered (it may have committed, as transaction xid) to
// the local store, and journals them: Replay writes them only if it did
// not.
func (j *Journal) Record(ctx context.Context, ops []Op, xid string) error {
	local, err := j.localStore()
	if err != nil {
		return err
	}
	return local.Update(ctx, func(tx store.Tx) error {
		for _, o := range ops {
			if err := o.apply(tx); err != nil {
				return err
			}
		}
		return appendEntry(tx, entry{XID: xid, Ops: ops})
	})
}

// View runs fn in a read transaction of the local store.
func (j *Journal) View(ctx context.Context, fn func(store.Tx) error) error {
	local, err := j.localStore()
	if err != nil {
		return err
	}
	return local.View(ctx, func(tx store.Tx) error { return fn(awayTx{Tx: tx}) })
}

// Pending is the number of entries not yet written to the shared store.
func (j *Journal) Pending(ctx context.Context) (int, error) {
	local, err := j.localStore()
	if err != nil {
		return 0, nil
	}
	var first, next uint64
	err = local.View(ctx, func(tx store.Tx) (err error) {
		first, next, err = bounds(tx)
		return err
	})
	return int(next - first), err
}

// appendEntry journals e as the next entry, inside the local transaction
// that made its writes.
func appendEntry(tx store.Tx, e entry) error {
	if len(e.Ops) == 0 {
		return nil // a transaction that wrote nothing the shared store needs
	}
	_, next, err := bounds(tx)
	if err != nil {
		return err
	}
	raw, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("journal: encode: %w", err)
	}
	if err := tx.PutKV(entryKey(next), string(raw)); err != nil {
		return err
	}
	return tx.PutKV(kvNext, strconv.FormatUint(next+1, 10))
}

// bounds reads the journal's first and next seq.
func bounds(tx store.Tx) (first, next uint64, err error) {
	if first, err = kvUint(tx, kvFirst); err != nil {
		return 0, 0, err
	}
	next, err = kvUint(tx, kvNext)
	return first, next, err
}

func kvUint(tx store.Tx, key string) (uint64, error) {
	v, ok, err := tx.KV(key)
	if err != nil || !ok {
		return 0, err
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("journal: %s: %w", key, err)
	}
	return n, nil
}

func entryKey(seq uint64) string { return fmt.Sprintf("%s%020d", entryPrefix, seq) }

// removeFiles removes the journal's database and its companions.
func removeFiles(path string) error {
	for _, p := range []string{path, path + "-wal", path + "-shm", path + ".lock"} {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("journal: %w", err)
		}
	}
	return nil
}

// parseMarker reads a replay marker: the journal id and the seq.
func parseMarker(v string) (id string, seq uint64) {
	id, s, ok := strings.Cut(v, " ")
	if !ok {
		return "", 0
	}
	seq, _ = strconv.ParseUint(s, 10, 64)
	return id, seq
}

// Close closes the local store, keeping its entries for the next Open.
func (j *Journal) Close() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	var errs []error
	if j.local != nil {
		errs = append(errs, j.local.Close())
		j.local = nil
	}
	if j.spare != nil {
		errs = append(errs, j.spare.Close())
		j.spare = nil
	}
	return errors.Join(errs...)
}
