package hosts

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"herd"
	"herd/internal/store"
)

func TestStatus(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	cases := []struct {
		name      string
		heartbeat time.Time
		want      string
	}{
		{"just now", now, Up},
		{"at the timeout", now.Add(-30 * time.Second), Up},
		{"past the timeout", now.Add(-30*time.Second - time.Nanosecond), Stale},
		{"never", time.Time{}, Stale},
		{"clock ahead", now.Add(time.Minute), Up},
	}
	for _, c := range cases {
		if got := Status(herd.Host{Name: "h", HeartbeatAt: c.heartbeat}, now, 30*time.Second); got != c.want {
			t.Errorf("[%s] expected %s, got %s", c.name, c.want, got)
		}
	}
}

func TestInterval(t *testing.T) {
	cases := []struct{ timeout, want time.Duration }{
		{30 * time.Second, 10 * time.Second},
		{3 * time.Second, time.Second},
		{time.Second, time.Second},
	}
	for _, c := range cases {
		if got := Interval(c.timeout); got != c.want {
			t.Errorf("[timeout %v] expected %v, got %v", c.timeout, c.want, got)
		}
	}
}

// fakeStore records the hosts written; while fail > 0 writes fail.
type fakeStore struct {
	mu     sync.Mutex // guards the fields below
	puts   []herd.Host
	failed int
	fail   int
}

var _ store.Store = (*fakeStore)(nil)

func (f *fakeStore) Update(_ context.Context, fn func(store.Tx) error) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail > 0 {
		f.fail--
		f.failed++
		return errors.New("store down")
	}
	return fn(hostTx{f: f})
}

func (f *fakeStore) View(context.Context, func(store.Tx) error) error { return errors.New("unused") }

func (f *fakeStore) Close() error { return nil }

// hostTx implements PutHost; any other method of the nil store.Tx panics.
type hostTx struct {
	store.Tx
	f *fakeStore
}

func (t hostTx) PutHost(h herd.Host) error {
	t.f.puts = append(t.f.puts, h)
	return nil
}

func TestHeartbeat(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeStore{}
		hb, err := NewHeartbeat(f, herd.Host{Name: "a", BootID: "b1", Version: "v1"}, 10*time.Second,
			slog.New(slog.NewTextHandler(io.Discard, nil)))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		start := time.Now().UTC()
		done := make(chan error)
		go func() { done <- hb.Run(ctx) }()

		time.Sleep(25 * time.Second) // fake time: beats at 0s, 10s, 20s
		synctest.Wait()
		f.mu.Lock()
		f.fail = 1 // the beat at 30s fails and is logged; 40s succeeds
		f.mu.Unlock()
		time.Sleep(20 * time.Second)
		synctest.Wait()
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("run: %v", err)
		}

		f.mu.Lock()
		defer f.mu.Unlock()
		var beats []time.Duration
		for _, h := range f.puts {
			if h.Name != "a" || h.BootID != "b1" || h.Version != "v1" || !h.StartedAt.Equal(start) {
				t.Errorf("[row] expected host a, boot b1, v1, started %v, got %+v", start, h)
			}
			beats = append(beats, h.HeartbeatAt.Sub(start))
		}
		want := []time.Duration{0, 10 * time.Second, 20 * time.Second, 40 * time.Second}
		if len(beats) != len(want) {
			t.Fatalf("[beats] expected %v, got %v", want, beats)
		}
		for i := range want {
			if beats[i] != want[i] {
				t.Errorf("[beat %d] expected at %v, got %v", i, want[i], beats[i])
			}
		}
		if f.failed != 1 {
			t.Errorf("[failed beats] expected 1, got %d", f.failed)
		}
	})
}

func TestHeartbeatFirstWriteFails(t *testing.T) {
	f := &fakeStore{fail: 1}
	hb, err := NewHeartbeat(f, herd.Host{Name: "a"}, time.Second, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if err := hb.Run(t.Context()); err == nil {
		t.Errorf("[first write fails] expected Run to return the error, got nil")
	}
}

func TestNewHeartbeatRejects(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if _, err := NewHeartbeat(&fakeStore{}, herd.Host{}, time.Second, log); err == nil {
		t.Errorf("[empty name] expected an error, got nil")
	}
	if _, err := NewHeartbeat(&fakeStore{}, herd.Host{Name: "a"}, 0, log); err == nil {
		t.Errorf("[zero interval] expected an error, got nil")
	}
}
