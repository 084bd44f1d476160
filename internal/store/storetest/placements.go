package storetest

import (
	"errors"
	"testing"

	"herd"
	"herd/internal/store"
)

// testPlacements: placements round-trip, are listed by role then index
// (index as a number: 10 after 2), one per slot (a second put moves the
// slot), filtered by host, and deleted one slot at a time.
func testPlacements(t *testing.T, s store.Store) {
	p := func(role string, idx int, host string, sec int, gen int64) herd.Placement {
		return herd.Placement{Role: role, Index: idx, Host: host, AssignedAt: at(sec), Generation: gen}
	}
	update(t, s, func(tx store.Tx) error {
		return errors.Join(
			// The generation given is ignored: each put takes the next.
			tx.PutPlacement(p("w", 10, "b", 1, 99)), tx.PutPlacement(p("w", 2, "a", 2, 0)),
			tx.PutPlacement(p("v", 0, "b", 3, 0)), tx.PutPlacement(p("w", 0, "a", 4, 0)),
		)
	})
	view(t, s, func(tx store.Tx) error {
		got, err := tx.Placements()
		if err != nil {
			return err
		}
		diff(t, "all placements", []herd.Placement{p("v", 0, "b", 3, 3), p("w", 0, "a", 4, 4), p("w", 2, "a", 2, 2), p("w", 10, "b", 1, 1)}, got)
		for i := range got {
			checkUTC(t, "placement", &got[i].AssignedAt)
		}
		onB, err := tx.PlacementsOnHost("b")
		if err != nil {
			return err
		}
		diff(t, "placements on b", []herd.Placement{p("v", 0, "b", 3, 3), p("w", 10, "b", 1, 1)}, onB)
		none, err := tx.PlacementsOnHost("z")
		if err != nil {
			return err
		}
		if len(none) != 0 {
			t.Errorf("[placements on an unknown host] expected none, got %v", none)
		}
		return nil
	})
	// The slot moves: one row, the new host, a generation above every
	// other (its fencing token: a host holding the old one may not launch
	// it).
	update(t, s, func(tx store.Tx) error {
		return errors.Join(tx.PutPlacement(p("w", 10, "a", 9, 0)), tx.DeletePlacement("w", 2), tx.DeletePlacement("nosuch", 7))
	})
	view(t, s, func(tx store.Tx) error {
		got, err := tx.Placements()
		if err != nil {
			return err
		}
		diff(t, "after move and delete", []herd.Placement{p("v", 0, "b", 3, 3), p("w", 0, "a", 4, 4), p("w", 10, "a", 9, 5)}, got)
		one, err := tx.Placement("w", 10)
		if err != nil {
			return err
		}
		diff(t, "one placement", p("w", 10, "a", 9, 5), one)
		if _, err := tx.Placement("w", 2); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("[a forgotten slot] expected ErrNotFound, got %v", err)
		}
		return nil
	})
	// Put again on the same host (a slot placed again after its stop):
	// the token still grows.
	update(t, s, func(tx store.Tx) error { return tx.PutPlacement(p("v", 0, "b", 10, 0)) })
	view(t, s, func(tx store.Tx) error {
		got, err := tx.Placement("v", 0)
		if err != nil {
			return err
		}
		diff(t, "put again", p("v", 0, "b", 10, 6), got)
		return nil
	})
	for _, bad := range []herd.Placement{{Index: 0, Host: "a"}, {Role: "w", Index: 0}, {Role: "w", Index: -1, Host: "a"}} {
		if err := s.Update(ctx(t), func(tx store.Tx) error { return tx.PutPlacement(bad) }); err == nil {
			t.Errorf("[put placement %+v] expected an error, got nil", bad)
		}
	}
}
