package status

import (
	"fmt"
	"testing"
	"time"

	"herd"
)

// TestSubscribeCoalesces: a subscriber that does not read never holds
// the writer up; what it missed of one session and incarnation arrives
// merged, the last state last, and cancel closes its channel.
func TestSubscribeCoalesces(t *testing.T) {
	m := &Manager{}
	changes, cancel := m.Subscribe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 1000 {
			w := ChangeActivity
			if i == 500 {
				w = ChangeEnded
			}
			m.publish(Change{Session: "w-0", Incarnation: "i1", What: w, State: herd.StateRunning, Activity: herd.Activity(fmt.Sprint(i))})
		}
		m.publish(Change{Session: "w-1", Incarnation: "i2", What: ChangeState, State: herd.StateStalled})
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("expected publishing never to wait for a subscriber that does not read")
	}
	var got []Change
	var merged What
	for len(got) == 0 || got[len(got)-1].Session != "w-1" {
		select {
		case c := <-changes:
			got = append(got, c)
			if c.Session == "w-0" {
				merged |= c.What
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("expected every change delivered, coalesced … got %d: %+v", len(got), got)
		}
	}
	if len(got) > subscriberBuffer+3 {
		t.Errorf("expected the changes of one incarnation coalesced … got %d changes", len(got))
	}
	if last := got[len(got)-2]; last.Activity != "999" || !merged.Has(ChangeEnded|ChangeActivity) {
		t.Errorf("expected the last activity (999) and every kind of change kept … got %+v, %b", last, merged)
	}
	cancel()
	cancel()            // safe twice
	for range changes { // closed by cancel
	}
}
