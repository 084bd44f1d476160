package cgroup

import (
	"fmt"
	"strings"

	"herd/internal/proc"
)

// IncarnationOf returns the incarnation whose cgroup (under subtree, as
// Subtree names it) holds pid: the first directory below subtree in its
// /proc/PID/cgroup; "" when pid is elsewhere.
func IncarnationOf(fsys proc.FS, pid int, subtree string) (string, error) {
	b, err := fsys.Read(pid, "cgroup")
	if err != nil {
		return "", err
	}
	own, err := parseOwnCgroup(string(b))
	if err != nil {
		return "", fmt.Errorf("cgroup: pid %d: %w", pid, err)
	}
	return below(own, subtree), nil
}

// below is the first element of path under subtree ("" when path is not
// under it, or is subtree itself).
func below(path, subtree string) string {
	if subtree == "" || subtree == "/" {
		return ""
	}
	rest, ok := strings.CutPrefix(path, strings.TrimSuffix(subtree, "/")+"/")
	if !ok {
		return ""
	}
	inc, _, _ := strings.Cut(rest, "/")
	return inc
}
