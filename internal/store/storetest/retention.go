package storetest

import (
	"testing"
	"time"

	"herd"
	"herd/internal/store"
)

// ids returns the ids of the stored events, oldest first.
func ids(t *testing.T, s store.Store) []int64 {
	t.Helper()
	var out []int64
	view(t, s, func(tx store.Tx) error {
		evs, err := tx.Events(store.EventFilter{})
		for _, e := range evs {
			out = append(out, e.ID)
		}
		return err
	})
	return out
}

// idsOf returns the ids of ev at indexes.
func idsOf(ev []herd.Event, indexes ...int) []int64 {
	var out []int64
	for _, i := range indexes {
		out = append(out, ev[i].ID)
	}
	return out
}

// deleteWith runs one deletion in its own transaction.
func deleteWith(t *testing.T, s store.Store, fn func(tx store.Tx) (int, error)) int {
	t.Helper()
	n := 0
	update(t, s, func(tx store.Tx) error {
		var err error
		n, err = fn(tx)
		return err
	})
	return n
}

func testDeleteEventsBefore(t *testing.T, s store.Store) {
	// Times out of id order: a clock step back between appends.
	ev := appendAll(t, s, []herd.Event{
		{Time: at(10), Session: "a-0", Kind: herd.EventSpawned}, // 0
		{Time: at(0), Session: "a-0", Kind: herd.EventCrashed},  // 1
		{Time: at(5), Session: "a-0", Kind: herd.EventBackoff},  // 2
		{Time: at(20), Session: "a-0", Kind: herd.EventSpawned}, // 3
		{Time: at(1), Session: "b-0", Kind: herd.EventCrashed},  // 4
	})
	// In batches of 2, oldest time first, never an event at or after the bound.
	if n := deleteWith(t, s, func(tx store.Tx) (int, error) { return tx.DeleteEventsBefore(at(10), 2) }); n != 2 {
		t.Errorf("[first batch] expected 2 deleted, got %d", n)
	}
	diff(t, "after the first batch", idsOf(ev, 0, 2, 3), ids(t, s))
	if n := deleteWith(t, s, func(tx store.Tx) (int, error) { return tx.DeleteEventsBefore(at(10).UTC(), 2) }); n != 1 {
		t.Errorf("[second batch] expected the last 1 deleted, got %d", n)
	}
	diff(t, "after the second batch", idsOf(ev, 0, 3), ids(t, s))
	if n := deleteWith(t, s, func(tx store.Tx) (int, error) { return tx.DeleteEventsBefore(at(10), 2) }); n != 0 {
		t.Errorf("[nothing left] expected 0 deleted, got %d", n)
	}
	if err := s.Update(ctx(t), func(tx store.Tx) error { _, err := tx.DeleteEventsBefore(at(99), 0); return err }); err == nil {
		t.Errorf("[limit 0] expected an error")
	}
	diff(t, "after a refused call", idsOf(ev, 0, 3), ids(t, s))
}

func testDeleteEventsBeyond(t *testing.T, s store.Store) {
	var in []herd.Event
	for i := range 10 {
		in = append(in, herd.Event{Time: at(i), Session: "a-0", Kind: herd.EventActivity})
	}
	ev := appendAll(t, s, in)
	if n := deleteWith(t, s, func(tx store.Tx) (int, error) { return tx.DeleteEventsBeyond(20, 5) }); n != 0 {
		t.Errorf("[under the bound] expected 0 deleted, got %d", n)
	}
	if n := deleteWith(t, s, func(tx store.Tx) (int, error) { return tx.DeleteEventsBeyond(4, 3) }); n != 3 {
		t.Errorf("[first batch] expected 3 deleted, got %d", n)
	}
	diff(t, "after the first batch", idsOf(ev, 3, 4, 5, 6, 7, 8, 9), ids(t, s))
	if n := deleteWith(t, s, func(tx store.Tx) (int, error) { return tx.DeleteEventsBeyond(4, 100) }); n != 3 {
		t.Errorf("[second batch] expected the last 3 deleted, got %d", n)
	}
	diff(t, "the newest 4 kept", idsOf(ev, 6, 7, 8, 9), ids(t, s))
	update(t, s, func(tx store.Tx) error { _, err := tx.DeleteEventsBefore(at(7), 1); return err })
	diff(t, "after a deletion by time", idsOf(ev, 7, 8, 9), ids(t, s))
	if n := deleteWith(t, s, func(tx store.Tx) (int, error) { return tx.DeleteEventsBeyond(2, 100) }); n != 1 {
		t.Errorf("[keep 2 of 3] expected 1 deleted, got %d", n)
	}
	diff(t, "the newest 2 kept", idsOf(ev, 8, 9), ids(t, s))
	if n := deleteWith(t, s, func(tx store.Tx) (int, error) { return tx.DeleteEventsBeyond(0, 100) }); n != 2 {
		t.Errorf("[keep 0] expected both left deleted, got %d", n)
	}
	if n := deleteWith(t, s, func(tx store.Tx) (int, error) { return tx.DeleteEventsBeyond(0, 100) }); n != 0 {
		t.Errorf("[empty] expected 0 deleted, got %d", n)
	}
	for _, c := range []struct{ keep, limit int }{{-1, 10}, {5, 0}} {
		if err := s.Update(ctx(t), func(tx store.Tx) error { _, err := tx.DeleteEventsBeyond(c.keep, c.limit); return err }); err == nil {
			t.Errorf("[keep %d limit %d] expected an error", c.keep, c.limit)
		}
	}
	// New events after deletions keep their ids growing.
	after := appendAll(t, s, []herd.Event{{Time: at(30), Session: "a-0", Kind: herd.EventSpawned}})
	if after[0].ID <= ev[9].ID {
		t.Errorf("[id after deletion] expected above %d, got %d", ev[9].ID, after[0].ID)
	}
}

func testPruneEvents(t *testing.T, s store.Store) {
	now := at(1000)
	var in []herd.Event
	for i := range 30 {
		in = append(in, herd.Event{Time: now.Add(-time.Duration(30-i) * time.Hour), Session: "a-0", Kind: herd.EventActivity})
	}
	ev := appendAll(t, s, in) // ev[i] is 30-i hours old
	r := store.Retention{MaxAge: 24*time.Hour + time.Minute, MaxRows: 20}
	var calls []int
	for range 10 {
		n, err := store.PruneEvents(ctx(t), s, r, now, 4)
		if err != nil {
			t.Fatal(err)
		}
		calls = append(calls, n)
		if n < 4 {
			break
		}
	}
	// 6 events older than 24h (4 + 2), then 4 beyond the newest 20.
	diff(t, "deleted per call", []int{4, 4, 2}, calls)
	diff(t, "kept", idsOf(ev, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29), ids(t, s))
	if n, err := store.PruneEvents(ctx(t), s, store.Retention{}, now.Add(1000*time.Hour), 4); n != 0 || err != nil {
		t.Errorf("[zero retention keeps all] expected 0, nil … got %d, %v", n, err)
	}
	if _, err := store.PruneEvents(ctx(t), s, r, now, 0); err == nil {
		t.Errorf("[batch 0] expected an error")
	}
}

func testDeleteIncarnationsEnded(t *testing.T, s store.Store) {
	// Incarnations of w-0 ended at 10, 20, 30, 40 s; "cur" ended at 15 s
	// but is w-0's current one; "open" never ended. The oldest event is
	// at 35 s.
	var incs []herd.Incarnation
	for i, id := range []string{"e10", "e20", "e30", "e40", "cur", "open"} {
		inc := openIncarnation(id, "w-0", "h", at(i))
		if id != "open" {
			inc.EndedAt = ptr(at([]int{10, 20, 30, 40, 15}[i]))
		}
		incs = append(incs, inc)
	}
	cur := minimalSession("w-0", "w")
	cur.Incarnation = "cur"
	update(t, s, func(tx store.Tx) error {
		for _, inc := range incs {
			if err := tx.PutIncarnation(inc); err != nil {
				return err
			}
		}
		return tx.PutSession(cur)
	})
	appendAll(t, s, []herd.Event{{Time: at(35), Session: "w-0", Kind: herd.EventSpawned}})
	left := func() []string {
		var out []string
		view(t, s, func(tx store.Tx) error {
			for _, inc := range incs {
				if _, err := tx.Incarnation(inc.ID); err == nil {
					out = append(out, inc.ID)
				}
			}
			return nil
		})
		return out
	}
	del := func(before time.Time, limit int) int {
		return deleteWith(t, s, func(tx store.Tx) (int, error) { return tx.DeleteIncarnationsEndedBefore(before, limit) })
	}
	if n := del(at(25), 1); n != 1 {
		t.Errorf("[before 25s, limit 1] expected 1 deleted, got %d", n)
	}
	diff(t, "left after the oldest", []string{"e20", "e30", "e40", "cur", "open"}, left())
	// Before 100 s, yet bounded by the oldest event (35 s): e40 and the
	// current and open ones stay.
	if n := del(at(100), 10); n != 2 {
		t.Errorf("[before 100s] expected 2 deleted, got %d", n)
	}
	diff(t, "left", []string{"e40", "cur", "open"}, left())
	if err := s.Update(ctx(t), func(tx store.Tx) error { _, err := tx.DeleteIncarnationsEndedBefore(at(100), 0); return err }); err == nil {
		t.Errorf("[limit 0] expected an error")
	}
}
