package cgroup

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"herd"
	"herd/internal/proc"
)

// markerPoll is how often StopMarked looks for what is left.
const markerPoll = 20 * time.Millisecond

// Marked returns the identities of the live processes whose environment
// carries HERD_INCARNATION=marker: every process an incarnation started,
// however far it detached (setsid, double fork), unless it replaced its
// environment. Processes that cannot be read, zombies and the caller
// itself are skipped.
func Marked(fsys proc.FS, bootID, marker string) ([]herd.Identity, error) {
	if marker == "" {
		return nil, errors.New("cgroup: empty incarnation marker")
	}
	found, err := MarkedAny(fsys, bootID, map[string]bool{marker: true})
	return found[marker], err
}

// MarkedAny is Marked for several markers in one scan of every process:
// each environment block is read once, and each process is counted toward
// the marker it carries (only markers in set; an empty marker never
// matches).
func MarkedAny(fsys proc.FS, bootID string, set map[string]bool) (map[string][]herd.Identity, error) {
	out := make(map[string][]herd.Identity, len(set))
	if len(set) == 0 {
		return out, nil
	}
	pids, err := fsys.PIDs()
	if err != nil {
		return nil, fmt.Errorf("cgroup: %w", err)
	}
	self := os.Getpid()
	for _, pid := range pids {
		if pid == self {
			continue
		}
		m, ok, err := fsys.EnvValue(pid, herd.EnvIncarnation)
		if err != nil || !ok || m == "" || !set[m] {
			continue
		}
		// Identify reads the start time around the marker, so a pid
		// reused meanwhile is not mistaken for ours.
		id, err := fsys.Identify(pid, bootID)
		if err != nil || id.Marker != m {
			continue
		}
		out[m] = append(out[m], id)
	}
	return out, nil
}

// StopResult says what StopMarked did.
type StopResult struct {
	Found  int           // distinct processes that carried the marker
	Killed int           // of them, still alive after the grace period (SIGKILLed)
	Left   []int         // pids still alive when ctx ended; empty on success
	Took   time.Duration // from the first SIGTERM until none was left
}

// StopMarked ends every process carrying the marker: SIGTERM to each, up
// to grace for them to exit (processes that appear meanwhile get SIGTERM
// too), then SIGKILL, repeated until none is left or ctx is done. Every
// signal goes through proc.Signal, which verifies boot id, pid, start time
// and the marker itself with a pidfd held, so a process that is not the
// incarnation's is never signalled.
func StopMarked(ctx context.Context, fsys proc.FS, bootID, marker string, grace time.Duration) (StopResult, error) {
	start := time.Now()
	seen := map[herd.Identity]bool{}
	var res StopResult
	// term sends SIGTERM to each marked process not asked before and
	// returns how many are alive.
	term := func() (int, error) {
		ids, err := Marked(fsys, bootID, marker)
		if err != nil {
			return 0, err
		}
		alive := 0
		for _, id := range ids {
			if seen[id] {
				alive++ // asked once; it has the grace period to go
				continue
			}
			seen[id] = true
			res.Found++
			if err := proc.Signal(fsys, id, bootID, unix.SIGTERM); err == nil {
				alive++
			}
		}
		return alive, nil
	}

	// A process in the middle of an exec shows an empty environment for
	// an instant, so one empty scan after processes were found is
	// confirmed by a second one before the tree counts as gone.
	emptyBefore := false
	done := func(n int) bool {
		if n > 0 {
			emptyBefore = false
			return false
		}
		if res.Found == 0 || emptyBefore {
			res.Took = time.Since(start)
			return true
		}
		emptyBefore = true
		return false
	}

	graceEnd := time.Now().Add(grace)
	for {
		n, err := term()
		if err != nil {
			return res, err
		}
		if done(n) {
			return res, nil
		}
		if !time.Now().Before(graceEnd) && n > 0 {
			break
		}
		select {
		case <-ctx.Done():
			return res, leftOver(&res, fsys, bootID, marker, ctx.Err())
		case <-time.After(pollWait(graceEnd)):
		}
	}
	killedBefore := map[herd.Identity]bool{}
	for {
		ids, err := Marked(fsys, bootID, marker)
		if err != nil {
			return res, err
		}
		if done(len(ids)) {
			return res, nil
		}
		for _, id := range ids {
			if !seen[id] {
				seen[id] = true
				res.Found++
			}
			if !killedBefore[id] {
				killedBefore[id] = true
				res.Killed++
			}
			_ = proc.Signal(fsys, id, bootID, unix.SIGKILL)
		}
		select {
		case <-ctx.Done():
			return res, leftOver(&res, fsys, bootID, marker, ctx.Err())
		case <-time.After(markerPoll):
		}
	}
}

// pollWait is how long to wait before the next scan of the grace period:
// markerPoll, or less when the grace period ends sooner.
func pollWait(graceEnd time.Time) time.Duration {
	if r := time.Until(graceEnd); r > 0 && r < markerPoll {
		return r
	}
	return markerPoll
}

// leftOver records the pids still carrying the marker and returns cause.
func leftOver(res *StopResult, fsys proc.FS, bootID, marker string, cause error) error {
	ids, _ := Marked(fsys, bootID, marker)
	for _, id := range ids {
		res.Left = append(res.Left, id.PID)
	}
	return fmt.Errorf("cgroup: %d process(es) with %s=%s left: %w", len(res.Left), herd.EnvIncarnation, marker, cause)
}

// TreeMemory is the resident memory of the processes carrying a marker.
type TreeMemory struct {
	RSS   int64 // bytes
	Procs int
}

// MarkedMemory sums the resident set of every process carrying the
// marker: the watchdog's measure of an incarnation's memory where no
// cgroup counts it.
func MarkedMemory(fsys proc.FS, bootID, marker string) (TreeMemory, error) {
	ids, err := Marked(fsys, bootID, marker)
	if err != nil {
		return TreeMemory{}, err
	}
	var stats []proc.Stat
	for _, id := range ids {
		if st, err := fsys.Stat(id.PID); err == nil && st.StartTime == id.StartTime {
			stats = append(stats, st)
		}
	}
	return TreeMemory{RSS: SumRSS(stats, int64(os.Getpagesize())), Procs: len(stats)}, nil
}

// SumRSS adds up the resident pages of processes, in bytes. Zombies hold
// no memory; negative (garbled) counts are ignored.
func SumRSS(stats []proc.Stat, pageSize int64) int64 {
	var total int64
	for _, st := range stats {
		if st.Zombie() || st.RSSPages <= 0 {
			continue
		}
		total += st.RSSPages * pageSize
	}
	return total
}

// OverMemory reports whether a tree using rss bytes breaks a memory_max of
// max bytes (0: no limit). The watchdog stops such an incarnation with
// reason memory_max and the restart policy decides what follows.
func OverMemory(rss, max int64) bool { return max > 0 && rss > max }

// MarkedMemoryAll is MarkedMemory for several incarnations at once: one
// scan of every process, each counted toward the marker it carries (only
// markers in want).
func MarkedMemoryAll(fsys proc.FS, want map[string]bool) (map[string]TreeMemory, error) {
	out := make(map[string]TreeMemory, len(want))
	if len(want) == 0 {
		return out, nil
	}
	pids, err := fsys.PIDs()
	if err != nil {
		return nil, fmt.Errorf("cgroup: %w", err)
	}
	self, page := os.Getpid(), int64(os.Getpagesize())
	for _, pid := range pids {
		if pid == self {
			continue
		}
		env, err := fsys.Environ(pid)
		if err != nil {
			continue
		}
		m := env[herd.EnvIncarnation]
		if !want[m] {
			continue
		}
		st, err := fsys.Stat(pid)
		if err != nil {
			continue
		}
		t := out[m]
		t.RSS += SumRSS([]proc.Stat{st}, page)
		t.Procs++
		out[m] = t
	}
	return out, nil
}
