package commands

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"herd"
	"herd/internal/store"
	"herd/internal/store/sqlite"
)

func open(t *testing.T) store.Store {
	t.Helper()
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "herd.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// TestSubmitExecuted: a command submitted for host b is executed by b's
// runner, once, and its result (or its error) reaches the submitter.
func TestSubmitExecuted(t *testing.T) {
	st := open(t)
	var ran atomic.Int64
	exec := func(_ context.Context, c herd.Command) (string, error) {
		ran.Add(1)
		if c.Session == "bad-0" {
			return "", errors.New("session bad-0 is not stopped")
		}
		return fmt.Sprintf("%s %s (text %q)", c.Kind, c.Session, c.Args["text"]), nil
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	b := NewRunner(st, "b", exec, 20*time.Millisecond, quiet)
	done := make(chan struct{})
	go func() { b.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	for _, tc := range []struct {
		session, want, wantErr string
	}{
		{"w-0", `inject w-0 (text "hi")`, ""},
		{"bad-0", "", "host b: session bad-0 is not stopped"},
	} {
		res, err := Submit(ctx, st, herd.Command{Host: "b", From: "a", Kind: herd.CommandInject, Session: tc.session,
			Args: map[string]string{"text": "hi"}}, 10*time.Second, 10*time.Millisecond)
		var fe *FailedError
		switch {
		case tc.wantErr == "" && (err != nil || res != tc.want):
			t.Errorf("[%s] expected %q, got %q, %v", tc.session, tc.want, res, err)
		case tc.wantErr != "" && (!errors.As(err, &fe) || err.Error() != tc.wantErr):
			t.Errorf("[%s] expected FailedError %q, got %v", tc.session, tc.wantErr, err)
		}
	}
	if ran.Load() != 2 {
		t.Errorf("expected 2 executions, got %d", ran.Load())
	}
}

// TestSubmitTimeout: a command nobody claims times out naming its host and
// is cancelled, so a runner that comes later never executes it.
func TestSubmitTimeout(t *testing.T) {
	st := open(t)
	_, err := Submit(t.Context(), st, herd.Command{Host: "gone", From: "a", Kind: herd.CommandStop, Session: "w-0"},
		100*time.Millisecond, 10*time.Millisecond)
	var te *TimeoutError
	if !errors.As(err, &te) || te.Host != "gone" || te.Claimed {
		t.Fatalf("expected an unclaimed TimeoutError naming host gone, got %v", err)
	}
	ran := false
	r := NewRunner(st, "gone", func(context.Context, herd.Command) (string, error) { ran = true; return "", nil }, time.Second, quiet)
	if n := r.Round(t.Context()); n != 0 || ran {
		t.Errorf("expected the cancelled command never executed, got %d executed", n)
	}
}

// TestRacingSubmitters: 20 submitters racing stops of one session through
// two runners of the same host (an old daemon and its successor) each get
// one answer, and every command is executed exactly once.
func TestRacingSubmitters(t *testing.T) {
	st := open(t)
	var (
		mu    sync.Mutex // guards seen
		seen  = map[int64]int{}
		first atomic.Bool
	)
	exec := func(_ context.Context, c herd.Command) (string, error) {
		mu.Lock()
		seen[c.ID]++
		mu.Unlock()
		if first.CompareAndSwap(false, true) {
			return "session w-0 stopped", nil
		}
		return "session w-0 already stopped", nil
	}
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	for range 2 {
		r := NewRunner(st, "b", exec, 10*time.Millisecond, quiet)
		wg.Go(func() { r.Run(ctx) })
	}
	defer func() { cancel(); wg.Wait() }()
	results := make([]string, 20)
	var sub sync.WaitGroup
	for i := range results {
		sub.Go(func() {
			res, err := Submit(ctx, st, herd.Command{Host: "b", From: fmt.Sprint("a", i%3), Kind: herd.CommandStop, Session: "w-0"},
				20*time.Second, 10*time.Millisecond)
			if err != nil {
				t.Errorf("[submitter %d] %v", i, err)
			}
			results[i] = res
		})
	}
	sub.Wait()
	stopped := 0
	for _, r := range results {
		if r == "session w-0 stopped" {
			stopped++
		}
	}
	if stopped != 1 || len(seen) != 20 {
		t.Errorf("expected one stop among 20 executed commands, got %d stops, %d commands", stopped, len(seen))
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("[command %d] expected one execution, got %d", id, n)
		}
	}
}

// TestIdleRoundWritesNothing: a round with no pending command for the host
// (one pending for another host) runs no write transaction; one with a
// command claims and executes it.
func TestIdleRoundWritesNothing(t *testing.T) {
	st := open(t)
	wc, ok := st.(store.WriteCounter)
	if !ok {
		t.Fatal("expected the SQLite store to count its writes")
	}
	if err := st.Update(t.Context(), func(tx store.Tx) error {
		return tx.AddCommand(&herd.Command{Host: "a", From: "b", Kind: herd.CommandStop, Session: "w-0", State: herd.CommandPending, CreatedAt: time.Now().UTC()})
	}); err != nil {
		t.Fatal(err)
	}
	var ran atomic.Int64
	r := NewRunner(st, "b", func(context.Context, herd.Command) (string, error) { ran.Add(1); return "ok", nil }, time.Hour, quiet)
	before := wc.Writes()
	if n := r.Round(t.Context()); n != 0 {
		t.Errorf("[no command for b] expected 0 executed, got %d", n)
	}
	if got := wc.Writes() - before; got != 0 {
		t.Errorf("[no command for b] expected no write transaction, got %d", got)
	}
	a := NewRunner(st, "a", func(context.Context, herd.Command) (string, error) { ran.Add(1); return "ok", nil }, time.Hour, quiet)
	if n := a.Round(t.Context()); n != 1 || ran.Load() != 1 {
		t.Errorf("[a command for a] expected 1 executed, got %d (ran %d)", n, ran.Load())
	}
}

// TestExecTimeout: a command may ask for more than ExecTimeout (a
// rollout, a long grace period), up to MaxExecTimeout; never for less.
func TestExecTimeout(t *testing.T) {
	for _, tc := range []struct {
		arg  string
		want time.Duration
	}{
		{"", ExecTimeout},
		{"soon", ExecTimeout},
		{"1s", ExecTimeout},
		{"1h", time.Hour},
		{"100h", MaxExecTimeout},
	} {
		c := herd.Command{Args: map[string]string{ArgExecTimeout: tc.arg}}
		if got := execTimeout(c); got != tc.want {
			t.Errorf("[%q] expected %v … got %v", tc.arg, tc.want, got)
		}
	}
}
