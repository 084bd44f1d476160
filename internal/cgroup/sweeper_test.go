package cgroup

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"herd"
	"herd/internal/proc"
)

// runSweeper runs s until the test ends.
func runSweeper(t *testing.T, s *Sweeper) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { s.Run(ctx) })
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
}

// TestSweeperCoalescesDeaths: the deaths of many incarnations queued at
// once cost the scans of one: one pass when nothing outlived them, and
// with a child left behind by each, as many passes as for a single one
// (the pass that ends them and the two that confirm they are gone) —
// never one scan per death.
func TestSweeperCoalescesDeaths(t *testing.T) {
	boot := bootID(t)
	cases := []struct {
		name       string
		deaths     int
		leftBehind bool
		passes     int64
	}{
		{"one death, nothing left", 1, false, 1},
		{"50 deaths, nothing left", 50, false, 1},
		{"one death, a child left", 1, true, 3},
		{"50 deaths, a child left by each", 50, true, 3},
	}
	for ci, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// A settle long enough that a loaded machine queues all
			// the deaths before the first pass.
			s := NewSweeper(SweeperOptions{FS: proc.Real(), BootID: boot, Every: time.Second, Settle: time.Second})
			var children []*started
			markers := make([]string, c.deaths)
			for i := range markers {
				markers[i] = fmt.Sprintf("inc-sweep-%d-%d", ci, i)
				cleanupMarked(t, boot, markers[i])
				if c.leftBehind {
					children = append(children, start(t, markers[i], nil, "sleep", "1000"))
				}
			}
			if c.leftBehind {
				waitFor(t, "the children to carry their markers", 10*time.Second, func() bool {
					found, _ := MarkedAny(proc.Real(), boot, setOf(markers))
					return len(found) == len(markers)
				})
			}
			runSweeper(t, s)
			for _, m := range markers {
				s.Queue(m, 5*time.Second)
			}
			waitFor(t, "every marker swept", 20*time.Second, func() bool { return s.Pending() == 0 })
			// A child slow to die under load is found once more and
			// confirmed gone one pass later.
			if got := s.Passes(); got < c.passes || got > c.passes+1 || (!c.leftBehind && got != c.passes) {
				t.Errorf("[%s] expected %d scan(s) of /proc … got %d", c.name, c.passes, got)
			}
			for i, ch := range children {
				select {
				case <-ch.reaped:
				case <-time.After(5 * time.Second):
					t.Errorf("[%s] expected the child of %s ended", c.name, markers[i])
				}
			}
		})
	}
}

// setOf is a set of markers.
func setOf(markers []string) map[string]bool {
	out := map[string]bool{}
	for _, m := range markers {
		out[m] = true
	}
	return out
}

// TestSweeperGraceThenKill: a process that ignores SIGTERM gets its grace
// period, then SIGKILL; a process carrying no marker and one carrying the
// marker of an incarnation nobody queued are never signalled.
func TestSweeperGraceThenKill(t *testing.T) {
	boot := bootID(t)
	fsys := proc.Real()
	const marker, other = "inc-sweep-stubborn", "inc-sweep-alive"
	cleanupMarked(t, boot, marker)
	cleanupMarked(t, boot, other)
	canary := start(t, "", nil, "sleep", "1000")
	live := start(t, other, nil, "sleep", "1000")
	stubborn := start(t, marker, nil, "sh", "-c", "trap '' TERM; while :; do sleep 1; done")
	waitFor(t, "the stubborn process and its sleep marked", 10*time.Second, func() bool {
		ids, _ := Marked(fsys, boot, marker)
		return len(ids) == 2
	})
	canaryID, _ := fsys.Identify(canary.cmd.Process.Pid, boot)
	liveID, _ := fsys.Identify(live.cmd.Process.Pid, boot)

	s := NewSweeper(SweeperOptions{FS: fsys, BootID: boot, Every: 50 * time.Millisecond})
	runSweeper(t, s)
	const grace = 500 * time.Millisecond
	queued := time.Now()
	s.Queue(marker, grace)
	select {
	case <-stubborn.reaped:
	case <-time.After(10 * time.Second):
		t.Fatal("expected the process that ignores SIGTERM killed after its grace period")
	}
	if took := time.Since(queued); took < grace {
		t.Errorf("expected SIGKILL only after the grace period %v … it died after %v", grace, took)
	}
	waitFor(t, "the marker swept", 10*time.Second, func() bool { return s.Pending() == 0 })
	if left, _ := Marked(fsys, boot, marker); len(left) != 0 {
		t.Errorf("expected nothing left carrying %s … got %d", marker, len(left))
	}
	for name, id := range map[string]herd.Identity{"canary": canaryID, "another incarnation": liveID} {
		if got := fsys.Check(id, boot); got != herd.Alive {
			t.Errorf("[%s] expected untouched and alive … got %s", name, got)
		}
	}
}

// TestSweeperIdle: with nothing queued no pass runs; an empty marker is
// not queued (it would match nothing, or everything).
func TestSweeperIdle(t *testing.T) {
	s := NewSweeper(SweeperOptions{FS: proc.Real(), BootID: bootID(t), Every: time.Millisecond})
	runSweeper(t, s)
	s.Queue("", 0)
	time.Sleep(200 * time.Millisecond) // a stretch of idleness, not a wait for a condition
	if got := s.Passes(); got != 0 {
		t.Errorf("expected no scan while nothing is queued … got %d", got)
	}
}

// TestSweeperDrain: what is queued when the loop has ended is swept by
// Drain; a Drain whose context ends first says how much it left.
func TestSweeperDrain(t *testing.T) {
	boot := bootID(t)
	const marker = "inc-sweep-drain"
	cleanupMarked(t, boot, marker)
	child := start(t, marker, nil, "sleep", "1000")
	waitFor(t, "the child marked", 10*time.Second, func() bool {
		ids, _ := Marked(proc.Real(), boot, marker)
		return len(ids) == 1
	})
	s := NewSweeper(SweeperOptions{FS: proc.Real(), BootID: boot, Every: 20 * time.Millisecond})
	s.Queue(marker, time.Second)
	if err := s.Drain(t.Context()); err != nil {
		t.Fatalf("expected the drain to end the child: %v", err)
	}
	select {
	case <-child.reaped:
	case <-time.After(5 * time.Second):
		t.Fatal("expected the child ended by the drain")
	}

	s.Queue("inc-sweep-never", 0)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	s.every = time.Hour // the next pass is far away: the context ends first
	if err := s.Drain(ctx); err == nil {
		t.Error("expected an error naming what was not swept")
	}
}
