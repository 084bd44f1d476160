package slots

import (
	"context"
	"errors"
	"testing"
	"time"

	"herd"
	"herd/internal/proc"
	"herd/internal/store"
)

// startsOf counts the runtime's starts of session name.
func (e *env) startsOf(name string) int {
	e.rt.mu.Lock()
	defer e.rt.mu.Unlock()
	n := 0
	for _, s := range e.rt.starts {
		if s.Session == name {
			n++
		}
	}
	return n
}

// write runs fn in a write transaction of e's store.
func (e *env) write(t *testing.T, fn func(tx store.Tx) error) {
	t.Helper()
	if err := e.st.Store().Update(context.Background(), fn); err != nil {
		t.Fatal(err)
	}
}

// TestPlacedSlots walks one slot of a failover role through its life on
// host h beside host o: placed on o, h leaves it alone; placed on h while
// o (up) still holds it, h waits; o stale, h takes it over (spawned,
// reason moved, from o); taken back by o, h ends its own copy through the
// stop path's takedown (the process dead, the incarnation ended, one
// stopped event with reason moved) and leaves o's record alone.
func TestPlacedSlots(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	role := herd.Role{Name: "p", Replicas: 1, Command: []string{"sleep", "60"}, Workdir: t.TempDir(), Runtime: herd.RuntimeExec,
		Agent: herd.AgentGeneric, Hosts: []string{"o", "h"}, Failover: true}
	if err := putRoles(ctx, e.st, testPolicy, []herd.Role{role}); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	place := func(host string) func(tx store.Tx) error {
		return func(tx store.Tx) error {
			return tx.PutPlacement(herd.Placement{Role: "p", Index: 0, Host: host, AssignedAt: now})
		}
	}
	beat := func(at time.Time) func(tx store.Tx) error {
		return func(tx store.Tx) error { return tx.PutHost(herd.Host{Name: "o", HeartbeatAt: at}) }
	}
	held := func(tx store.Tx) error {
		return tx.PutSession(herd.Session{Name: "p-0", Role: "p", Host: "o", State: herd.StateRunning, Incarnation: "inc-o-1", StateSince: now})
	}

	e.write(t, place("o"))
	e.sl.Reconcile(ctx)
	if n := e.startsOf("p-0"); n != 0 {
		t.Fatalf("[placed on o] expected no launch on h, got %d", n)
	}

	e.write(t, func(tx store.Tx) error { return errors.Join(place("h")(tx), beat(time.Now().UTC())(tx), held(tx)) })
	e.sl.Reconcile(ctx)
	if n := e.startsOf("p-0"); n != 0 {
		t.Fatalf("[placed on h, o up and holding it] expected h to wait, got %d launches", n)
	}

	e.write(t, beat(time.Now().Add(-time.Hour)))
	e.sl.Reconcile(ctx)
	s, err := e.st.Session(ctx, "p-0")
	if err != nil {
		t.Fatal(err)
	}
	if e.startsOf("p-0") != 1 || s.Host != "h" || s.State != herd.StateRunning {
		t.Fatalf("[o stale, failover] expected p-0 taken over and running on h, got %d launches, %s on %s", e.startsOf("p-0"), s.State, s.Host)
	}
	var spawned []herd.Event
	_ = e.st.Store().View(ctx, func(tx store.Tx) error {
		spawned, err = tx.Events(store.EventFilter{Session: "p-0", Kind: herd.EventSpawned})
		return err
	})
	if len(spawned) != 1 || spawned[0].Reason != herd.ReasonMoved || spawned[0].Data["from_host"] != "o" {
		t.Errorf("[take over] expected one spawned event, reason moved, from o, got %+v", spawned)
	}
	inc, err := e.st.Incarnation(ctx, s.Incarnation)
	if err != nil {
		t.Fatal(err)
	}

	// o is back and the slot is its again (its record now); h ends its copy.
	e.write(t, func(tx store.Tx) error {
		return errors.Join(place("o")(tx), beat(time.Now().UTC())(tx), held(tx))
	})
	e.sl.Reconcile(ctx)
	if axis := proc.Real().Check(inc.Identity, inc.Identity.BootID); axis != herd.Dead {
		t.Errorf("[moved away] expected h's copy dead, got %s", axis)
	}
	ended, err := e.st.Incarnation(ctx, inc.ID)
	if err != nil || ended.EndedAt == nil || ended.Exit == nil || ended.Exit.Reason != herd.ReasonMoved {
		t.Errorf("[moved away] expected h's incarnation ended with reason moved, got %+v (%v)", ended.Exit, err)
	}
	var stopped []herd.Event
	_ = e.st.Store().View(ctx, func(tx store.Tx) error {
		stopped, err = tx.Events(store.EventFilter{Session: "p-0", Kind: herd.EventStopped})
		return err
	})
	if len(stopped) != 1 || stopped[0].Reason != herd.ReasonMoved || stopped[0].Incarnation != inc.ID || stopped[0].Host != "h" {
		t.Errorf("[moved away] expected one stopped event of h's incarnation, reason moved, got %+v", stopped)
	}
	if s, _ := e.st.Session(ctx, "p-0"); s.Host != "o" || s.Incarnation != "inc-o-1" || s.State != herd.StateRunning {
		t.Errorf("[moved away] expected o's record untouched, got %s on %s (%s)", s.State, s.Host, s.Incarnation)
	}
	e.sl.Reconcile(ctx) // nothing left to end: no second event
	_ = e.st.Store().View(ctx, func(tx store.Tx) error {
		stopped, err = tx.Events(store.EventFilter{Session: "p-0", Kind: herd.EventStopped})
		return err
	})
	if len(stopped) != 1 {
		t.Errorf("[again] expected still one stopped event, got %d", len(stopped))
	}
}

// TestNoLongerPlacedMovesHome: a placed role made unplaced again by
// another host's apply runs there; this host stops its session with
// reason moved (the role is not deleted).
func TestNoLongerPlacedMovesHome(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	role := herd.Role{Name: "q", Replicas: 1, Command: []string{"sleep", "60"}, Workdir: t.TempDir(), Runtime: herd.RuntimeExec,
		Agent: herd.AgentGeneric, Hosts: []string{"h"}}
	if err := putRoles(ctx, e.st, testPolicy, []herd.Role{role}); err != nil {
		t.Fatal(err)
	}
	e.write(t, func(tx store.Tx) error {
		return tx.PutPlacement(herd.Placement{Role: "q", Index: 0, Host: "h", AssignedAt: time.Now().UTC()})
	})
	e.sl.Reconcile(ctx)
	if s, err := e.st.Session(ctx, "q-0"); err != nil || s.State != herd.StateRunning {
		t.Fatalf("expected q-0 running on h, got %+v (%v)", s, err)
	}
	role.Hosts, role.Host = nil, "o"
	e.write(t, func(tx store.Tx) error { return errors.Join(tx.PutRole(role), tx.DeletePlacement("q", 0)) })
	e.sl.Reconcile(ctx)
	deadline := time.Now().Add(10 * time.Second)
	for {
		s, err := e.st.Session(ctx, "q-0")
		if err != nil {
			t.Fatal(err)
		}
		if s.State == herd.StateStopped {
			if s.Exit == nil || s.Exit.Reason != herd.ReasonMoved {
				t.Errorf("expected q-0 stopped as moved, got %+v", s.Exit)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("expected q-0 stopped within 10s, still %s", s.State)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
