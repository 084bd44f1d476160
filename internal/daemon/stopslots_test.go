package daemon

import (
	"context"
	"errors"
	"testing"
	"time"

	"herd"
	"herd/internal/herdtest"
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
	herdtest.WaitFor(t, "the first stop taking its slot", 5*time.Second, func() bool { return d.slots.StopSlotsHeld() == 1 })
	go func() {
		results <- d.slots.BoundedStop(context.Background(), slots.StopRequest{Name: "w-0", Reason: herd.ReasonScaledDown})
	}()
	// The second stop waits for the first, without a slot; one that took
	// a slot first (the regression) never gets here.
	herdtest.WaitFor(t, "the second stop waiting for the first", 5*time.Second, func() bool { return d.slots.StopsWaiting() == 1 })
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
