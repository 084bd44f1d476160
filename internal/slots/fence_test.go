package slots

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"herd"
	"herd/internal/proc"
	"herd/internal/reconcile"
	"herd/internal/store"
)

// fakeLease is a lease held or not on the test's word.
type fakeLease struct{ held atomic.Bool }

func (l *fakeLease) Held(time.Time) bool     { return l.held.Load() }
func (l *fakeLease) Duration() time.Duration { return 10 * time.Second }

// TestFencedLaunches: a failover slot placed on h launches only while h's
// lease is held both here and, by the database's clock, in h's row, with
// the generation the reconciler read, and while no other host holding it
// has a lease not yet released (ended plus the margin); the launch event
// carries the generation.
func TestFencedLaunches(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	lease := &fakeLease{}
	e.sl.o.Lease = lease
	role := herd.Role{Name: "p", Replicas: 1, Command: []string{"sleep", "60"}, Workdir: t.TempDir(), Runtime: herd.RuntimeExec,
		Agent: herd.AgentGeneric, Hosts: []string{"h", "o"}, Failover: true}
	if err := putRoles(ctx, e.st, testPolicy, []herd.Role{role}); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	leaseOf := func(host string, until time.Time) func(tx store.Tx) error {
		return func(tx store.Tx) error {
			if err := tx.PutHost(herd.Host{Name: host, HeartbeatAt: now}); err != nil {
				return err
			}
			return tx.SetLease(host, until)
		}
	}
	e.write(t, func(tx store.Tx) error {
		return errors.Join(leaseOf("h", now.Add(time.Hour))(tx),
			tx.PutPlacement(herd.Placement{Role: "p", Index: 0, Host: "h", AssignedAt: now}))
	})
	var gen int64
	_ = e.st.Store().View(ctx, func(tx store.Tx) error { p, err := tx.Placement("p", 0); gen = p.Generation; return err })

	e.sl.Reconcile(ctx)
	if n := e.startsOf("p-0"); n != 0 {
		t.Fatalf("[lease not held here] expected no launch, got %d", n)
	}
	lease.held.Store(true)
	e.write(t, leaseOf("h", now.Add(-time.Second)))
	e.sl.Reconcile(ctx)
	if n := e.startsOf("p-0"); n != 0 {
		t.Fatalf("[lease ended by the database's clock] expected no launch, got %d", n)
	}
	e.write(t, leaseOf("h", time.Now().Add(time.Hour)))
	// The reconciler read another generation than the slot has now: refused.
	if err := e.sl.launchPlaced(ctx, role, reconcileAction("p", 0), gen+1); err != nil {
		t.Fatal(err)
	}
	if n := e.startsOf("p-0"); n != 0 {
		t.Fatalf("[another generation] expected no launch, got %d", n)
	}
	// Another host holds the slot, its lease ended within the margin.
	e.write(t, func(tx store.Tx) error {
		return errors.Join(leaseOf("o", time.Now().Add(-time.Second))(tx),
			tx.PutSession(herd.Session{Name: "p-0", Role: "p", Host: "o", State: herd.StateRunning, Incarnation: "inc-o", StateSince: now}))
	})
	e.sl.Reconcile(ctx)
	if n := e.startsOf("p-0"); n != 0 {
		t.Fatalf("[o's lease not released] expected no launch, got %d", n)
	}
	e.write(t, leaseOf("o", time.Now().Add(-time.Minute)))
	e.sl.Reconcile(ctx)
	s, err := e.st.Session(ctx, "p-0")
	if err != nil {
		t.Fatal(err)
	}
	if e.startsOf("p-0") != 1 || s.Host != "h" || s.State != herd.StateRunning {
		t.Fatalf("[o released] expected p-0 launched on h, got %d launches, %s on %s", e.startsOf("p-0"), s.State, s.Host)
	}
	var spawned []herd.Event
	_ = e.st.Store().View(ctx, func(tx store.Tx) error {
		spawned, err = tx.Events(store.EventFilter{Session: "p-0", Kind: herd.EventSpawned})
		return err
	})
	if len(spawned) != 1 || spawned[0].Data["generation"] != float64(gen) {
		t.Errorf("[launch] expected one spawned event with generation %d, got %+v", gen, spawned)
	}
}

// TestFence: with the lease lost, Fence stops the failover agents (reason
// fenced, the replica kept) and no other; a second Fence finds nothing.
func TestFence(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	lease := &fakeLease{}
	lease.held.Store(true)
	e.sl.o.Lease = lease
	role := herd.Role{Name: "p", Replicas: 1, Command: []string{"sleep", "60"}, Workdir: t.TempDir(), Runtime: herd.RuntimeExec,
		Agent: herd.AgentGeneric, Hosts: []string{"h"}, Failover: true}
	w := herd.Role{Name: "w", Replicas: 1, Command: []string{"sleep", "60"}, Workdir: t.TempDir(), Runtime: herd.RuntimeExec, Agent: herd.AgentGeneric}
	if err := putRoles(ctx, e.st, testPolicy, []herd.Role{role, w}); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	e.write(t, func(tx store.Tx) error {
		return errors.Join(tx.PutHost(herd.Host{Name: "h", HeartbeatAt: now}), tx.SetLease("h", now.Add(time.Hour)),
			tx.PutPlacement(herd.Placement{Role: "p", Index: 0, Host: "h", AssignedAt: now}))
	})
	e.sl.Reconcile(ctx)
	identity := func(name string) herd.Identity {
		s, err := e.st.Session(ctx, name)
		if err != nil || s.State != herd.StateRunning {
			t.Fatalf("expected %s running, got %+v (%v)", name, s, err)
		}
		inc, err := e.st.Incarnation(ctx, s.Incarnation)
		if err != nil {
			t.Fatal(err)
		}
		return inc.Identity
	}
	p, other := identity("p-0"), identity("w-0")

	lease.held.Store(false)
	if n := e.sl.Fence(ctx, 500*time.Millisecond); n != 1 {
		t.Fatalf("[fence] expected one agent stopped, got %d", n)
	}
	if axis := proc.Real().Check(p, p.BootID); axis != herd.Dead {
		t.Errorf("[fence] expected the failover agent dead, got %s", axis)
	}
	if axis := proc.Real().Check(other, other.BootID); axis != herd.Alive {
		t.Errorf("[fence] expected the other role's agent alive, got %s", axis)
	}
	s, _ := e.st.Session(ctx, "p-0")
	if s.State != herd.StateStopped || s.Exit == nil || s.Exit.Reason != herd.ReasonFenced {
		t.Errorf("[fence] expected p-0 stopped, reason fenced, got %s %+v", s.State, s.Exit)
	}
	if r, _ := e.st.Role(ctx, "p"); r.Replicas != 1 {
		t.Errorf("[fence] expected the replica kept, got %d", r.Replicas)
	}
	if n := e.sl.FencedPending(); n != 0 {
		t.Errorf("[fence] expected the stop recorded, %d pending", n)
	}
	if n := e.sl.Fence(ctx, 500*time.Millisecond); n != 0 {
		t.Errorf("[fence again] expected nothing left to stop, got %d", n)
	}
	// While fenced, the slot is not launched again; a resume asked for
	// says why.
	e.sl.Reconcile(ctx)
	if s, _ := e.st.Session(ctx, "p-0"); s.State != herd.StateStopped {
		t.Errorf("[fenced] expected p-0 to stay stopped, got %s", s.State)
	}
	if err := e.sl.Resume(ctx, "p-0"); !errors.Is(err, errFenced) {
		t.Errorf("[resume while fenced] expected the fence named, got %v", err)
	}
}

// reconcileAction is the reconciler's launch of role's slot idx.
func reconcileAction(role string, idx int) reconcile.Action {
	return reconcile.Action{Kind: reconcile.Launch, Role: role, Session: herd.SessionName(role, idx), Index: idx}
}
