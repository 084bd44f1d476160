package storetest

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"herd"
	"herd/internal/store"
)

// fullCommand is a command with every field set but the id.
func fullCommand(host, kind string) herd.Command {
	return herd.Command{
		Host: host, From: "ws-1 ünï", Kind: kind, Session: "worker-3",
		Args:  map[string]string{"text": "run the tests\n-v 'quoted' \"x\"", "enter": "true"},
		State: herd.CommandPending, Result: "", CreatedAt: at(0),
	}
}

func testCommandRoundTrip(t *testing.T, s store.Store) {
	full := fullCommand("b", herd.CommandInject)
	bare := herd.Command{Host: "b", Kind: herd.CommandStop, Session: "w-0", State: herd.CommandPending}
	update(t, s, func(tx store.Tx) error {
		if err := tx.AddCommand(&full); err != nil {
			return err
		}
		return tx.AddCommand(&bare)
	})
	if full.ID == 0 || bare.ID <= full.ID {
		t.Fatalf("expected increasing ids, got %d then %d", full.ID, bare.ID)
	}
	// The owner claims and finishes it.
	done := full
	done.State, done.ClaimedAt, done.DoneAt, done.Result = herd.CommandDone, at(1), at(2), "13 bytes sent"
	update(t, s, func(tx store.Tx) error { return tx.PutCommand(done) })
	view(t, s, func(tx store.Tx) error {
		got, err := tx.Command(full.ID)
		if err != nil {
			return err
		}
		diff(t, "full", done, got)
		checkUTC(t, "full", &got.CreatedAt, &got.ClaimedAt, &got.DoneAt)
		got, err = tx.Command(bare.ID)
		if err != nil {
			return err
		}
		bare.Args = got.Args // nil or empty: either reads as no args
		diff(t, "bare", bare, got)
		if len(got.Args) != 0 {
			t.Errorf("[bare] expected no args, got %v", got.Args)
		}
		if _, err := tx.Command(bare.ID + 100); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("[missing] expected ErrNotFound, got %v", err)
		}
		return nil
	})
	err := s.Update(ctx(t), func(tx store.Tx) error { return tx.PutCommand(herd.Command{ID: bare.ID + 100, Host: "b"}) })
	if !errors.Is(err, store.ErrNotFound) {
		t.Errorf("[put missing] expected ErrNotFound, got %v", err)
	}
	for _, c := range []herd.Command{{Kind: "stop", Session: "w-0"}, {Host: "b", Session: "w-0"}, {Host: "b", Kind: "stop"}} {
		err := s.Update(ctx(t), func(tx store.Tx) error { return tx.AddCommand(&c) })
		if err == nil {
			t.Errorf("[incomplete %+v] expected an error", c)
		}
	}
}

func testCommandsOnHost(t *testing.T, s store.Store) {
	var ids []int64
	update(t, s, func(tx store.Tx) error {
		for _, c := range []herd.Command{
			fullCommand("b", herd.CommandStop), fullCommand("a", herd.CommandStop),
			fullCommand("b", herd.CommandResume), fullCommand("B", herd.CommandStop),
		} {
			if err := tx.AddCommand(&c); err != nil {
				return err
			}
			ids = append(ids, c.ID)
		}
		c, err := tx.Command(ids[0])
		if err != nil {
			return err
		}
		c.State = herd.CommandClaimed
		return tx.PutCommand(c)
	})
	view(t, s, func(tx store.Tx) error {
		for _, tc := range []struct {
			host, state string
			want        []int64
		}{
			{"b", herd.CommandPending, []int64{ids[2]}},
			{"b", herd.CommandClaimed, []int64{ids[0]}},
			{"a", herd.CommandPending, []int64{ids[1]}},
			{"B", herd.CommandPending, []int64{ids[3]}},
			{"c", herd.CommandPending, nil},
		} {
			cs, err := tx.CommandsOnHost(tc.host, tc.state)
			if err != nil {
				return err
			}
			var got []int64
			for _, c := range cs {
				got = append(got, c.ID)
			}
			diff(t, tc.host+" "+tc.state, tc.want, got)
		}
		return nil
	})
}

// ClaimCommands races claimers of one host's pending commands from every
// store: each command is claimed by exactly one of them.
func ClaimCommands(t *testing.T, stores ...store.Store) {
	t.Helper()
	const commands, claimers = 10, 8
	update(t, stores[0], func(tx store.Tx) error {
		for range commands {
			c := fullCommand("b", herd.CommandStop)
			if err := tx.AddCommand(&c); err != nil {
				return err
			}
		}
		return nil
	})
	var (
		wg      sync.WaitGroup
		claimed atomic.Int64
		mu      sync.Mutex // guards byID
		byID    = map[int64]int{}
		start   = make(chan struct{})
	)
	for i := range claimers {
		s := stores[i%len(stores)]
		wg.Go(func() {
			<-start
			var mine []int64
			err := s.Update(ctx(t), func(tx store.Tx) error {
				mine = mine[:0] // fn may run again after a conflict
				pending, err := tx.CommandsOnHost("b", herd.CommandPending)
				if err != nil {
					return err
				}
				for _, c := range pending {
					c.State, c.ClaimedAt = herd.CommandClaimed, at(i)
					if err := tx.PutCommand(c); err != nil {
						return err
					}
					mine = append(mine, c.ID)
				}
				return nil
			})
			if err != nil {
				t.Errorf("[claimer %d] %v", i, err)
				return
			}
			claimed.Add(int64(len(mine)))
			mu.Lock()
			for _, id := range mine {
				byID[id]++
			}
			mu.Unlock()
		})
	}
	close(start)
	wg.Wait()
	if claimed.Load() != commands || len(byID) != commands {
		t.Errorf("[claims] expected each of %d commands claimed once, got %d claims of %d commands", commands, claimed.Load(), len(byID))
	}
}

func testClaimCommands(t *testing.T, s store.Store) { ClaimCommands(t, s) }
