package proc

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// deletedSuffix is what the kernel appends to /proc/<pid>/exe when the
// executable was unlinked (or replaced by a rename) after the exec.
const deletedSuffix = " (deleted)"

// Exe returns the path of the executable pid runs and whether that file
// has since been deleted or replaced on disk: an agent updated in place
// keeps running its old binary until it is restarted.
func (fs FS) Exe(pid int) (path string, deleted bool, err error) {
	if pid <= 0 {
		return "", false, fmt.Errorf("proc: invalid pid %d", pid)
	}
	target, err := os.Readlink(fs.path(pid, "exe"))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) || isESRCH(err) {
			if err := fs.exists(pid); err != nil {
				return "", false, err
			}
			// Kernel threads and zombies have no exe.
			return "", false, fmt.Errorf("proc: exe of pid %d: %w", pid, err)
		}
		return "", false, fmt.Errorf("proc: exe of pid %d: %w", pid, err)
	}
	path, deleted = ParseExe(target)
	return path, deleted, nil
}

// ParseExe splits the target of a /proc/<pid>/exe link into the path and
// whether the kernel marked it deleted.
func ParseExe(target string) (path string, deleted bool) {
	if p, ok := strings.CutSuffix(target, deletedSuffix); ok {
		return p, true
	}
	return target, false
}

// PIDs returns the pids of all processes under Root, in no particular
// order.
func (fs FS) PIDs() ([]int, error) {
	ents, err := os.ReadDir(fs.Root)
	if err != nil {
		return nil, fmt.Errorf("proc: list: %w", err)
	}
	pids := make([]int, 0, len(ents))
	for _, e := range ents {
		if p, err := strconv.Atoi(e.Name()); err == nil && p > 0 {
			pids = append(pids, p)
		}
	}
	return pids, nil
}
