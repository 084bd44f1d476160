package postgres

import (
	"context"
	"errors"
	"testing"
	"time"

	"herd"
	"herd/internal/store"
	"herd/internal/store/pgtest"
)

// TestListen: another Store's committed event, command, placement and
// role reach a listener, in commit order, once per transaction; a rolled-back event
// sends nothing; the listening connection stays within MaxConns.
func TestListen(t *testing.T) {
	dsn := pgtest.DSN(t)
	a, b := openDSN(t, dsn), openDSN(t, dsn)
	type note struct{ channel, payload string }
	notes := make(chan note, 16)
	ready := make(chan struct{})
	ctx, cancel := context.WithCancel(testCtx(t))
	done := make(chan error, 1)
	go func() { done <- a.Listen(ctx, func(ch, p string) { notes <- note{ch, p} }) }()
	// LISTEN is in place once a notification sent after it arrives: probe
	// with commands for host "probe" until one comes through. Probes still
	// in transit are skipped below.
	probe := note{store.ChannelCommands, "probe"}
	go func() {
		defer close(ready)
		for {
			select {
			case n := <-notes:
				if n != probe {
					t.Errorf("[probing] expected only probes, got %+v", n)
				}
				return
			case <-ctx.Done():
				return
			case <-time.After(50 * time.Millisecond):
				_ = b.Update(ctx, func(tx store.Tx) error {
					return tx.AddCommand(&herd.Command{Host: "probe", Kind: herd.CommandStop, Session: "w-0", State: herd.CommandPending})
				})
			}
		}
	}()
	select {
	case <-ready:
	case <-time.After(20 * time.Second):
		t.Fatal("no notification within 20s")
	}

	// A rolled-back event, then a committed command, then two events in one
	// transaction: the command's notification comes first, the two events
	// make one.
	rollback := errors.New("roll back")
	err := b.Update(ctx, func(tx store.Tx) error {
		if err := tx.AppendEvent(&herd.Event{Time: time.Now(), Host: "b", Session: "w-0", Kind: herd.EventStopped}); err != nil {
			return err
		}
		return rollback
	})
	if !errors.Is(err, rollback) {
		t.Fatalf("expected the rollback, got %v", err)
	}
	if err := b.Update(ctx, func(tx store.Tx) error {
		return tx.AddCommand(&herd.Command{Host: "host-a", From: "b", Kind: herd.CommandStop, Session: "w-0", State: herd.CommandPending})
	}); err != nil {
		t.Fatal(err)
	}
	if err := b.Update(ctx, func(tx store.Tx) error {
		for range 2 {
			if err := tx.AppendEvent(&herd.Event{Time: time.Now(), Host: "b", Session: "w-0", Kind: herd.EventSpawned}); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// A placement put: every daemon hears of it, with the slot's host.
	if err := b.Update(ctx, func(tx store.Tx) error {
		return tx.PutPlacement(herd.Placement{Role: "w", Index: 0, Host: "host-b", AssignedAt: time.Now()})
	}); err != nil {
		t.Fatal(err)
	}
	// A role written: the leader hears of it, with no host.
	if err := b.Update(ctx, func(tx store.Tx) error {
		return tx.PutRole(herd.Role{Name: "w", Replicas: 1, Command: []string{"sleep", "1"}, Workdir: "/", Runtime: herd.RuntimeExec, Spread: true})
	}); err != nil {
		t.Fatal(err)
	}
	want := []note{{store.ChannelCommands, "host-a"}, {store.ChannelEvents, ""}, {store.ChannelPlacements, "host-b"}, {store.ChannelPlacements, ""}}
	for i, w := range want {
		select {
		case got := <-notes:
			for got == probe {
				got = <-notes
			}
			if got != w {
				t.Errorf("[notification %d] expected %+v, got %+v", i, w, got)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("[notification %d] expected %+v, got none", i, w)
		}
	}
	if n := a.db.Stats().OpenConnections; n > MaxConns {
		t.Errorf("expected at most %d connections with a listener, got %d", MaxConns, n)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("expected Listen to end cleanly with its context, got %v", err)
	}
}
