package diag

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/prometheus/procfs"
)

// maxTree bounds the walk so a pathological tree cannot stall a tick.
const maxTree = 4096

// descendants returns the agent's stat followed by the stats of all its live
// descendants. It follows /proc/<pid>/task/<tid>/children when the kernel
// provides it, and otherwise scans every process's parent pid.
func descendants(pfs procfs.FS, root string, agent procfs.ProcStat) ([]procfs.ProcStat, error) {
	probe := filepath.Join(root, strconv.Itoa(agent.PID), "task", strconv.Itoa(agent.PID), "children")
	if _, err := os.Stat(probe); err == nil {
		return walk(pfs, agent, func(pid int) []int { return childrenFiles(root, pid) }), nil
	}
	procs, err := pfs.AllProcs()
	if err != nil {
		return nil, err
	}
	byParent := map[int][]procfs.ProcStat{}
	for _, p := range procs {
		s, err := p.Stat()
		if err != nil {
			continue // exited, or not a process directory we can parse
		}
		byParent[s.PPID] = append(byParent[s.PPID], s)
	}
	stats := []procfs.ProcStat{agent}
	seen := map[int]bool{agent.PID: true}
	for i := 0; i < len(stats) && len(stats) < maxTree; i++ {
		for _, c := range byParent[stats[i].PID] {
			if !seen[c.PID] {
				seen[c.PID] = true
				stats = append(stats, c)
			}
		}
	}
	return stats, nil
}

// walk does a breadth-first walk from agent using kids to list children.
// Children that vanish before their stat is read are skipped.
func walk(pfs procfs.FS, agent procfs.ProcStat, kids func(pid int) []int) []procfs.ProcStat {
	stats := []procfs.ProcStat{agent}
	seen := map[int]bool{agent.PID: true}
	for i := 0; i < len(stats) && len(stats) < maxTree; i++ {
		for _, pid := range kids(stats[i].PID) {
			if seen[pid] {
				continue
			}
			seen[pid] = true
			p, err := pfs.Proc(pid)
			if err != nil {
				continue
			}
			s, err := p.Stat()
			if err != nil {
				continue
			}
			stats = append(stats, s)
		}
	}
	return stats
}

// childrenFiles reads the children of every thread of pid. A process that
// exits meanwhile simply has no children.
func childrenFiles(root string, pid int) []int {
	taskDir := filepath.Join(root, strconv.Itoa(pid), "task")
	tids, err := readDirNames(taskDir)
	if err != nil {
		return nil
	}
	var pids []int
	for _, tid := range tids {
		data, err := os.ReadFile(filepath.Join(taskDir, tid, "children"))
		if err != nil {
			continue
		}
		for f := range strings.FieldsSeq(string(data)) {
			if n, err := strconv.Atoi(f); err == nil && n > 0 {
				pids = append(pids, n)
			}
		}
	}
	return pids
}

func readDirNames(dir string) ([]string, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Readdirnames(-1)
}

// fdSockets counts pid's open file descriptors and returns the inodes of the
// sockets among them.
func fdSockets(pfs procfs.FS, pid int) (int, []uint64, error) {
	p, err := pfs.Proc(pid)
	if err != nil {
		return 0, nil, err
	}
	targets, err := p.FileDescriptorTargets()
	if err != nil {
		return 0, nil, err
	}
	var inodes []uint64
	for _, t := range targets {
		if ino, ok := socketInode(t); ok {
			inodes = append(inodes, ino)
		}
	}
	return len(targets), inodes, nil
}
