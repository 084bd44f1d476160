package journal

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"herd/internal/store"
)

// Batch is the most entries Replay writes in one transaction of the
// shared store.
const Batch = 64

// seqEntry is an entry with its seq.
type seqEntry struct {
	seq uint64
	entry
}

// Replay writes the journal's entries to backend, oldest first, until
// those journaled before it began are written or max have been (max 0:
// no bound), and returns how many are left. Entries journaled while it
// runs are left to the next call: a replay never chases a daemon that
// keeps writing. Each transaction of backend writes a batch of
// entries with the host's marker; an entry the marker says was written
// (a commit that went unanswered, a daemon killed before it dropped the
// entry) is skipped, and an entry recorded with a transaction id is
// written only if that transaction did not commit. Replay stops at the
// first error (the store away again): what was written stays written,
// the rest is left for the next call.
func (j *Journal) Replay(ctx context.Context, backend store.Store, max int) (left int, err error) {
	local, err := j.localStore()
	if err != nil {
		return 0, nil
	}
	j.mu.Lock()
	id := j.id
	j.mu.Unlock()
	var end uint64 // the first entry journaled after Replay began
	err = local.View(ctx, func(tx store.Tx) (err error) {
		_, end, err = bounds(tx)
		return err
	})
	if err != nil {
		return 0, err
	}
	done := 0
	for max == 0 || done < max {
		batch, left, err := readBatch(ctx, local, end)
		if err != nil || len(batch) == 0 {
			return left, err
		}
		if xid := batch[0].XID; xid != "" {
			batch = batch[:1]
			committed, err := committed(ctx, backend, xid)
			if err != nil {
				return left, err
			}
			if committed {
				if err := drop(ctx, local, batch[0].seq); err != nil {
					return left, err
				}
				done++
				continue
			}
		} else {
			for i, e := range batch {
				if e.XID != "" {
					batch = batch[:i]
					break
				}
			}
		}
		last := batch[len(batch)-1].seq
		// The marker is read before the transaction that writes the
		// batch: only this host's replay writes it, one batch at a
		// time, and a read inside would make every host's replay
		// conflict with every other's (the markers share index pages).
		var marker string
		err = backend.View(ctx, func(tx store.Tx) (err error) {
			marker, _, err = tx.KV(MarkerKey(j.host))
			return err
		})
		if err != nil {
			return left, fmt.Errorf("journal: replay: %w", err)
		}
		mid, mseq := parseMarker(marker)
		err = backend.Update(ctx, func(tx store.Tx) error {
			for _, e := range batch {
				if mid == id && e.seq <= mseq {
					continue // written already
				}
				for _, o := range e.Ops {
					if err := o.apply(tx); err != nil {
						return err
					}
				}
			}
			return tx.PutKV(MarkerKey(j.host), id+" "+strconv.FormatUint(last, 10))
		})
		if err != nil {
			return left, fmt.Errorf("journal: replay: %w", err)
		}
		if err := drop(ctx, local, last); err != nil {
			return left, err
		}
		done += len(batch)
	}
	n, err := j.Pending(ctx)
	return n, err
}

// committed asks backend whether transaction xid committed.
func committed(ctx context.Context, backend store.Store, xid string) (bool, error) {
	r, ok := backend.(store.CommitResolver)
	if !ok {
		return false, fmt.Errorf("journal: cannot tell whether transaction %s committed", xid)
	}
	return r.Committed(ctx, xid)
}

// readBatch reads the oldest entries before end, at most Batch, and how
// many are pending.
func readBatch(ctx context.Context, local store.Store, end uint64) (batch []seqEntry, pending int, err error) {
	err = local.View(ctx, func(tx store.Tx) error {
		batch = batch[:0]
		first, next, err := bounds(tx)
		if err != nil {
			return err
		}
		pending = int(next - first)
		for seq := first; seq < min(next, end) && len(batch) < Batch; seq++ {
			raw, ok, err := tx.KV(entryKey(seq))
			if err != nil {
				return err
			}
			if !ok {
				return fmt.Errorf("journal: entry %d missing", seq)
			}
			e := seqEntry{seq: seq}
			if err := json.Unmarshal([]byte(raw), &e.entry); err != nil {
				return fmt.Errorf("journal: entry %d: %w", seq, err)
			}
			batch = append(batch, e)
		}
		return nil
	})
	return batch, pending, err
}

// drop removes the entries up to last, written to the shared store.
func drop(ctx context.Context, local store.Store, last uint64) error {
	return local.Update(ctx, func(tx store.Tx) error {
		first, _, err := bounds(tx)
		if err != nil {
			return err
		}
		for seq := first; seq <= last; seq++ {
			if err := tx.DeleteKV(entryKey(seq)); err != nil {
				return err
			}
		}
		return tx.PutKV(kvFirst, strconv.FormatUint(last+1, 10))
	})
}

// ErrPending is Leave's refusal while entries are left to replay.
var ErrPending = errors.New("journal: entries are left to replay")

// Leave ends the outage once every entry is written: the local store is
// closed and its file removed (Prepare makes the next one ready). The
// caller makes sure no transaction runs on the journal meanwhile.
func (j *Journal) Leave(ctx context.Context) error {
	j.fileMu.Lock()
	defer j.fileMu.Unlock()
	n, err := j.Pending(ctx)
	if err != nil {
		return err
	}
	if n > 0 {
		return ErrPending
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.local == nil {
		return nil
	}
	err = j.local.Close()
	j.local, j.since, j.id = nil, time.Time{}, ""
	return errors.Join(err, removeFiles(j.path))
}
