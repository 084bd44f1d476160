package storetest

import (
	"errors"
	"strconv"
	"sync"
	"testing"

	"herd/internal/store"
)

// kvIs fails the test unless key holds want (exists reports whether it should).
func kvIs(t *testing.T, s store.Store, what, key, want string, exists bool) {
	t.Helper()
	view(t, s, func(tx store.Tx) error {
		got, ok, err := tx.KV(key)
		if err != nil {
			return err
		}
		if ok != exists || got != want {
			t.Errorf("[%s] expected (%q, %v), got (%q, %v)", what, want, exists, got, ok)
		}
		return nil
	})
}

func testKV(t *testing.T, s store.Store) {
	kvIs(t, s, "missing", "k", "", false)
	update(t, s, func(tx store.Tx) error { return tx.PutKV("k", "v1") })
	kvIs(t, s, "put", "k", "v1", true)
	update(t, s, func(tx store.Tx) error { return tx.PutKV("k", "v2") })
	kvIs(t, s, "overwrite", "k", "v2", true)
	update(t, s, func(tx store.Tx) error { return tx.PutKV("empty", "") })
	kvIs(t, s, "empty value exists", "empty", "", true)
	update(t, s, func(tx store.Tx) error {
		if err := tx.DeleteKV("k"); err != nil {
			return err
		}
		return tx.DeleteKV("never-existed")
	})
	kvIs(t, s, "deleted", "k", "", false)
	kvIs(t, s, "other key untouched", "empty", "", true)
}

func testClaimKVOnce(t *testing.T, s store.Store) {
	claim := func(key, value string) bool {
		t.Helper()
		var ok bool
		update(t, s, func(tx store.Tx) error {
			var err error
			ok, err = tx.ClaimKV(key, value)
			return err
		})
		return ok
	}
	if !claim("boot", "first") {
		t.Errorf("[first claim] expected true, got false")
	}
	if claim("boot", "second") {
		t.Errorf("[second claim] expected false, got true")
	}
	kvIs(t, s, "claimed value", "boot", "first", true)

	update(t, s, func(tx store.Tx) error { return tx.PutKV("set", "by-put") })
	if claim("set", "by-claim") {
		t.Errorf("[claim of a put key] expected false, got true")
	}
	kvIs(t, s, "put value kept", "set", "by-put", true)

	update(t, s, func(tx store.Tx) error { return tx.DeleteKV("boot") })
	if !claim("boot", "again") {
		t.Errorf("[claim after delete] expected true, got false")
	}
}

func testClaimKVConcurrent(t *testing.T, s store.Store) {
	const n = 20
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex // guards the fields below
		wins   []string
		errs   []error
		c      = ctx(t)
		start  = make(chan struct{})
		claim  = "sweep/boot-1"
		values = make([]string, n)
	)
	for i := range n {
		values[i] = strconv.Itoa(i)
		wg.Go(func() {
			<-start
			var ok bool
			err := s.Update(c, func(tx store.Tx) error {
				var err error
				ok, err = tx.ClaimKV(claim, values[i])
				return err
			})
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
			}
			if ok {
				wins = append(wins, values[i])
			}
		})
	}
	close(start)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("[concurrent claims] unexpected errors: %v", err)
	}
	if len(wins) != 1 {
		t.Fatalf("[concurrent claims] expected exactly 1 winner, got %d: %v", len(wins), wins)
	}
	kvIs(t, s, "winner's value", claim, wins[0], true)
}
