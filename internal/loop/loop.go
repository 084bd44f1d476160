// Package loop holds the daemon's repeated shapes, written once: the
// ticker-plus-trigger loop that survives a panic, and the bounded fan-out.
package loop

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"
)

// Loop runs a tick function on a clock of its own.
type Loop struct {
	// Name names the loop in logs.
	Name string
	// Log receives recovered panics; slog.Default() when nil.
	Log *slog.Logger
	// Every is the period between the starts of two ticks. A tick that
	// overruns it is followed by the next one at once (a ticker's rate,
	// never a pile-up).
	Every time.Duration
	// First is the delay before the first tick (0: at once).
	First time.Duration
	// Trigger, when set, runs a tick at once each time it receives.
	Trigger <-chan struct{}
}

// Run calls tick until ctx is done. tick may return a shorter wait before
// the next tick, counted from its return (0 keeps Every, counted from its
// start). A panic in tick is logged
// with its stack and the loop goes on.
func (l Loop) Run(ctx context.Context, tick func(ctx context.Context) time.Duration) {
	timer := time.NewTimer(l.First)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		case <-l.Trigger:
		}
		start := time.Now()
		next := l.safe(ctx, tick)
		wait := max(time.Until(start.Add(l.Every)), 0)
		if next > 0 && next < wait {
			wait = next // measured from the tick's end: a deadline it computed
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		timer.Reset(wait)
	}
}

// safe runs one tick, recovering a panic.
func (l Loop) safe(ctx context.Context, tick func(context.Context) time.Duration) (next time.Duration) {
	defer func() {
		if r := recover(); r != nil {
			Recovered(l.Log, l.Name, r)
			next = 0
		}
	}()
	return tick(ctx)
}

// Recovered logs a recovered panic of the named goroutine with its stack.
func Recovered(log *slog.Logger, name string, r any) {
	if log == nil {
		log = slog.Default()
	}
	log.Error("recovered from a panic; going on", "loop", name, "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
}

// Wake asks a loop to run now without blocking: a trigger already pending
// covers this one.
func Wake(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// Each calls fn for every item with at most limit calls at once, and
// returns when all are done.
func Each[T any](limit int, items []T, fn func(T)) {
	sem := make(chan struct{}, max(1, limit))
	var wg sync.WaitGroup
	for _, it := range items {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			fn(it)
		})
	}
	wg.Wait()
}

// Group runs goroutines that are waited for together; a panic in one is
// logged, not fatal.
type Group struct {
	Log *slog.Logger
	wg  sync.WaitGroup
}

// Go runs fn on a goroutine of the group.
func (g *Group) Go(name string, fn func()) {
	g.wg.Go(func() {
		defer func() {
			if r := recover(); r != nil {
				Recovered(g.Log, name, r)
			}
		}()
		fn()
	})
}

// Wait waits for every goroutine of the group.
func (g *Group) Wait() { g.wg.Wait() }
