package storetest

import (
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"herd"
	"herd/internal/store"
)

// The checks below take several Stores on one database (two daemons, or
// two hosts) and race their transactions; with one Store they race its
// connections. The suite runs them with one Store; a backend's own tests
// call them with several.

func testRaceStops(t *testing.T, s store.Store)   { RaceStops(t, s) }
func testRaceCounter(t *testing.T, s store.Store) { RaceCounter(t, s) }
func testFollowLog(t *testing.T, s store.Store)   { FollowLog(t, s, s) }

// RaceStops races the stop path's compare-and-set from every store: of many
// transactions that read the session, check its incarnation and write the
// stop with its event, exactly one may win.
func RaceStops(t *testing.T, stores ...store.Store) {
	t.Helper()
	c := ctx(t)
	update(t, stores[0], func(tx store.Tx) error {
		return tx.PutSession(herd.Session{Name: "w-0", Role: "w", Host: "b",
			State: herd.StateRunning, Incarnation: "inc-1", StateSince: at(0)})
	})
	const racers = 20
	var (
		wg    sync.WaitGroup
		wins  atomic.Int64
		errs  = make([]error, racers)
		start = make(chan struct{})
	)
	for i := range racers {
		s := stores[i%len(stores)]
		wg.Go(func() {
			<-start
			won := false
			errs[i] = s.Update(c, func(tx store.Tx) error {
				won = false // fn may run again after a conflict
				cur, err := tx.Session("w-0")
				if err != nil {
					return err
				}
				if cur.State == herd.StateStopped || cur.Incarnation != "inc-1" {
					return nil // compare-and-set lost
				}
				cur.State, cur.StateSince = herd.StateStopped, at(i)
				if err := tx.PutSession(cur); err != nil {
					return err
				}
				won = true
				return tx.AppendEvent(&herd.Event{Time: at(i), Host: "a", Session: "w-0",
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
		view(t, s, func(tx store.Tx) error {
			evs, err := tx.Events(store.EventFilter{Kind: herd.EventStopped})
			if err == nil && len(evs) != 1 {
				t.Errorf("[store %d] expected 1 stopped event, got %d", i, len(evs))
			}
			return err
		})
	}
}

// RaceCounter has several writers on every store increment one counter
// with read-modify-write transactions: none may be lost.
func RaceCounter(t *testing.T, stores ...store.Store) {
	t.Helper()
	c := ctx(t)
	const perWriter, writersPerStore = 15, 3
	var wg sync.WaitGroup
	errs := make([]error, len(stores)*writersPerStore)
	start := make(chan struct{})
	for i := range errs {
		s := stores[i%len(stores)]
		wg.Go(func() {
			<-start
			for range perWriter {
				err := s.Update(c, func(tx store.Tx) error {
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
		t.Fatalf("[counter] unexpected errors: %v", err)
	}
	for i, s := range stores {
		kvIs(t, s, fmt.Sprint("counter seen by store ", i), "counter", strconv.Itoa(len(errs)*perWriter), true)
	}
}

// FollowLog appends events from every writer store while reader follows the
// log by id, as `herd events -f` does: every event must reach the reader,
// in id order. (A backend handing out ids before its commits must make
// them visible in id order.)
func FollowLog(t *testing.T, reader store.Store, writers ...store.Store) {
	t.Helper()
	c := ctx(t)
	const perWriter, writersPerStore = 40, 2
	var (
		wg   sync.WaitGroup
		errs = make([]error, len(writers)*writersPerStore)
	)
	for i := range errs {
		s := writers[i%len(writers)]
		wg.Go(func() {
			for j := range perWriter {
				errs[i] = s.Update(c, func(tx store.Tx) error {
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
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	var (
		seen  []int64
		last  int64
		polls int
	)
	for running := true; running; polls++ {
		select {
		case <-done:
			running = false // one more poll after the last commit
		default:
		}
		view(t, reader, func(tx store.Tx) error {
			evs, err := tx.Events(store.EventFilter{AfterID: last})
			for _, e := range evs {
				seen = append(seen, e.ID)
				last = e.ID
			}
			return err
		})
	}
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("[append] unexpected errors: %v", err)
	}
	var all []int64
	view(t, reader, func(tx store.Tx) error {
		evs, err := tx.Events(store.EventFilter{})
		for _, e := range evs {
			all = append(all, e.ID)
		}
		return err
	})
	if len(all) != len(errs)*perWriter {
		t.Fatalf("[log] expected %d events, got %d", len(errs)*perWriter, len(all))
	}
	if d := cmp.Diff(all, seen); d != "" {
		t.Errorf("[follower after %d polls] missed events (-all +seen):\n%s", polls, d)
	}
}
