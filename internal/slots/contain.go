package slots

import (
	"context"
	"maps"
	"slices"
	"time"

	"herd"
	"herd/internal/cgroup"
	"herd/internal/runtime"
	"herd/internal/status"
	"herd/internal/store"
)

// containLaunch makes the incarnation's cgroup, with the role's limits,
// and has spec start inside it: an exec child is cloned into it, a tmux
// pane's process enters it (EnterCommand) before it execs the agent. So
// the whole tree is in the group from its first instruction, and a stop
// or crash cleanup ends it with one cgroup.kill. It returns the launch to
// close once the runtime has started (nil when the incarnation runs
// without a cgroup: the marker contains it), and notes in data where it
// runs and which limits the kernel does not enforce here.
func (s *Slots) containLaunch(role herd.Role, spec *runtime.Spec, data map[string]any) *cgroup.Launch {
	c := s.o.Contain
	if c == nil {
		return nil
	}
	lim := cgroup.Limits{MemoryMax: role.MemoryMax, PidsMax: role.PidsMax}
	if c.Mode() != cgroup.ModeCgroup || (role.Runtime == herd.RuntimeTmux && len(s.o.EnterCommand) == 0) {
		if lim.MemoryMax > 0 {
			data["memory_max_by"] = "watchdog"
		}
		return nil
	}
	l, err := c.Prepare(spec.Incarnation, lim)
	if err != nil {
		s.o.Log.Warn("launch outside a cgroup; contained by its marker", "session", spec.Session, "err", err)
		if lim.MemoryMax > 0 {
			data["memory_max_by"] = "watchdog"
		}
		return nil
	}
	switch role.Runtime {
	case herd.RuntimeTmux:
		argv := slices.Concat(s.o.EnterCommand, []string{l.CgroupPath, "--"}, spec.Argv)
		spec.Argv = argv
	default:
		spec.Cgroup = l.Dir()
	}
	data["cgroup"] = l.CgroupPath
	if l.Unenforced != nil {
		data["limits_unenforced"] = l.Unenforced.Error()
	}
	if lim.MemoryMax > 0 {
		if c.KernelMemoryMax() {
			data["memory_max_by"] = "kernel"
		} else {
			data["memory_max_by"] = "watchdog"
		}
	}
	return l
}

// launchStarted closes what containLaunch opened, and removes the cgroup
// when the runtime did not start the agent.
func (s *Slots) launchStarted(ctx context.Context, l *cgroup.Launch, incarnation string, startErr error) {
	if l == nil {
		return
	}
	_ = l.Close()
	if startErr == nil {
		return
	}
	if err := s.o.Contain.Release(ctx, incarnation); err != nil {
		s.o.Log.Warn("cgroup of a failed launch not removed", "incarnation", incarnation, "err", err)
	}
}

// staleCgroupAge is how long an empty, unrecorded cgroup must have been
// left before the start-up sweep removes it.
const staleCgroupAge = time.Minute

// RemoveStaleCgroups removes the empty cgroups of incarnations that are no
// longer open on this host (a daemon that died between a stop and the
// cgroup's removal left them); the daemon calls it once at start, after
// adoption.
func (s *Slots) RemoveStaleCgroups(ctx context.Context) {
	if s.o.Contain == nil || s.o.Contain.Mode() != cgroup.ModeCgroup {
		return
	}
	open := map[string]bool{}
	err := s.st.Store().View(ctx, func(tx store.Tx) error {
		incs, err := tx.OpenIncarnationsOnHost(s.st.Host())
		for _, inc := range incs {
			open[inc.ID] = true
		}
		return err
	})
	if err != nil {
		return
	}
	removed, err := s.o.Contain.RemoveStale(ctx, func(inc string) bool { return open[inc] }, staleCgroupAge)
	if err != nil {
		s.o.Log.Info("cgroups not removed at start", "why", err)
	}
	if len(removed) > 0 {
		s.o.Log.Info("removed the cgroups of ended incarnations", "count", len(removed))
	}
}

// BinaryUpdated maps the sessions whose incarnation runs a binary
// replaced on disk (the watchdog's outdated events, as the writer
// publishes them) to that incarnation: they are OUTDATED
// (binary_updated), and a rollout replaces them.
func (s *Slots) BinaryUpdated() map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.binaries)
}

// noteBinary keeps what a change says of an incarnation's binary.
func (s *Slots) noteBinary(c status.Change) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case c.What.Has(status.ChangeOutdated):
		if s.binaries == nil {
			s.binaries = map[string]string{}
		}
		s.binaries[c.Session] = c.Incarnation
	case c.What&(status.ChangeEnded|status.ChangeRemoved) != 0 && s.binaries[c.Session] == c.Incarnation:
		delete(s.binaries, c.Session)
	}
}
