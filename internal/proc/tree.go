package proc

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Children returns the pids of the direct children of pid, in ascending
// order. It reads /proc/<pid>/task/*/children when the kernel provides
// them, else scans the PPID of every process.
func (fs FS) Children(pid int) ([]int, error) {
	if err := fs.exists(pid); err != nil {
		return nil, err
	}
	if kids, ok := fs.taskChildren(pid); ok {
		return kids, nil
	}
	byParent, err := fs.scanParents()
	if err != nil {
		return nil, err
	}
	return byParent[pid], nil
}

// Descendants returns every descendant of pid, breadth-first, children of
// one parent in ascending order. Processes that exit during the walk are
// skipped.
func (fs FS) Descendants(pid int) ([]int, error) {
	if err := fs.exists(pid); err != nil {
		return nil, err
	}
	children := func(p int) []int {
		kids, _ := fs.taskChildren(p)
		return kids
	}
	if _, ok := fs.taskChildren(pid); !ok {
		// One scan serves the whole walk.
		byParent, err := fs.scanParents()
		if err != nil {
			return nil, err
		}
		children = func(p int) []int { return byParent[p] }
	}
	seen := map[int]bool{pid: true}
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, k := range children(p) {
			if seen[k] { // only a garbled tree has cycles, but never loop
				continue
			}
			seen[k] = true
			out = append(out, k)
			queue = append(queue, k)
		}
	}
	return out, nil
}

// exists returns nil when /proc/<pid> exists, an error wrapping
// ErrNoProcess when it does not, and another error when Root is unusable.
func (fs FS) exists(pid int) error {
	if pid <= 0 {
		return fmt.Errorf("proc: invalid pid %d", pid)
	}
	_, err := os.Stat(fs.path(pid))
	if err == nil {
		return nil
	}
	if errors.Is(err, os.ErrNotExist) {
		if _, rerr := os.Stat(fs.Root); rerr != nil {
			return fmt.Errorf("proc: root unreadable: %w", rerr)
		}
		return fmt.Errorf("proc: pid %d: %w", pid, ErrNoProcess)
	}
	return fmt.Errorf("proc: pid %d: %w", pid, err)
}

// taskChildren reads /proc/<pid>/task/*/children. ok is false when the
// kernel offers no children files for pid (or pid is gone), so the
// caller must fall back to scanning.
func (fs FS) taskChildren(pid int) (kids []int, ok bool) {
	files, _ := filepath.Glob(filepath.Join(fs.path(pid, "task"), "*", "children"))
	seen := map[int]bool{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // the thread exited; its children moved to another thread or parent
		}
		ok = true
		for _, s := range strings.Fields(string(b)) {
			k, err := strconv.Atoi(s)
			if err != nil || k <= 0 || seen[k] {
				continue
			}
			seen[k] = true
			kids = append(kids, k)
		}
	}
	slices.Sort(kids)
	return kids, ok
}

// scanParents reads the PPID of every process under Root and returns the
// children of each parent, in ascending order. Unreadable entries are
// skipped: they exited or are not processes.
func (fs FS) scanParents() (map[int][]int, error) {
	ents, err := os.ReadDir(fs.Root)
	if err != nil {
		return nil, fmt.Errorf("proc: scan: %w", err)
	}
	byParent := map[int][]int{}
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil || p <= 0 {
			continue
		}
		st, err := fs.Stat(p)
		if err != nil {
			continue
		}
		byParent[st.PPID] = append(byParent[st.PPID], p)
	}
	for _, kids := range byParent {
		slices.Sort(kids)
	}
	return byParent, nil
}

// Node is one process of a tree as Tree reads it.
type Node struct {
	PID  int
	PPID int
	Comm string
	Argv []string
	Exe  string // "" when unreadable
}

// Tree returns root and its descendants, parents before children (see
// Descendants), each with its parent, command name, argument vector and
// executable. Processes that exit during the read are left out; root
// itself gone is an error wrapping ErrNoProcess.
func (fs FS) Tree(root int) ([]Node, error) {
	desc, err := fs.Descendants(root)
	if err != nil {
		return nil, fmt.Errorf("proc: tree of %d: %w", root, err)
	}
	out := make([]Node, 0, 1+len(desc))
	for _, pid := range append([]int{root}, desc...) {
		st, err := fs.Stat(pid)
		if err != nil {
			if pid == root {
				return nil, fmt.Errorf("proc: tree of %d: %w", root, err)
			}
			continue
		}
		n := Node{PID: pid, PPID: st.PPID, Comm: st.Comm}
		if argv, err := fs.Cmdline(pid); err == nil {
			n.Argv = argv
		}
		if exe, _, err := fs.Exe(pid); err == nil {
			n.Exe = exe
		}
		out = append(out, n)
	}
	return out, nil
}
