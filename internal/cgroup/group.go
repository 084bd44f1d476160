package cgroup

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"herd"
	"herd/internal/proc"
)

// Limits are a role's resource limits; zero means none.
type Limits struct {
	MemoryMax int64 // bytes; memory.max
	PidsMax   int64 // pids.max
}

// Group is the cgroup of one incarnation.
type Group struct {
	Path string // directory in the cgroup file system
	m    *Manager
}

// pollInterval is how often Kill and Remove look whether the group emptied.
const pollInterval = 10 * time.Millisecond

// Create makes the cgroup of an incarnation (or returns the existing one,
// for a relaunch that raced a crash) and applies limits. A limit the
// hierarchy cannot enforce is an error wrapping ErrUnavailable, so the
// caller knows to enforce it another way.
func (m *Manager) Create(incarnation string, lim Limits) (*Group, error) {
	if err := checkName(incarnation); err != nil {
		return nil, err
	}
	g := &Group{Path: filepath.Join(m.root, incarnation), m: m}
	if err := os.Mkdir(g.Path, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("cgroup: create %s: %w", g.Path, err)
	}
	var errs []error
	if lim.MemoryMax > 0 {
		if !m.memory {
			errs = append(errs, fmt.Errorf("%w: memory_max: no memory controller", ErrUnavailable))
		} else if err := writeFile(g.file("memory.max"), strconv.FormatInt(lim.MemoryMax, 10)); err != nil {
			errs = append(errs, fmt.Errorf("cgroup: memory_max: %w", err))
		} else {
			// Swap would let the tree grow past the limit unseen.
			_ = writeFile(g.file("memory.swap.max"), "0")
			// An OOM kill takes the whole tree, so the agent's death
			// (recorded with reason oom) leaves nothing half-alive.
			_ = writeFile(g.file("memory.oom.group"), "1")
		}
	}
	if lim.PidsMax > 0 {
		if !m.pids {
			errs = append(errs, fmt.Errorf("%w: pids_max: no pids controller", ErrUnavailable))
		} else if err := writeFile(g.file("pids.max"), strconv.FormatInt(lim.PidsMax, 10)); err != nil {
			errs = append(errs, fmt.Errorf("cgroup: pids_max: %w", err))
		}
	}
	return g, errors.Join(errs...)
}

// Open returns the existing cgroup of an incarnation (a restarted daemon
// re-adopting its agents), or an error wrapping fs.ErrNotExist.
func (m *Manager) Open(incarnation string) (*Group, error) {
	if err := checkName(incarnation); err != nil {
		return nil, err
	}
	g := &Group{Path: filepath.Join(m.root, incarnation), m: m}
	if _, err := os.Stat(g.file("cgroup.procs")); err != nil {
		return nil, fmt.Errorf("cgroup: open %s: %w", g.Path, err)
	}
	return g, nil
}

// List returns the incarnations that have a cgroup under herd's subtree,
// so cgroups of incarnations that are no longer recorded can be removed.
func (m *Manager) List() ([]string, error) {
	ents, err := os.ReadDir(m.root)
	if err != nil {
		return nil, fmt.Errorf("cgroup: %w", err)
	}
	var out []string
	for _, e := range ents {
		if e.IsDir() {
			out = append(out, e.Name())
		}
	}
	return out, nil
}

func (g *Group) file(name string) string { return filepath.Join(g.Path, name) }

// OpenFD opens the group's directory for SysProcAttr.CgroupFD (with
// UseCgroupFD), so a child starts inside the group and not one fork of it
// runs outside. The caller closes the file once the child has started.
func (g *Group) OpenFD() (*os.File, error) {
	f, err := os.OpenFile(g.Path, os.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("cgroup: %w", err)
	}
	return f, nil
}

// Add moves the process recorded as id into the group, after checking
// that it is that process. Its children forked before the move stay where
// they are; start the agent inside the group (OpenFD, or Enter from the
// launched process itself) where that matters.
func (g *Group) Add(fsys proc.FS, id herd.Identity, bootID string) error {
	if axis := fsys.Check(id, bootID); axis != herd.Alive {
		return fmt.Errorf("cgroup: add pid %d: process is %s: %w", id.PID, axis, proc.ErrIdentityMismatch)
	}
	if err := writeFile(g.file("cgroup.procs"), strconv.Itoa(id.PID)); err != nil {
		return fmt.Errorf("cgroup: add pid %d: %w", id.PID, err)
	}
	return nil
}

// Enter moves the calling process into the cgroup at path (herd's launch
// wrapper calls it before exec'ing the agent, so everything the agent
// forks is inside from the start).
func Enter(path string) error {
	if err := writeFile(filepath.Join(path, "cgroup.procs"), "0"); err != nil {
		return fmt.Errorf("cgroup: enter %s: %w", path, err)
	}
	return nil
}

// Procs returns the pids in the group (not its threads).
func (g *Group) Procs() ([]int, error) {
	b, err := os.ReadFile(g.file("cgroup.procs"))
	if err != nil {
		return nil, fmt.Errorf("cgroup: %w", err)
	}
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		if p, err := strconv.Atoi(f); err == nil && p > 0 {
			pids = append(pids, p)
		}
	}
	return pids, nil
}

// Populated reports whether any live process is in the group.
func (g *Group) Populated() (bool, error) {
	ev, err := readKeyed(g.file("cgroup.events"))
	if err != nil {
		return false, fmt.Errorf("cgroup: %w", err)
	}
	v, ok := ev["populated"]
	if !ok {
		return false, fmt.Errorf("cgroup: %s has no populated key", g.file("cgroup.events"))
	}
	return v != 0, nil
}

// Kill ends every process in the group with SIGKILL and waits until the
// group is empty or ctx is done. Membership is the identity here: the
// kernel kills what is in the group, forks racing the kill included
// (cgroup.kill). Without cgroup.kill the group is frozen first (so nothing
// forks or leaves), each member is killed through a pidfd after checking
// it is still in the group, and the group is thawed to let them die.
func (g *Group) Kill(ctx context.Context) error {
	if g.m.kill {
		if err := writeFile(g.file("cgroup.kill"), "1"); err != nil {
			return fmt.Errorf("cgroup: kill %s: %w", g.Path, err)
		}
	} else if err := g.freezeKill(ctx); err != nil {
		return err
	}
	return g.waitEmpty(ctx)
}

// freezeKill is Kill on kernels without cgroup.kill.
func (g *Group) freezeKill(ctx context.Context) error {
	if err := writeFile(g.file("cgroup.freeze"), "1"); err != nil {
		return fmt.Errorf("cgroup: freeze %s: %w", g.Path, err)
	}
	defer func() { _ = writeFile(g.file("cgroup.freeze"), "0") }()
	for {
		ev, err := readKeyed(g.file("cgroup.events"))
		if err != nil {
			return fmt.Errorf("cgroup: %w", err)
		}
		if ev["frozen"] == 1 {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cgroup: freeze %s: %w", g.Path, ctx.Err())
		case <-time.After(pollInterval):
		}
	}
	pids, err := g.Procs()
	if err != nil {
		return err
	}
	for _, pid := range pids {
		g.signalMember(pid, unix.SIGKILL)
	}
	return nil
}

// signalMember sends sig to pid through a pidfd when, with the pidfd
// open, the process is still a member of the group: membership is the
// identity, and the pidfd keeps a reused pid from being hit.
func (g *Group) signalMember(pid int, sig unix.Signal) bool {
	pidfd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return false
	}
	defer unix.Close(pidfd)
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return false
	}
	own, err := parseOwnCgroup(string(b))
	if err != nil || filepath.Join(g.m.mount, own) != g.Path {
		return false
	}
	return unix.PidfdSendSignal(pidfd, sig, nil, 0) == nil
}

// Signal sends sig to every process in the group, each through a pidfd
// after checking, with the pidfd open, that it is still a member. It
// returns how many were signalled.
func (g *Group) Signal(sig unix.Signal) (int, error) {
	pids, err := g.Procs()
	if err != nil {
		return 0, err
	}
	n := 0
	for _, pid := range pids {
		if g.signalMember(pid, sig) {
			n++
		}
	}
	return n, nil
}

// Stop ends the group's processes the way a stop should: SIGTERM to each,
// up to grace for the group to empty, then Kill. It returns whether the
// kill was needed.
func (g *Group) Stop(ctx context.Context, grace time.Duration) (killed bool, err error) {
	if _, err := g.Signal(unix.SIGTERM); err != nil {
		return false, err
	}
	gctx, cancel := context.WithTimeout(ctx, grace)
	err = g.waitEmpty(gctx)
	cancel()
	if err == nil {
		return false, nil
	}
	if ctx.Err() != nil {
		return false, err
	}
	return true, g.Kill(ctx)
}

// waitEmpty polls until the group has no live process.
func (g *Group) waitEmpty(ctx context.Context) error {
	for {
		pop, err := g.Populated()
		if err != nil {
			return err
		}
		if !pop {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cgroup: %s still populated: %w", g.Path, ctx.Err())
		case <-time.After(pollInterval):
		}
	}
}

// gone reports whether the group's directory no longer exists: its files
// then read ENOENT, or ENODEV when opened before the removal.
func (g *Group) gone() bool {
	_, err := os.Stat(g.Path)
	return errors.Is(err, fs.ErrNotExist)
}

// Remove deletes the group once it is empty (killing what is left first).
// A group that is already gone is not an error.
func (g *Group) Remove(ctx context.Context) error {
	if _, err := os.Stat(g.Path); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if pop, err := g.Populated(); err == nil && pop {
		if err := g.Kill(ctx); err != nil {
			return err
		}
	}
	for {
		err := unix.Rmdir(g.Path)
		if err == nil || errors.Is(err, unix.ENOENT) {
			return nil
		}
		if !errors.Is(err, unix.EBUSY) {
			return fmt.Errorf("cgroup: remove %s: %w", g.Path, err)
		}
		// Dying processes leave the group a moment after populated drops.
		select {
		case <-ctx.Done():
			return fmt.Errorf("cgroup: remove %s: %w (%w)", g.Path, ctx.Err(), err)
		case <-time.After(pollInterval):
		}
	}
}

// Stats are the group's resource figures. Fields the hierarchy does not
// provide are nil.
type Stats struct {
	CPUUsage      time.Duration // cpu.stat usage_usec (always present in cgroup v2)
	CPUUser       time.Duration
	CPUSystem     time.Duration
	MemoryCurrent *int64 // memory.current, bytes
	MemoryPeak    *int64 // memory.peak, bytes (Linux 5.19+)
	OOMKills      *int64 // memory.events oom_kill: processes the kernel killed for memory.max
	PidsCurrent   *int64 // pids.current
}

// Stats reads cpu.stat, and memory.current, memory.events and
// pids.current where the controllers are enabled.
func (g *Group) Stats() (Stats, error) {
	var st Stats
	cpu, err := readKeyed(g.file("cpu.stat"))
	if err != nil {
		return Stats{}, fmt.Errorf("cgroup: %w", err)
	}
	st.CPUUsage = time.Duration(cpu["usage_usec"]) * time.Microsecond
	st.CPUUser = time.Duration(cpu["user_usec"]) * time.Microsecond
	st.CPUSystem = time.Duration(cpu["system_usec"]) * time.Microsecond
	if g.m.memory {
		st.MemoryCurrent = readInt(g.file("memory.current"))
		st.MemoryPeak = readInt(g.file("memory.peak"))
		if ev, err := readKeyed(g.file("memory.events")); err == nil {
			if v, ok := ev["oom_kill"]; ok {
				st.OOMKills = &v
			}
		}
	}
	if g.m.pids {
		st.PidsCurrent = readInt(g.file("pids.current"))
	}
	return st, nil
}

// readInt reads a file holding one integer; nil when absent or garbled.
func readInt(file string) *int64 {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return nil
	}
	return &v
}

// readKeyed reads a flat-keyed cgroup file ("key value" per line).
func readKeyed(file string) (map[string]int64, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return parseKeyed(bufio.NewScanner(f))
}

// parseKeyed parses "key value" lines; lines that are not are skipped.
func parseKeyed(sc *bufio.Scanner) (map[string]int64, error) {
	out := map[string]int64{}
	for sc.Scan() {
		k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), " ")
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil {
			continue
		}
		out[k] = n
	}
	return out, sc.Err()
}
