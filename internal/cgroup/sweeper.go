package cgroup

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"herd"
	"herd/internal/loop"
	"herd/internal/proc"
)

// SweepEvery is the least time between two passes of a Sweeper: the
// crash cleanups of one second share one scan of /proc.
const SweepEvery = time.Second

// sweepSettle is how long the first pass after an idle spell waits for
// more markers: deaths that come together (a role's agents killed at
// once) share its scan.
const sweepSettle = 100 * time.Millisecond

// sweepSlack bounds how long a marker is followed beyond its grace
// period: a process that neither SIGTERM nor SIGKILL ends (stuck in the
// kernel) is reported and given up, as a stop's kill context gives up.
const sweepSlack = 30 * time.Second

// Sweeper ends, in the background, what outlived a crashed incarnation
// outside its cgroup: the processes carrying its HERD_INCARNATION marker
// (all of its tree in ModeMarker; in ModeCgroup those that escaped the
// group). Each pass scans /proc once for every marker queued, at most
// once per SweepEvery and never while nothing is queued, so a burst of
// deaths costs one scan instead of one each. A process a pass finds gets
// SIGTERM, then SIGKILL at the first pass after its grace period, each
// through proc.Signal (boot id, pid, start time and the marker verified
// with a pidfd held): nothing that is not the incarnation's is signalled.
// A marker is done once a pass finds none of its processes (twice in a
// row when some were found: a process mid-exec shows no environment for
// an instant).
type Sweeper struct {
	fs     proc.FS
	bootID string
	every  time.Duration
	settle time.Duration
	log    *slog.Logger
	wake   chan struct{}
	passes atomic.Int64

	mu   sync.Mutex // guards the fields below
	work map[string]*sweep
	last time.Time // start of the last pass
}

// sweep is the state of one queued marker.
type sweep struct {
	queued    time.Time
	grace     time.Duration
	termAt    map[herd.Identity]time.Time // processes sent SIGTERM, and when
	killed    map[herd.Identity]bool
	emptyOnce bool // the last pass found none, after some were found
}

// SweeperOptions configure a Sweeper.
type SweeperOptions struct {
	FS     proc.FS
	BootID string
	// Every is the least time between two passes (SweepEvery when zero).
	Every time.Duration
	// Settle is how long the first pass after an idle spell waits for
	// more markers (100 ms when zero, at most Every).
	Settle time.Duration
	Log    *slog.Logger
}

// NewSweeper returns an idle Sweeper; Run runs its passes.
func NewSweeper(o SweeperOptions) *Sweeper {
	if o.Every <= 0 {
		o.Every = SweepEvery
	}
	if o.Settle <= 0 {
		o.Settle = sweepSettle
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	return &Sweeper{
		fs: o.FS, bootID: o.BootID, every: o.Every, settle: min(o.Settle, o.Every), log: o.Log,
		wake: make(chan struct{}, 1), work: map[string]*sweep{},
	}
}

// Queue asks a coming pass to end the processes carrying marker: SIGTERM,
// then SIGKILL once grace has passed. A marker already queued keeps its
// place and grace.
func (s *Sweeper) Queue(marker string, grace time.Duration) {
	if marker == "" {
		return
	}
	s.mu.Lock()
	if _, ok := s.work[marker]; !ok {
		s.work[marker] = &sweep{queued: time.Now(), grace: max(grace, 0),
			termAt: map[herd.Identity]time.Time{}, killed: map[herd.Identity]bool{}}
	}
	s.mu.Unlock()
	loop.Wake(s.wake)
}

// Pending is how many markers are queued or still followed.
func (s *Sweeper) Pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.work)
}

// Passes is how many scans of /proc the sweeper has made.
func (s *Sweeper) Passes() int64 { return s.passes.Load() }

// idleWait is the loop's period while nothing is queued: Queue wakes it.
const idleWait = time.Hour

// Run runs passes until ctx is done. What is still queued then is left
// to Drain.
func (s *Sweeper) Run(ctx context.Context) {
	loop.Loop{Name: "crash cleanup", Log: s.log, Every: idleWait, Trigger: s.wake}.Run(ctx, func(context.Context) time.Duration {
		wait, ok := s.due(time.Now())
		if !ok {
			return 0
		}
		if wait > 0 {
			return wait
		}
		s.pass()
		if wait, ok = s.due(time.Now()); ok {
			return max(wait, time.Millisecond)
		}
		return 0
	})
}

// Drain runs passes, spaced as Run spaces them, until nothing is queued
// or ctx is done (then it names what it left). The daemon calls it at
// shutdown, once no more deaths can be queued.
func (s *Sweeper) Drain(ctx context.Context) error {
	for {
		wait, ok := s.due(time.Now())
		if !ok {
			return nil
		}
		if wait > 0 {
			select {
			case <-ctx.Done():
				return fmt.Errorf("cgroup: crash cleanup: %d incarnation(s) not swept: %w", s.Pending(), ctx.Err())
			case <-time.After(wait):
			}
		}
		s.pass()
	}
}

// due returns how long until the next pass may run, and whether there is
// anything to sweep: a pass runs SweepEvery after the last one, and
// sweepSettle after the oldest marker was queued.
func (s *Sweeper) due(now time.Time) (time.Duration, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.work) == 0 {
		return 0, false
	}
	oldest := now
	for _, w := range s.work {
		if w.queued.Before(oldest) {
			oldest = w.queued
		}
	}
	at := oldest.Add(s.settle)
	if next := s.last.Add(s.every); next.After(at) {
		at = next
	}
	return at.Sub(now), true
}

// signal is one signal a pass sends.
type signal struct {
	id  herd.Identity
	sig unix.Signal
}

// pass scans /proc once for every marker queued and signals what it
// found. Only the Run or Drain goroutine calls it.
func (s *Sweeper) pass() {
	s.mu.Lock()
	set := make(map[string]bool, len(s.work))
	for m := range s.work {
		set[m] = true
	}
	s.last = time.Now()
	s.mu.Unlock()

	found, err := MarkedAny(s.fs, s.bootID, set)
	s.passes.Add(1)
	if err != nil {
		s.log.Warn("crash cleanup: processes not read; next pass retries", "err", err)
		return
	}
	now := time.Now()
	var sigs []signal
	s.mu.Lock()
	for m := range set {
		w := s.work[m]
		ids := found[m]
		if len(ids) == 0 {
			if len(w.termAt) > 0 && !w.emptyOnce {
				w.emptyOnce = true
				continue
			}
			delete(s.work, m)
			if len(w.termAt) > 0 {
				s.log.Info("ended what was left of an incarnation's tree", "incarnation", m,
					"swept", len(w.termAt), "killed", len(w.killed), "took", now.Sub(w.queued).Round(time.Millisecond))
			}
			continue
		}
		w.emptyOnce = false
		if now.Sub(w.queued) > w.grace+sweepSlack {
			delete(s.work, m)
			s.log.Warn("processes of an ended incarnation not all ended", "incarnation", m, "left", pidsOf(ids))
			continue
		}
		for _, id := range ids {
			at, seen := w.termAt[id]
			if !seen {
				at = now
				w.termAt[id] = now
				sigs = append(sigs, signal{id, unix.SIGTERM})
			}
			if now.Sub(at) >= w.grace {
				w.killed[id] = true
				sigs = append(sigs, signal{id, unix.SIGKILL})
			}
		}
	}
	s.mu.Unlock()
	for _, sg := range sigs {
		// An error means the process is gone or is not (or cannot be
		// shown to be) the one found: either way it is left alone.
		_ = proc.Signal(s.fs, sg.id, s.bootID, sg.sig)
	}
}

// pidsOf lists the pids of ids.
func pidsOf(ids []herd.Identity) []int {
	out := make([]int, len(ids))
	for i, id := range ids {
		out[i] = id.PID
	}
	return out
}
