package daemon

import (
	"context"
	"errors"
	"testing"
	"time"

	"herd"
	"herd/internal/store"
)

// TestBoundedStopOncePerSession: regression — a role deletion and the
// reconciler's scale-down each queued a stop of the same session, and the
// second held a stop slot only to wait on the first's lock. A second stop
// of a session waits for the first, without a slot, and records nothing.
func TestBoundedStopOncePerSession(t *testing.T) {
	d := newTestDaemon(t)
	seed(t, d, "inc-1")
	unlock := d.locks.Lock("w-0") // the first stop waits here, slot held
	results := make(chan error, 2)
	go func() {
		results <- d.boundedStop(context.Background(), stopRequest{Name: "w-0", Reason: herd.ReasonRoleDeleted})
	}()
	deadline := time.Now().Add(5 * time.Second)
	for len(d.stopSlots) != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the first stop never took its slot")
		}
		time.Sleep(5 * time.Millisecond)
	}
	go func() {
		results <- d.boundedStop(context.Background(), stopRequest{Name: "w-0", Reason: herd.ReasonScaledDown})
	}()
	time.Sleep(100 * time.Millisecond)
	if n := len(d.stopSlots); n != 1 {
		t.Errorf("expected one slot taken for one session, got %d", n)
	}
	unlock()
	var ok, already int
	for range 2 {
		switch err := <-results; {
		case err == nil:
			ok++
		case errors.Is(err, errAlreadyStopped):
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
	d.st.View(context.Background(), func(tx store.Tx) (err error) {
		if s, err = tx.Session("w-0"); err != nil {
			return err
		}
		events, err = tx.Events(store.EventFilter{Session: "w-0", Kind: herd.EventStopped})
		return err
	})
	if n := len(events); s.State != herd.StateStopped || n != 1 {
		t.Errorf("expected stopped with one stopped event, got %s with %d", s.State, n)
	}
	if len(d.stopSlots) != 0 {
		t.Errorf("expected every slot given back, %d held", len(d.stopSlots))
	}
}
