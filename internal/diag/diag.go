// Package diag samples /proc diagnostics of an agent's process tree to explain why it is silent.
package diag

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/procfs"
)

// userHZ is the kernel's fixed USER_HZ, the unit of the times in /proc/<pid>/stat.
const userHZ = 100

// Diagnostics is one sample of an agent's process tree. It is shown by
// `herd describe session` and kept in stall events; the JSON keys are part of
// the product contract.
type Diagnostics struct {
	SampledAt time.Time `json:"sampled_at"`
	// ProcState is the agent's state as the kernel words it, e.g. "S (sleeping)".
	ProcState string `json:"proc_state"`
	// CPUSeconds is the CPU time (user+system) of the tree: every live member,
	// plus what their already reaped children used, so short-lived commands run
	// by the agent still count as progress.
	CPUSeconds float64 `json:"cpu_seconds"`
	// CPUDelta is CPUSeconds minus the previous sample's; nil when unknown (no
	// previous sample, a previous sample of another process, or a tree that
	// lost members and so went backwards).
	CPUDelta *float64 `json:"cpu_delta"`
	// CPUPercent is CPUDelta over the wall time between the samples, in percent
	// of one CPU; nil when unknown.
	CPUPercent *float64 `json:"cpu_percent"`
	// RSSBytes is the sum of the members' resident sets (shared pages count once per member).
	RSSBytes int64 `json:"rss_bytes"`
	// Threads is the number of threads in the tree.
	Threads int `json:"threads"`
	// FDs is the number of open file descriptors in the tree.
	FDs int `json:"fds"`
	// TCPEstablished counts ESTABLISHED tcp and tcp6 sockets held open by the
	// tree's own file descriptors, not the whole network namespace.
	TCPEstablished int `json:"tcp_established"`
	// Children are the agent's direct children, by pid.
	Children []Child `json:"children"`
	// WChan is the kernel function the agent waits in, "" when running or hidden.
	WChan string `json:"wchan"`
	// Cgroup is what the incarnation's cgroup counts of its whole tree,
	// dead members included; nil when it runs in none.
	Cgroup *Cgroup `json:"cgroup,omitempty"`

	// PID and StartTime identify the sampled agent so that a later Collect
	// only computes a delta against a sample of the same process. They are not
	// part of the JSON contract: a sample decoded from JSON yields an unknown delta.
	PID       int    `json:"-"`
	StartTime uint64 `json:"-"` // clock ticks since boot, /proc/<pid>/stat field 22
}

// Cgroup is an incarnation's resource use as its cgroup counts it.
type Cgroup struct {
	// CPUSeconds is cpu.stat usage_usec: every process the tree ever ran.
	CPUSeconds float64 `json:"cpu_seconds"`
	// MemoryBytes is memory.current, or, without the memory controller,
	// the resident memory of the group's members.
	MemoryBytes int64 `json:"memory_bytes"`
	// MemorySource says which: "memory.current" or "rss".
	MemorySource string `json:"memory_source"`
	// OOMKills is memory.events oom_kill (memory controller only).
	OOMKills int64 `json:"oom_kills"`
}

// Child is a direct child process of the agent.
type Child struct {
	PID  int    `json:"pid"`
	Comm string `json:"comm"`
}

// Collector reads diagnostics from a proc filesystem.
type Collector struct {
	// Root is the proc mount point; "" means "/proc".
	Root string
	// Logger receives debug notes about skipped input; nil discards them.
	Logger *slog.Logger
}

// Collect samples pid and its descendants at now. prev (may be nil) is the
// previous sample of the same process and is used for the CPU delta.
//
// Collect fails only when the agent itself cannot be read. Descendants that
// exit mid-sample are skipped, and one whose fds cannot be read (another
// user's setuid program) adds no FDs or sockets to the counts.
func (c Collector) Collect(pid int, prev *Diagnostics, now time.Time) (Diagnostics, error) {
	if pid <= 0 {
		return Diagnostics{}, fmt.Errorf("diag: invalid pid %d", pid)
	}
	root := c.Root
	if root == "" {
		root = procfs.DefaultMountPoint
	}
	pfs, err := procfs.NewFS(root)
	if err != nil {
		return Diagnostics{}, fmt.Errorf("diag: open %s: %w", root, err)
	}
	agent, err := pfs.Proc(pid)
	if err != nil {
		return Diagnostics{}, fmt.Errorf("diag: pid %d: %w", pid, err)
	}
	agentStat, err := agent.Stat()
	if err != nil {
		return Diagnostics{}, fmt.Errorf("diag: pid %d stat: %w", pid, err)
	}

	tree, err := descendants(pfs, root, agentStat)
	if err != nil {
		return Diagnostics{}, fmt.Errorf("diag: pid %d descendants: %w", pid, err)
	}

	d := Diagnostics{
		SampledAt: now,
		ProcState: procState(root, pid, agentStat.State),
		Children:  []Child{},
		PID:       pid,
		StartTime: agentStat.Starttime,
	}
	if w, err := agent.Wchan(); err == nil {
		d.WChan = strings.TrimSpace(w)
	}

	var ticks uint64
	inodes := map[uint64]struct{}{}
	for _, s := range tree {
		ticks += uint64(s.UTime) + uint64(s.STime) + uint64(max(s.CUTime, 0)) + uint64(max(s.CSTime, 0))
		d.RSSBytes += int64(max(s.ResidentMemory(), 0))
		d.Threads += s.NumThreads
		if s.PPID == pid {
			d.Children = append(d.Children, Child{PID: s.PID, Comm: s.Comm})
		}
		n, socks, err := fdSockets(pfs, s.PID)
		if err != nil {
			if s.PID == pid && !errors.Is(err, fs.ErrNotExist) {
				return Diagnostics{}, fmt.Errorf("diag: pid %d fds: %w", pid, err)
			}
			c.logger().Debug("skipping fds", "pid", s.PID, "err", err)
			continue
		}
		d.FDs += n
		for _, ino := range socks {
			inodes[ino] = struct{}{}
		}
	}
	slices.SortFunc(d.Children, func(a, b Child) int { return a.PID - b.PID })
	d.CPUSeconds = float64(ticks) / userHZ

	if len(inodes) > 0 {
		for _, name := range []string{"tcp", "tcp6"} {
			n, skipped, err := countEstablishedFile(filepath.Join(root, strconv.Itoa(pid), "net", name), inodes)
			if err != nil && !errors.Is(err, fs.ErrNotExist) {
				return Diagnostics{}, fmt.Errorf("diag: pid %d net/%s: %w", pid, name, err)
			}
			if skipped > 0 {
				c.logger().Debug("skipped garbled tcp lines", "pid", pid, "table", name, "lines", skipped)
			}
			d.TCPEstablished += n
		}
	}

	d.CPUDelta, d.CPUPercent = cpuDelta(prev, d)
	return d, nil
}

func (c Collector) logger() *slog.Logger {
	if c.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return c.Logger
}

// cpuDelta compares cur with prev. The delta is unknown without a previous
// sample of the same process, or when the tree's CPU time went backwards
// (a member left the tree); the percentage is also unknown without wall time.
func cpuDelta(prev *Diagnostics, cur Diagnostics) (delta, percent *float64) {
	if prev == nil || prev.PID == 0 || prev.PID != cur.PID || prev.StartTime != cur.StartTime {
		return nil, nil
	}
	dv := cur.CPUSeconds - prev.CPUSeconds
	if dv < 0 {
		return nil, nil
	}
	wall := cur.SampledAt.Sub(prev.SampledAt).Seconds()
	if wall <= 0 {
		return &dv, nil
	}
	pv := dv / wall * 100
	return &dv, &pv
}

// Progress is whether a tree used CPU between two samples.
type Progress string

// Progress values. The auto-kill rule treats ProgressUnknown as progress.
const (
	ProgressYes     Progress = "yes"
	ProgressNo      Progress = "no"
	ProgressUnknown Progress = "unknown"
)

// minProgress is half a clock tick: any real tick counts, float noise does not.
const minProgress = 0.5 / userHZ

// CPUProgress answers whether the tree sampled in d made CPU progress since the
// previous sample d was collected against; ProgressUnknown when d.CPUDelta is nil.
func CPUProgress(d Diagnostics) Progress {
	switch {
	case d.CPUDelta == nil:
		return ProgressUnknown
	case *d.CPUDelta >= minProgress:
		return ProgressYes
	default:
		return ProgressNo
	}
}

// stateNames words the single-letter states of /proc/<pid>/stat as /proc/<pid>/status does.
var stateNames = map[string]string{
	"R": "R (running)",
	"S": "S (sleeping)",
	"D": "D (disk sleep)",
	"T": "T (stopped)",
	"t": "t (tracing stop)",
	"X": "X (dead)",
	"Z": "Z (zombie)",
	"P": "P (parked)",
	"I": "I (idle)",
}

// procState words the stat letter; only letters it does not know cost a read
// of the (much more expensive) /proc/<pid>/status.
func procState(root string, pid int, letter string) string {
	if name, ok := stateNames[letter]; ok {
		return name
	}
	if s, err := statusState(filepath.Join(root, strconv.Itoa(pid), "status")); err == nil && s != "" {
		return s
	}
	return letter
}

func statusState(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(io.LimitReader(f, 64<<10))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "State:"); ok {
			return strings.TrimSpace(v), nil
		}
	}
	return "", sc.Err()
}
