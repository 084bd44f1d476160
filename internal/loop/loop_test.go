package loop

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

func TestLoopTicksAndTriggers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		trigger := make(chan struct{}, 1)
		var ticks []time.Duration
		start := time.Now()
		done := make(chan struct{})
		go func() {
			defer close(done)
			Loop{Name: "t", Every: time.Second, Trigger: trigger}.Run(ctx, func(context.Context) time.Duration {
				ticks = append(ticks, time.Since(start))
				return 0
			})
		}()
		time.Sleep(2500 * time.Millisecond)
		Wake(trigger)
		synctest.Wait()
		time.Sleep(time.Second)
		cancel()
		<-done
		want := []time.Duration{0, time.Second, 2 * time.Second, 2500 * time.Millisecond, 3500 * time.Millisecond}
		if len(ticks) != len(want) {
			t.Fatalf("ticks at %v, want %v", ticks, want)
		}
		for i := range want {
			if ticks[i] != want[i] {
				t.Fatalf("tick %d at %v, want %v (all: %v)", i, ticks[i], want[i], ticks)
			}
		}
	})
}

func TestLoopShorterNextAndOverrun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		var ticks []time.Duration
		start := time.Now()
		done := make(chan struct{})
		go func() {
			defer close(done)
			Loop{Name: "t", Every: time.Second, First: 100 * time.Millisecond}.Run(ctx, func(context.Context) time.Duration {
				ticks = append(ticks, time.Since(start))
				switch len(ticks) {
				case 1:
					return 300 * time.Millisecond // a backoff due sooner
				case 2:
					time.Sleep(1500 * time.Millisecond) // overrun
				}
				return 0
			})
		}()
		time.Sleep(3 * time.Second)
		cancel()
		<-done
		want := []time.Duration{100 * time.Millisecond, 400 * time.Millisecond, 1900 * time.Millisecond, 2900 * time.Millisecond}
		if len(ticks) != len(want) {
			t.Fatalf("ticks at %v, want %v", ticks, want)
		}
		for i := range want {
			if ticks[i] != want[i] {
				t.Fatalf("tick %d at %v, want %v (all: %v)", i, ticks[i], want[i], ticks)
			}
		}
	})
}

func TestLoopSurvivesPanic(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var buf bytes.Buffer
		var mu sync.Mutex
		log := slog.New(slog.NewTextHandler(&lockedWriter{&buf, &mu}, nil))
		ctx, cancel := context.WithCancel(context.Background())
		var n atomic.Int32
		done := make(chan struct{})
		go func() {
			defer close(done)
			Loop{Name: "boom", Log: log, Every: time.Second}.Run(ctx, func(context.Context) time.Duration {
				if n.Add(1) == 1 {
					panic("first tick fails")
				}
				return 0
			})
		}()
		time.Sleep(2500 * time.Millisecond)
		cancel()
		<-done
		if got := n.Load(); got != 3 {
			t.Fatalf("ticks = %d, want 3 (the loop goes on after a panic)", got)
		}
		mu.Lock()
		defer mu.Unlock()
		if !strings.Contains(buf.String(), "first tick fails") || !strings.Contains(buf.String(), "loop=boom") {
			t.Fatalf("panic not logged: %s", buf.String())
		}
	})
}

func TestEachBounds(t *testing.T) {
	var cur, peak atomic.Int32
	var sum atomic.Int64
	items := make([]int, 50)
	for i := range items {
		items[i] = i
	}
	Each(4, items, func(i int) {
		c := cur.Add(1)
		for {
			p := peak.Load()
			if c <= p || peak.CompareAndSwap(p, c) {
				break
			}
		}
		time.Sleep(time.Millisecond)
		sum.Add(int64(i))
		cur.Add(-1)
	})
	if peak.Load() > 4 {
		t.Fatalf("peak concurrency %d > 4", peak.Load())
	}
	if sum.Load() != 49*50/2 {
		t.Fatalf("sum = %d: not every item ran", sum.Load())
	}
}

func TestGroupRecovers(t *testing.T) {
	var buf bytes.Buffer
	var mu sync.Mutex
	g := Group{Log: slog.New(slog.NewTextHandler(&lockedWriter{&buf, &mu}, nil))}
	ran := false
	g.Go("bad", func() { panic("oops") })
	g.Go("good", func() { ran = true })
	g.Wait()
	if !ran {
		t.Fatal("a goroutine of the group did not run")
	}
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(buf.String(), "oops") {
		t.Fatalf("panic not logged: %s", buf.String())
	}
}

type lockedWriter struct {
	b  *bytes.Buffer
	mu *sync.Mutex
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

// TestLoopNextCountsFromTickEnd: regression — a wait a tick returns is a
// deadline it computed (a backoff's end): counted from the start of a slow
// tick, it fired early by the tick's length.
func TestLoopNextCountsFromTickEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		var ticks []time.Duration
		start := time.Now()
		done := make(chan struct{})
		go func() {
			defer close(done)
			Loop{Name: "t", Every: time.Second}.Run(ctx, func(context.Context) time.Duration {
				ticks = append(ticks, time.Since(start))
				if len(ticks) == 1 {
					time.Sleep(200 * time.Millisecond) // a slow round
					return 500 * time.Millisecond      // due 500ms after it
				}
				return 0
			})
		}()
		time.Sleep(time.Second)
		cancel()
		<-done
		if len(ticks) < 2 || ticks[1] != 700*time.Millisecond {
			t.Fatalf("expected the second tick 500ms after the first ended (700ms) … got %v", ticks)
		}
	})
}
