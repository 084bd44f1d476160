package postgres

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"herd"
	"herd/internal/store"
	"herd/internal/store/pgtest"
	"herd/internal/store/storetest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// testCtx is a bounded context for one test.
func testCtx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return c
}

// openDSN opens a store on dsn and closes it when the test ends.
func openDSN(t testing.TB, dsn string) *Store {
	t.Helper()
	s, err := Open(testCtx(t), dsn)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		return openDSN(t, pgtest.DSN(t))
	})
}

// TestTwoStoresOneStop races the stop path's compare-and-set from two
// Stores (two connection pools, as two daemons on two hosts would): exactly
// one transaction may see the incarnation current and write the stop.
func TestTwoStoresOneStop(t *testing.T) {
	dsn := pgtest.DSN(t)
	stores := []*Store{openDSN(t, dsn), openDSN(t, dsn)}
	ctx := testCtx(t)
	now := time.Now().UTC()
	err := stores[0].Update(ctx, func(tx store.Tx) error {
		return tx.PutSession(herd.Session{Name: "w-0", Role: "w", Host: "b",
			State: herd.StateRunning, Incarnation: "inc-1", StateSince: now})
	})
	if err != nil {
		t.Fatalf("seed: %v", err)
	}
	const perStore = 10
	var (
		wg    sync.WaitGroup
		wins  atomic.Int64
		errs  = make([]error, 2*perStore)
		start = make(chan struct{})
	)
	for i := range 2 * perStore {
		s := stores[i%2]
		wg.Go(func() {
			<-start
			won := false
			errs[i] = s.Update(ctx, func(tx store.Tx) error {
				won = false // fn may run again after a conflict
				cur, err := tx.Session("w-0")
				if err != nil {
					return err
				}
				if cur.State == herd.StateStopped || cur.Incarnation != "inc-1" {
					return nil // compare-and-set lost
				}
				cur.State, cur.StateSince = herd.StateStopped, time.Now().UTC()
				if err := tx.PutSession(cur); err != nil {
					return err
				}
				won = true
				return tx.AppendEvent(&herd.Event{Time: cur.StateSince, Host: "a", Session: "w-0",
					Incarnation: "inc-1", Kind: herd.EventStopped, Reason: herd.ReasonUser})
			})
			if errs[i] == nil && won {
				wins.Add(1)
			}
		})
	}
	close(start)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("[racing stops] unexpected errors: %v", err)
	}
	if got := wins.Load(); got != 1 {
		t.Errorf("[racing stops] expected exactly 1 winner, got %d", got)
	}
	for i, s := range stores {
		err := s.View(ctx, func(tx store.Tx) error {
			evs, err := tx.Events(store.EventFilter{Kind: herd.EventStopped})
			if err != nil {
				return err
			}
			if len(evs) != 1 {
				t.Errorf("[store %d] expected 1 stopped event, got %d", i, len(evs))
			}
			return nil
		})
		if err != nil {
			t.Fatalf("view: %v", err)
		}
	}
}

// TestTwoStoresNoLostUpdate has two Stores increment one counter with
// read-modify-write transactions: serializable updates must not lose one.
func TestTwoStoresNoLostUpdate(t *testing.T) {
	dsn := pgtest.DSN(t)
	stores := []*Store{openDSN(t, dsn), openDSN(t, dsn)}
	ctx := testCtx(t)
	const perWorker, workersPerStore = 15, 3
	var wg sync.WaitGroup
	errs := make([]error, len(stores)*workersPerStore)
	start := make(chan struct{})
	for i := range errs {
		s := stores[i%len(stores)]
		wg.Go(func() {
			<-start
			for range perWorker {
				err := s.Update(ctx, func(tx store.Tx) error {
					v, _, err := tx.KV("counter")
					if err != nil {
						return err
					}
					n := 0
					if v != "" {
						if n, err = strconv.Atoi(v); err != nil {
							return err
						}
					}
					runtime.Gosched() // let the others run between the read and the write
					return tx.PutKV("counter", strconv.Itoa(n+1))
				})
				if err != nil {
					errs[i] = err
					return
				}
			}
		})
	}
	close(start)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("update: %v", err)
	}
	var got string
	if err := stores[1].View(ctx, func(tx store.Tx) error {
		var err error
		got, _, err = tx.KV("counter")
		return err
	}); err != nil {
		t.Fatalf("view: %v", err)
	}
	if want := strconv.Itoa(len(errs) * perWorker); got != want {
		t.Errorf("[counter] expected %s, got %s", want, got)
	}
}

// TestFollowerMissesNoEvent appends events from two Stores while a reader
// follows the log by id, as `herd events -f` does: every event must reach
// the reader, although ids are handed out before the commits that make them
// visible.
func TestFollowerMissesNoEvent(t *testing.T) {
	dsn := pgtest.DSN(t)
	stores := []*Store{openDSN(t, dsn), openDSN(t, dsn)}
	reader := openDSN(t, dsn)
	ctx := testCtx(t)
	const perWriter, writers = 40, 4
	var (
		wg      sync.WaitGroup
		errs    = make([]error, writers)
		stop    = make(chan struct{})
		written atomic.Int64
	)
	for i := range writers {
		s := stores[i%len(stores)]
		wg.Go(func() {
			for j := range perWriter {
				errs[i] = s.Update(ctx, func(tx store.Tx) error {
					e := herd.Event{Time: time.Now(), Session: fmt.Sprint("w-", i), Kind: herd.EventActivity}
					if err := tx.AppendEvent(&e); err != nil {
						return err
					}
					// Work between the insert and the commit widens the window
					// in which a greater id could commit first.
					return tx.PutKV(fmt.Sprint("w-", i), strconv.Itoa(j))
				})
				if errs[i] != nil {
					return
				}
				written.Add(1)
			}
		})
	}
	var (
		seen   []int64
		last   int64
		polls  int
		follow = func() error {
			return reader.View(ctx, func(tx store.Tx) error {
				evs, err := tx.Events(store.EventFilter{AfterID: last})
				for _, e := range evs {
					seen = append(seen, e.ID)
					last = e.ID
				}
				return err
			})
		}
	)
	go func() { wg.Wait(); close(stop) }()
	for done := false; !done; polls++ {
		select {
		case <-stop:
			done = true
		default:
		}
		if err := follow(); err != nil {
			t.Fatalf("follow: %v", err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("append: %v", err)
	}
	var all []int64
	err := reader.View(ctx, func(tx store.Tx) error {
		evs, err := tx.Events(store.EventFilter{})
		for _, e := range evs {
			all = append(all, e.ID)
		}
		return err
	})
	if err != nil {
		t.Fatalf("view: %v", err)
	}
	if len(all) != writers*perWriter {
		t.Fatalf("[log] expected %d events, got %d", writers*perWriter, len(all))
	}
	if d := cmp.Diff(all, seen); d != "" {
		t.Errorf("[follower after %d polls] missed events (-all +seen):\n%s", polls, d)
	}
}
