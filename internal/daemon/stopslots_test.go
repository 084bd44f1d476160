package daemon

import (
	"context"
	"errors"
	"testing"
	"time"

	"herd"
	"herd/internal/slots"
	"herd/internal/store"
)

// TestBoundedStopOncePerSession: regression — a role deletion and the
// reconciler's scale-down each queued a stop of the same session, and the
// second held a stop slot only to wait on the first's lock. A second stop
// of a session waits for the first, without a slot, and records nothing.
func TestBoundedStopOncePerSession(t *testing.T) {
	d := newTestDaemon(t)
	seed(t, d, "inc-1")
	unlock := d.status.Lock("w-0") // the first stop waits here, slot held
	results := make(chan error, 2)
	go func() {
		results <- d.slots.BoundedStop(context.Background(), slots.StopRequest{Name: "w-0", Reason: herd.ReasonRoleDeleted})
	}()
	deadline := time.Now().Add(5 * time.Second)
	for d.slots.StopSlotsHeld() != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the first stop never took its slot")
		}
		time.Sleep(5 * time.Millisecond)
	}
	go func() {
		results <- d.slots.BoundedStop(context.Background(), slots.StopRequest{Name: "w-0", Reason: herd.ReasonScaledDown})
	}()
	time.Sleep(100 * time.Millisecond)
	if n := d.slots.StopSlotsHeld(); n != 1 {
		t.Errorf("expected one slot taken for one session, got %d", n)
	}
	unlock()
	var ok, already int
	for range 2 {
		switch err := <-results; {
		case err == nil:
			ok++
		case errors.Is(err, slots.ErrAlreadyStopped):
			already++
		default:
			t.Errorf("unexpected error %v", err)
		}
	}
	if ok != 1 || already != 1 {
		t.Errorf("expected one stop done and one already stopped, got %d and %d", ok, already)
	}
	var s herd.Session
	var events []herd.Event
	d.status.Store().View(context.Background(), func(tx store.Tx) (err error) {
		if s, err = tx.Session("w-0"); err != nil {
			return err
		}
		events, err = tx.Events(store.EventFilter{Session: "w-0", Kind: herd.EventStopped})
		return err
	})
	if n := len(events); s.State != herd.StateStopped || n != 1 {
		t.Errorf("expected stopped with one stopped event, got %s with %d", s.State, n)
	}
	if d.slots.StopSlotsHeld() != 0 {
		t.Errorf("expected every slot given back, %d held", d.slots.StopSlotsHeld())
	}
}
