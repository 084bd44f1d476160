package takedown

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"herd"
	"herd/internal/loop"
	"herd/internal/store"
)

// Retries of what a stop left behind: the first soon, then doubling, and
// given up after leftoverGiveUp (the reaper's orphan pass takes a herd
// session with no record from there).
const (
	leftoverFirst   = 500 * time.Millisecond
	leftoverMax     = 30 * time.Second
	leftoverGiveUp  = time.Hour
	leftoverTimeout = 10 * time.Second
)

// leftovers queues the incarnations whose stop could not remove all they
// ran in (a tmux session while tmux hung or its listing was unreadable)
// or end all their marked processes, and retries each until it is gone.
// Each is reported in events: left_behind, then removed or abandoned.
type leftovers struct {
	wake chan struct{}

	mu sync.Mutex // guards the fields below
	// q holds, by incarnation id, what is still to remove.
	q map[string]*leftover
}

// errShuttingDown refuses a retry once the caller shuts down.
var errShuttingDown = errors.New("the daemon is shutting down")

// leftover is one incarnation's remains and its retries.
type leftover struct {
	inc   herd.Incarnation
	since time.Time
	tries int
	next  time.Time
	err   error
}

// leaveBehind queues inc for retries after its stop failed to remove
// what it ran in with err, and records a left_behind event.
func (t *Takedown) leaveBehind(inc herd.Incarnation, err error) {
	now := time.Now()
	t.left.mu.Lock()
	if t.left.q == nil {
		t.left.q = map[string]*leftover{}
	}
	_, queued := t.left.q[inc.ID]
	if !queued {
		t.left.q[inc.ID] = &leftover{inc: inc, since: now, next: now.Add(leftoverFirst), err: err}
	}
	t.left.mu.Unlock()
	if queued {
		return
	}
	loop.Wake(t.left.wake)
	t.o.Log.Warn("agent stopped; what it ran in not removed yet; retrying", "session", inc.Session, "err", err)
	t.leftoverEvent(inc, "left_behind",
		fmt.Sprintf("%s runtime of %s not removed by its stop (%v); retrying", inc.RuntimeKind, inc.Session, err),
		map[string]any{"runtime": inc.RuntimeKind, "error": err.Error()})
}

// Run retries the queued leftovers until ctx is done.
func (t *Takedown) Run(ctx context.Context) {
	loop.Loop{Name: "leftovers", Log: t.o.Log, Every: leftoverMax, Trigger: t.left.wake}.Run(ctx, func(ctx context.Context) time.Duration {
		return t.retryLeftovers(ctx)
	})
}

// retryLeftovers tries each leftover that is due once and returns how
// long until the next one is due (0: none queued).
func (t *Takedown) retryLeftovers(ctx context.Context) time.Duration {
	now := time.Now()
	t.left.mu.Lock()
	var due []*leftover
	for _, l := range t.left.q {
		if !l.next.After(now) {
			due = append(due, l)
		}
	}
	t.left.mu.Unlock()
	for _, l := range due {
		if ctx.Err() != nil {
			return 0
		}
		err := t.removeRemains(ctx, l.inc)
		t.left.mu.Lock()
		l.tries++
		giveUp := err != nil && time.Since(l.since) >= leftoverGiveUp
		if err == nil || giveUp {
			delete(t.left.q, l.inc.ID)
		} else {
			l.err = err
			l.next = time.Now().Add(min(leftoverFirst<<min(l.tries, 10), leftoverMax))
		}
		tries, since := l.tries, l.since
		t.left.mu.Unlock()
		data := map[string]any{"runtime": l.inc.RuntimeKind, "tries": tries, "after": time.Since(since).Round(time.Millisecond).String()}
		switch {
		case err == nil:
			t.o.Log.Info("what a stop left behind is removed", "session", l.inc.Session, "tries", tries)
			t.leftoverEvent(l.inc, "removed", fmt.Sprintf("what %s ran in removed on retry %d", l.inc.Session, tries), data)
		case giveUp:
			data["error"] = err.Error()
			t.o.Log.Warn("what a stop left behind could not be removed; left to the reaper", "session", l.inc.Session, "err", err)
			t.leftoverEvent(l.inc, "abandoned", fmt.Sprintf("what %s ran in could not be removed after %d tries (%v); left to the reaper's orphan pass", l.inc.Session, tries, err), data)
		}
	}
	t.left.mu.Lock()
	defer t.left.mu.Unlock()
	var next time.Duration
	for _, l := range t.left.q {
		if d := max(time.Until(l.next), time.Millisecond); next == 0 || d < next {
			next = d
		}
	}
	return next
}

// removeRemains ends what carries inc's marker and removes what inc ran
// in, each identity-checked as on the stop path.
func (t *Takedown) removeRemains(ctx context.Context, inc herd.Incarnation) error {
	if !t.o.Ops.Begin() {
		return errShuttingDown
	}
	defer t.o.Ops.End()
	ctx, cancel := context.WithTimeout(ctx, leftoverTimeout)
	defer cancel()
	if t.o.Contain != nil {
		if _, err := t.o.Contain.Stop(ctx, inc.ID, 0); err != nil {
			return err
		}
	}
	rt, ok := t.o.Runtimes[inc.RuntimeKind]
	if !ok {
		return errors.New("unknown runtime " + inc.RuntimeKind)
	}
	return rt.Remove(ctx, inc)
}

// leftoverEvent appends a leftover event about inc.
func (t *Takedown) leftoverEvent(inc herd.Incarnation, reason, msg string, data map[string]any) {
	ctx, cancel := context.WithTimeout(context.Background(), leftoverTimeout)
	defer cancel()
	ev := t.st.Event(herd.Session{Name: inc.Session}, inc.ID, herd.EventLeftover, reason, msg, data)
	if err := t.st.Store().Update(ctx, func(tx store.Tx) error { return tx.AppendEvent(ev) }); err != nil {
		t.o.Log.Error("record a leftover event", "session", inc.Session, "err", err)
	}
}
