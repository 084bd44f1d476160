package cgroup

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"herd"
	"herd/internal/proc"
)

// Mode names how incarnations are contained.
type Mode string

// Containment modes.
const (
	ModeCgroup Mode = "cgroup" // a cgroup v2 per incarnation
	ModeMarker Mode = "marker" // the HERD_INCARNATION environment marker
)

// Containment is the one place the launch, stop and crash paths ask to
// contain an incarnation's process tree. It uses a cgroup per incarnation
// when Detect succeeds and the environment marker otherwise, and in both
// modes sweeps marked processes after a stop, so nothing of the tree is
// left whichever way it escaped. It holds no mutable state: one value
// serves every goroutine.
type Containment struct {
	cg     *Manager // nil in ModeMarker
	why    string   // why not ModeCgroup, or which cgroup features are missing
	fs     proc.FS
	bootID string
	// stops runs the stops of one incarnation's group one at a time.
	stops groupLocks
}

// New detects what the host allows and logs it once: the mode, and why
// not cgroups (or which limits the kernel will not enforce).
//
// It also drops HERD_INCARNATION from the caller's environment: a daemon
// started from inside an agent's pane inherits that agent's marker, and
// the tmux server and other children it starts would carry it too and be
// ended with that incarnation. (The caller's own process is never
// matched.)
func New(log *slog.Logger, opts Options, bootID string) *Containment {
	if inc, ok := os.LookupEnv(herd.EnvIncarnation); ok {
		log.Warn("started with an incarnation marker in the environment; dropped so herd's children do not carry it",
			"incarnation", inc)
		os.Unsetenv(herd.EnvIncarnation)
	}
	c := &Containment{fs: proc.Real(), bootID: bootID}
	m, err := Detect(opts)
	if err != nil {
		c.why = err.Error()
		log.Warn("containment by environment marker; memory_max enforced by the watchdog, pids_max not enforced", "reason", c.why)
		return c
	}
	c.cg = m
	c.why = m.Describe()
	log.Info("containment by cgroup: each incarnation starts in a cgroup of its own, ended whole by cgroup.kill", "detail", c.why)
	return c
}

// Mode reports the containment mode.
func (c *Containment) Mode() Mode {
	if c.cg != nil {
		return ModeCgroup
	}
	return ModeMarker
}

// Describe says what containment this host gets and why.
func (c *Containment) Describe() string { return fmt.Sprintf("%s: %s", c.Mode(), c.why) }

// KernelMemoryMax reports whether memory_max is enforced by the kernel (an
// OOM kill, reason oom); otherwise the watchdog enforces it (reason
// memory_max) with TreeMemory.
func (c *Containment) KernelMemoryMax() bool { return c.cg != nil && c.cg.Memory() }

// Launch is what a launch needs to start an incarnation contained.
type Launch struct {
	// CgroupPath is the incarnation's cgroup ("" in ModeMarker). A launch
	// that does not fork the agent itself (tmux) runs it through a
	// wrapper that calls Enter(CgroupPath) and then execs the command.
	CgroupPath string
	// Unenforced lists limits the kernel will not enforce here (the
	// watchdog must), with the reason.
	Unenforced error

	fd *os.File
}

// Prepare makes the incarnation's cgroup (nothing in ModeMarker) and
// applies lim. Call Apply on the exec.Cmd's SysProcAttr of a child herd
// starts itself, then Close once it started.
func (c *Containment) Prepare(incarnation string, lim Limits) (*Launch, error) {
	if c.cg == nil {
		var unenforced error
		if lim.MemoryMax > 0 || lim.PidsMax > 0 {
			unenforced = fmt.Errorf("%w: %s", ErrUnavailable, c.why)
		}
		return &Launch{Unenforced: unenforced}, nil
	}
	g, err := c.cg.Create(incarnation, lim)
	if g == nil {
		return nil, err
	}
	l := &Launch{CgroupPath: g.Path}
	if err != nil {
		if !errors.Is(err, ErrUnavailable) {
			_ = g.Remove(context.Background())
			return nil, err
		}
		l.Unenforced = err
	}
	f, err := g.OpenFD()
	if err != nil {
		_ = g.Remove(context.Background())
		return nil, err
	}
	l.fd = f
	return l, nil
}

// Apply makes a child started with attr begin inside the cgroup.
func (l *Launch) Apply(attr *syscall.SysProcAttr) {
	if l.fd == nil {
		return
	}
	attr.UseCgroupFD = true
	attr.CgroupFD = int(l.fd.Fd())
}

// Dir is the cgroup's directory opened for a child to start inside it
// (runtime.Spec.Cgroup); nil in ModeMarker.
func (l *Launch) Dir() *os.File { return l.fd }

// Release removes the cgroup of a launch that did not start (nothing in
// ModeMarker, or when the incarnation has none).
func (c *Containment) Release(ctx context.Context, incarnation string) error {
	if c.cg == nil {
		return nil
	}
	g, err := c.cg.Open(incarnation)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	return g.Remove(ctx)
}

// Close releases the cgroup directory opened for Apply.
func (l *Launch) Close() error {
	if l.fd == nil {
		return nil
	}
	err := l.fd.Close()
	l.fd = nil
	return err
}

// StopReport says how a stop ended the tree.
type StopReport struct {
	Mode   Mode
	Group  bool // the incarnation had a cgroup (ended with it)
	Killed bool // something outlived the grace period and was SIGKILLed
	Swept  int  // marked processes outside the cgroup (or all of them, in ModeMarker)
	// Ran: a process of the incarnation ran in its group (members at the
	// stop, or CPU time used): a launch whose start was never recorded
	// did start.
	Ran  bool
	Took time.Duration
}

// Stop ends every process of the incarnation: in ModeCgroup SIGTERM to
// the group, grace, cgroup.kill, then the group is removed; in both modes
// the processes carrying the marker are then ended (in ModeMarker with
// the grace period, in ModeCgroup with none left of it: they escaped the
// group before it existed). Call it on stop, after the agent's own
// process group was signalled, before the incarnation is forgotten. The
// crash cleanup calls StopGroup and leaves the marker to a Sweeper.
func (c *Containment) Stop(ctx context.Context, incarnation string, grace time.Duration) (StopReport, error) {
	start := time.Now()
	rep, err := c.StopGroup(ctx, incarnation, grace)
	errs := []error{err}
	if rep.Group {
		grace = 0 // what is outside the group escaped it: no grace left to give
	}
	res, err := StopMarked(ctx, c.fs, c.bootID, incarnation, grace)
	rep.Swept = res.Found
	rep.Killed = rep.Killed || res.Killed > 0
	errs = append(errs, err)
	rep.Took = time.Since(start)
	return rep, errors.Join(errs...)
}

// StopGroup is the cgroup half of Stop: in ModeCgroup the incarnation's
// group gets SIGTERM, up to grace to empty, cgroup.kill, and is removed;
// in ModeMarker (or when the incarnation has no group) nothing happens.
// It reads only the group's own files, never every process: the crash
// cleanup calls it at each death and queues the marker to a Sweeper,
// which scans /proc once for every incarnation queued.
func (c *Containment) StopGroup(ctx context.Context, incarnation string, grace time.Duration) (StopReport, error) {
	start := time.Now()
	rep := StopReport{Mode: c.Mode()}
	var err error
	if c.cg != nil {
		// A crash's cleanup and the takedown of what the death left stop
		// the same group at once: one after the other, the second finds
		// it gone instead of reading the files of a group being removed.
		unlock := c.stops.lock(incarnation)
		var g *Group
		if g, err = c.cg.Open(incarnation); err == nil {
			rep.Group = true
			rep.Ran = groupRan(g)
			rep.Killed, err = g.Stop(ctx, grace)
			if err == nil {
				err = g.Remove(ctx)
			}
			if err != nil && g.gone() {
				// Removed meanwhile by something else (a second daemon's
				// sweep, a person): what the stop wanted.
				err = nil
			}
		} else if errors.Is(err, os.ErrNotExist) {
			err = nil
		}
		unlock()
	}
	rep.Took = time.Since(start)
	return rep, err
}

// groupRan reports whether a process ran in g: it has members, or its
// tree used CPU time (members that ran and exited).
func groupRan(g *Group) bool {
	if populated, err := g.Populated(); err == nil && populated {
		return true
	}
	st, err := g.Stats()
	return err == nil && st.CPUUsage > 0
}

// Usage is an incarnation's resource use, from its cgroup or, in
// ModeMarker, from /proc.
type Usage struct {
	CPU      time.Duration // cgroup only: CPU time of the whole tree, dead members included
	Memory   int64         // bytes: memory.current, or the RSS of the marked processes
	OOMKills int64         // cgroup with memory controller only
	Source   Mode
	// MemoryCurrent: Memory is the cgroup's memory.current (else the
	// resident memory of the tree's processes).
	MemoryCurrent bool
}

// Usage reads an incarnation's resource use.
func (c *Containment) Usage(incarnation string) (Usage, error) {
	if c.cg != nil {
		if g, err := c.cg.Open(incarnation); err == nil {
			st, err := g.Stats()
			if err != nil {
				return Usage{}, err
			}
			u := Usage{CPU: st.CPUUsage, Source: ModeCgroup}
			if st.MemoryCurrent != nil {
				u.Memory, u.MemoryCurrent = *st.MemoryCurrent, true
			}
			if st.OOMKills != nil {
				u.OOMKills = *st.OOMKills
			}
			if st.MemoryCurrent != nil {
				return u, nil
			}
			// No memory controller: the RSS of the group's members, and of
			// anything carrying the marker outside it, stands in.
			mem, err := c.groupMemory(g, incarnation)
			if err != nil {
				return Usage{}, err
			}
			u.Memory = mem.RSS
			return u, nil
		}
	}
	mem, err := MarkedMemory(c.fs, c.bootID, incarnation)
	if err != nil {
		return Usage{}, err
	}
	return Usage{Memory: mem.RSS, Source: ModeMarker}, nil
}

// OOMKilled reports whether the kernel killed a process of the
// incarnation for its memory.max: the crash path records such a death
// with reason oom. Always false without the memory controller.
func (c *Containment) OOMKilled(incarnation string) bool {
	if c.cg == nil || !c.cg.Memory() {
		return false
	}
	g, err := c.cg.Open(incarnation)
	if err != nil {
		return false
	}
	st, err := g.Stats()
	return err == nil && st.OOMKills != nil && *st.OOMKills > 0
}

// RemoveStale removes the empty cgroups of incarnations keep does not
// claim (left by a daemon that died between a stop and the removal) that
// were last changed at least minAge ago: another daemon sharing the
// subtree may have just made one for a launch. A populated cgroup of an
// unknown incarnation is left alone and named in the error: its processes
// are not known to be herd's to end.
func (c *Containment) RemoveStale(ctx context.Context, keep func(incarnation string) bool, minAge time.Duration) (removed []string, err error) {
	if c.cg == nil {
		return nil, nil
	}
	incs, err := c.cg.List()
	if err != nil {
		return nil, err
	}
	var errs []error
	for _, inc := range incs {
		if keep(inc) {
			continue
		}
		g, err := c.cg.Open(inc)
		if err != nil {
			continue
		}
		if fi, err := os.Stat(g.Path); err != nil || time.Since(fi.ModTime()) < minAge {
			continue
		}
		if pop, err := g.Populated(); err != nil || pop {
			errs = append(errs, fmt.Errorf("cgroup: %s is not recorded but has processes; left alone", g.Path))
			continue
		}
		if err := g.Remove(ctx); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, inc)
	}
	return removed, errors.Join(errs...)
}

// ExecIn moves the calling process into the cgroup at path (none when
// path is empty) and replaces it with argv, looked up in PATH. It is the
// body of the launch wrapper for runtimes where herd does not fork the
// agent itself (a tmux pane runs `herd <wrapper> PATH -- argv...`): the
// agent and everything it forks are inside the group from the start. It
// returns only on failure.
func ExecIn(path string, argv []string) error {
	if len(argv) == 0 {
		return errors.New("cgroup: exec: empty command")
	}
	if path != "" {
		if err := Enter(path); err != nil {
			return err
		}
	}
	bin, err := exec.LookPath(argv[0])
	if err != nil {
		return fmt.Errorf("cgroup: exec: %w", err)
	}
	return fmt.Errorf("cgroup: exec %s: %w", bin, syscall.Exec(bin, argv, os.Environ()))
}

// groupMemory sums the resident memory of g's members. Only when the group
// is empty (an incarnation started before its cgroup existed) are the
// processes carrying the marker counted instead: that is a scan of every
// process, where the group names its members.
func (c *Containment) groupMemory(g *Group, incarnation string) (TreeMemory, error) {
	pids, err := g.Procs()
	if err != nil {
		return TreeMemory{}, err
	}
	if len(pids) == 0 {
		return MarkedMemory(c.fs, c.bootID, incarnation)
	}
	return c.pidsMemory(pids), nil
}

// pidsMemory sums the resident memory of pids (those still readable).
func (c *Containment) pidsMemory(pids []int) TreeMemory {
	stats := make([]proc.Stat, 0, len(pids))
	for _, pid := range pids {
		if st, err := c.fs.Stat(pid); err == nil {
			stats = append(stats, st)
		}
	}
	return TreeMemory{RSS: SumRSS(stats, int64(os.Getpagesize())), Procs: len(stats)}
}

// Memory returns the resident memory of each incarnation's tree, for the
// watchdog's memory_max where the kernel does not enforce it: from the
// members of its cgroup when it has one with processes, else from one
// scan of the processes carrying the markers.
func (c *Containment) Memory(incarnations []string) (map[string]TreeMemory, error) {
	out := make(map[string]TreeMemory, len(incarnations))
	scan := map[string]bool{}
	for _, inc := range incarnations {
		if c.cg != nil {
			if g, err := c.cg.Open(inc); err == nil {
				if pids, err := g.Procs(); err == nil && len(pids) > 0 {
					out[inc] = c.pidsMemory(pids)
					continue
				}
			}
		}
		scan[inc] = true
	}
	marked, err := MarkedMemoryAll(c.fs, scan)
	if err != nil {
		return out, err
	}
	for inc, m := range marked {
		out[inc] = m
	}
	return out, nil
}

// Members returns the pids in the incarnation's cgroup, and whether it has
// one: where it does, the tree is read from the group instead of a scan of
// every process's environment.
func (c *Containment) Members(incarnation string) ([]int, bool) {
	if c.cg == nil {
		return nil, false
	}
	g, err := c.cg.Open(incarnation)
	if err != nil {
		return nil, false
	}
	pids, err := g.Procs()
	if err != nil {
		return nil, false
	}
	return pids, true
}

// groupLocks holds a lock per incarnation whose group is being stopped.
type groupLocks struct {
	mu sync.Mutex // guards held
	// held maps an incarnation to its lock and the number of its holders
	// and waiters (dropped at zero).
	held map[string]*groupLock
}

type groupLock struct {
	mu sync.Mutex
	n  int
}

// lock takes incarnation's lock and returns its release.
func (l *groupLocks) lock(incarnation string) func() {
	l.mu.Lock()
	if l.held == nil {
		l.held = map[string]*groupLock{}
	}
	g := l.held[incarnation]
	if g == nil {
		g = &groupLock{}
		l.held[incarnation] = g
	}
	g.n++
	l.mu.Unlock()
	g.mu.Lock()
	return func() {
		g.mu.Unlock()
		l.mu.Lock()
		if g.n--; g.n == 0 {
			delete(l.held, incarnation)
		}
		l.mu.Unlock()
	}
}

// Subtree returns herd's cgroup subtree as /proc/PID/cgroup names it
// (Manager.Subtree); "" in ModeMarker.
func (c *Containment) Subtree() string {
	if c.cg == nil {
		return ""
	}
	return c.cg.Subtree()
}
