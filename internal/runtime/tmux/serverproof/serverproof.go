// Package serverproof proves from /proc that a pid is the tmux server
// listening on a socket: the tmux client calls it before it signals the
// server a listing named. It only reads /proc: it must never signal a
// process nor run tmux.
package serverproof

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"herd"
	"herd/internal/proc"
)

// A listing's server pid is tmux's word, carried by a pipe from whatever
// binary answered: a wrapper, a wedged or replaced server, or a pid the
// server held before it exited and another process took. Before anything is
// sent to it, the pid is proven to be the server of this client's socket,
// from the kernel's own records: the process is a tmux (its comm), it holds
// the listening socket bound at this client's socket path (its fd table
// against /proc/net/unix), and its start time is the same before and after
// those reads. The signal then goes through proc.Signal, which verifies
// pid, start time and boot id again while a pidfd pins the process.

// errNotServer wraps every reason a pid was not proven to be the server.
var errNotServer = errors.New("tmux: not the server of this socket")

// soAcceptCon is __SO_ACCEPTCON in the Flags column of /proc/net/unix: the
// socket listens.
const soAcceptCon = 0x10000

// maxServerFDs bounds how many descriptors of a claimed server are read.
const maxServerFDs = 1 << 16

// socketPaths are the paths where tmux may bind the socket named label, in
// its own order ($TMUX_TMPDIR, then /tmp; each resolved like tmux's
// realpath), so a server found listening at any of them serves that label.
func socketPaths(label string) []string {
	dirs := []string{"/tmp"}
	if d := os.Getenv("TMUX_TMPDIR"); d != "" {
		dirs = []string{d, "/tmp"}
	}
	var paths []string
	seen := map[string]bool{}
	for _, d := range dirs {
		if r, err := filepath.EvalSymlinks(d); err == nil {
			d = r
		}
		p := filepath.Join(d, fmt.Sprintf("tmux-%d", os.Getuid()), label)
		if !seen[p] {
			seen[p] = true
			paths = append(paths, p)
		}
	}
	return paths
}

// listeningInodes returns the inodes of the listening unix sockets bound at
// one of paths, read from the table in fs (net/unix under its root).
func listeningInodes(fs proc.FS, paths []string) (map[uint64]bool, error) {
	b, err := os.ReadFile(filepath.Join(fs.Root, "net", "unix"))
	if err != nil {
		return nil, fmt.Errorf("tmux: read unix socket table: %w", err)
	}
	return parseUnixTable(b, paths), nil
}

// parseUnixTable parses /proc/net/unix ("Num RefCount Protocol Flags Type
// St Inode Path"), keeping the inodes of listening sockets bound at one of
// paths. Malformed lines are skipped.
func parseUnixTable(b []byte, paths []string) map[uint64]bool {
	want := map[string]bool{}
	for _, p := range paths {
		want[p] = true
	}
	inodes := map[uint64]bool{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for first := true; sc.Scan(); first = false {
		if first {
			continue // the header
		}
		f := strings.Fields(sc.Text())
		if len(f) < 8 {
			continue // unbound
		}
		flags, err := strconv.ParseUint(f[3], 16, 32)
		if err != nil || flags&soAcceptCon == 0 {
			continue
		}
		inode, err := strconv.ParseUint(f[6], 10, 64)
		if err != nil {
			continue
		}
		// The path is the rest of the line: it may hold spaces.
		path := strings.Join(f[7:], " ")
		if want[path] {
			inodes[inode] = true
		}
	}
	return inodes
}

// holdsSocket reports whether process pid has one of inodes open.
func holdsSocket(fs proc.FS, pid int, inodes map[uint64]bool) (bool, error) {
	dir := filepath.Join(fs.Root, strconv.Itoa(pid), "fd")
	f, err := os.Open(dir)
	if err != nil {
		return false, fmt.Errorf("tmux: fds of pid %d: %w", pid, err)
	}
	defer f.Close()
	names, err := f.Readdirnames(maxServerFDs)
	if err != nil && len(names) == 0 {
		return false, fmt.Errorf("tmux: fds of pid %d: %w", pid, err)
	}
	for _, n := range names {
		link, err := os.Readlink(filepath.Join(dir, n))
		if err != nil {
			continue // closed meanwhile
		}
		s, ok := strings.CutPrefix(link, "socket:[")
		if !ok {
			continue
		}
		inode, err := strconv.ParseUint(strings.TrimSuffix(s, "]"), 10, 64)
		if err == nil && inodes[inode] {
			return true, nil
		}
	}
	return false, nil
}

// Verify proves that pid is the tmux server listening on the socket named
// label (tmux's -L, or "default") and returns its identity under bootID;
// otherwise an error wrapping errNotServer (or the reason nothing could be
// read).
func Verify(fs proc.FS, label string, pid int, bootID string) (herd.Identity, error) {
	if pid <= 0 {
		return herd.Identity{}, fmt.Errorf("%w: pid %d", errNotServer, pid)
	}
	st, err := fs.Stat(pid)
	if err != nil {
		return herd.Identity{}, fmt.Errorf("%w: %w", errNotServer, err)
	}
	if st.Zombie() || !strings.HasPrefix(st.Comm, "tmux") {
		return herd.Identity{}, fmt.Errorf("%w: pid %d is %q (state %c)", errNotServer, pid, st.Comm, st.State)
	}
	paths := socketPaths(label)
	inodes, err := listeningInodes(fs, paths)
	if err != nil {
		return herd.Identity{}, fmt.Errorf("%w: %w", errNotServer, err)
	}
	holds, err := holdsSocket(fs, pid, inodes)
	if err != nil {
		return herd.Identity{}, fmt.Errorf("%w: %w", errNotServer, err)
	}
	if !holds {
		return herd.Identity{}, fmt.Errorf("%w: pid %d (%s) does not listen on %s", errNotServer, pid, st.Comm, strings.Join(paths, " or "))
	}
	again, err := fs.Stat(pid)
	if err != nil || again.StartTime != st.StartTime {
		return herd.Identity{}, fmt.Errorf("%w: pid %d replaced while being checked", errNotServer, pid)
	}
	return herd.Identity{BootID: bootID, PID: pid, StartTime: st.StartTime}, nil
}
