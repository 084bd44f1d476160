package worktree

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"herd/internal/proc"
)

// landPrefix begins the name of every temporary landing worktree.
const landPrefix = "herd-land-"

// landLock is the lock reason of a temporary landing worktree: the
// process that made it, by pid, start time and boot, so that a landing
// left behind by a daemon killed mid-way is told from one under way.
func landLock() string {
	boot, _ := proc.BootID()
	var start uint64
	if st, err := proc.Real().Stat(os.Getpid()); err == nil {
		start = st.StartTime
	}
	return fmt.Sprintf("herd landing: pid %d start %d boot %s", os.Getpid(), start, boot)
}

// staleLanding reports whether a landing worktree locked with reason was
// left behind: its maker is gone (another boot, its pid absent or
// reused). A reason not of herd's, or a maker that cannot be read, is
// never stale: a landing that may be under way is not touched.
func staleLanding(reason string, fs proc.FS, boot string) bool {
	var pid int
	var start uint64
	var madeIn string
	if n, err := fmt.Sscanf(reason, "herd landing: pid %d start %d boot %s", &pid, &start, &madeIn); n != 3 || err != nil || pid <= 0 {
		return false
	}
	if boot == "" {
		return false
	}
	if madeIn != boot {
		return true
	}
	st, err := fs.Stat(pid)
	if err != nil {
		return errors.Is(err, proc.ErrNoProcess)
	}
	return st.Zombie() || st.StartTime != start
}

// sweepLandings removes the temporary landing worktrees of repository
// top that a killed daemon left behind (registered, locked by a process
// that is gone). Errors are ignored: the landing goes on either way.
func (m *Manager) sweepLandings(ctx context.Context, top string) {
	out, err := m.git().Run(ctx, top, "worktree", "list", "--porcelain")
	if err != nil {
		return
	}
	boot, _ := proc.BootID()
	for _, wt := range parseLocked(string(out)) {
		if strings.HasPrefix(filepath.Base(wt.path), landPrefix) && staleLanding(wt.reason, proc.Real(), boot) {
			m.removeTemp(ctx, top, wt.path)
		}
	}
}

// locked is a locked worktree of `git worktree list --porcelain`.
type locked struct{ path, reason string }

// parseLocked returns the locked worktrees of a porcelain listing.
func parseLocked(out string) []locked {
	var res []locked
	var path string
	for line := range strings.SplitSeq(out, "\n") {
		switch {
		case strings.HasPrefix(line, "worktree "):
			path = strings.TrimPrefix(line, "worktree ")
		case line == "locked" || strings.HasPrefix(line, "locked "):
			res = append(res, locked{path: path, reason: strings.TrimPrefix(strings.TrimPrefix(line, "locked"), " ")})
		}
	}
	return res
}
