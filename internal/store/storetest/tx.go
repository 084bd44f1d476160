package storetest

import (
	"errors"
	"testing"

	"herd"
	"herd/internal/store"
)

// errRollback is the error fn returns to force a rollback.
var errRollback = errors.New("storetest: rollback please")

// writeEverything writes one row of every kind.
func writeEverything(tx store.Tx) error {
	if err := tx.PutRole(fullRole("r")); err != nil {
		return err
	}
	if err := tx.PutSession(fullSession("r-0", "r")); err != nil {
		return err
	}
	if err := tx.PutIncarnation(openIncarnation("i", "r-0", "h", at(0))); err != nil {
		return err
	}
	if err := tx.AppendEvent(&herd.Event{Time: at(0), Session: "r-0", Kind: herd.EventSpawned}); err != nil {
		return err
	}
	return tx.PutKV("k", "v")
}

// checkEmpty fails the test if anything writeEverything writes is present.
func checkEmpty(t *testing.T, s store.Store, what string) {
	t.Helper()
	view(t, s, func(tx store.Tx) error {
		if _, err := tx.Role("r"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("[%s] expected role absent, got %v", what, err)
		}
		if _, err := tx.Session("r-0"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("[%s] expected session absent, got %v", what, err)
		} else if got, want := err.Error(), "session r-0 not found"; got != want {
			// Users read this text: it names the row once, never the backend.
			t.Errorf("[%s] expected error %q, got %q", what, want, got)
		}
		if _, err := tx.Incarnation("i"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("[%s] expected incarnation absent, got %v", what, err)
		}
		if ev, err := tx.Events(store.EventFilter{}); err != nil || len(ev) != 0 {
			t.Errorf("[%s] expected no events, got %v, %v", what, ev, err)
		}
		if _, ok, err := tx.KV("k"); err != nil || ok {
			t.Errorf("[%s] expected kv absent, got %v, %v", what, ok, err)
		}
		return nil
	})
}

func testUpdateRollback(t *testing.T, s store.Store) {
	err := s.Update(ctx(t), func(tx store.Tx) error {
		if err := writeEverything(tx); err != nil {
			return err
		}
		return errRollback
	})
	if !errors.Is(err, errRollback) {
		t.Fatalf("[update error] expected fn's error, got %v", err)
	}
	checkEmpty(t, s, "after rollback")
	// The store is usable afterwards.
	update(t, s, writeEverything)
	kvIs(t, s, "after a later commit", "k", "v", true)
}

func testUpdateRollbackOnPanic(t *testing.T, s store.Store) {
	func() {
		defer func() {
			if r := recover(); r != "storetest: boom" {
				t.Errorf("[panic] expected the panic to propagate, got %v", r)
			}
		}()
		_ = s.Update(ctx(t), func(tx store.Tx) error {
			if err := writeEverything(tx); err != nil {
				return err
			}
			panic("storetest: boom")
		})
	}()
	checkEmpty(t, s, "after panic")
	// The panicking transaction must not keep the write lock.
	update(t, s, writeEverything)
	kvIs(t, s, "after a later commit", "k", "v", true)
}

func testWriteVisibleInLaterView(t *testing.T, s store.Store) {
	update(t, s, writeEverything)
	view(t, s, func(tx store.Tx) error {
		got, err := tx.Session("r-0")
		if err != nil {
			return err
		}
		diff(t, "session", fullSession("r-0", "r"), got)
		if _, err := tx.Role("r"); err != nil {
			t.Errorf("[role] expected it visible, got %v", err)
		}
		if _, err := tx.Incarnation("i"); err != nil {
			t.Errorf("[incarnation] expected it visible, got %v", err)
		}
		if ev, err := tx.Events(store.EventFilter{}); err != nil || len(ev) != 1 {
			t.Errorf("[events] expected 1, got %v, %v", ev, err)
		}
		return nil
	})
	kvIs(t, s, "kv", "k", "v", true)
}

func testViewIsReadOnly(t *testing.T, s store.Store) {
	err := s.View(ctx(t), func(tx store.Tx) error { return writeEverything(tx) })
	if err == nil {
		t.Errorf("[write in view] expected an error, got nil")
	}
	checkEmpty(t, s, "after write in view")
	verr := s.View(ctx(t), func(tx store.Tx) error { return errRollback })
	if !errors.Is(verr, errRollback) {
		t.Errorf("[view error] expected fn's error, got %v", verr)
	}
}
