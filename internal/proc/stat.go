package proc

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Stat holds the fields of /proc/<pid>/stat that herd uses.
type Stat struct {
	PID        int    // field 1
	PPID       int    // field 4
	PGRP       int    // field 5, process group id
	Session    int    // field 6
	Comm       string // field 2, without the parentheses; at most 15 bytes
	State      byte   // field 3: R, S, D, Z, T, t, X, I, …
	StartTime  uint64 // field 22, clock ticks since boot
	UTime      uint64 // field 14, clock ticks
	STime      uint64 // field 15, clock ticks
	NumThreads int    // field 20
	RSSPages   int64  // field 24
	// ExitCode is field 52, the wait status of a process that has exited
	// and is not reaped yet (a zombie): the exit code shifted left by 8,
	// or the signal that killed it (with 0x80 when it dumped core). -1
	// when the kernel does not show it (older than 3.5, or a garbled line).
	ExitCode int
}

// Zombie reports whether the process has exited (or is exiting) and only
// waits to be reaped: its state is Z or X and no other thread of it runs.
// A thread-group leader that exits before the other threads reads Z while
// its process lives on: a Go program that execs from another thread shows
// that for a moment (the leader goes first), one whose main thread called
// pthread_exit for good.
func (s Stat) Zombie() bool {
	return (s.State == 'Z' || s.State == 'X' || s.State == 'x') && s.NumThreads <= 1
}

// Stat reads and parses /proc/<pid>/stat. It returns an error wrapping
// ErrNoProcess when the pid does not exist.
func (fs FS) Stat(pid int) (Stat, error) {
	b, err := fs.readPidFile(pid, "stat")
	if err != nil {
		return Stat{}, err
	}
	st, err := ParseStat(b)
	if err != nil {
		return Stat{}, fmt.Errorf("proc: stat of pid %d: %w", pid, err)
	}
	if st.PID != pid {
		return Stat{}, fmt.Errorf("proc: stat of pid %d: %w: names pid %d", pid, errGarbled, st.PID)
	}
	return st, nil
}

// ParseStat parses the content of a /proc/<pid>/stat file. The command
// name may contain spaces and parentheses, so the fields are read after
// the last ')'.
func ParseStat(b []byte) (Stat, error) {
	open := bytes.IndexByte(b, '(')
	closing := bytes.LastIndexByte(b, ')')
	if open < 0 || closing < open {
		return Stat{}, fmt.Errorf("%w: no (comm)", errGarbled)
	}
	var st Stat
	pid, err := strconv.Atoi(strings.TrimSpace(string(b[:open])))
	if err != nil || pid <= 0 {
		return Stat{}, fmt.Errorf("%w: pid %q", errGarbled, bytes.TrimSpace(b[:open]))
	}
	st.PID = pid
	st.Comm = string(b[open+1 : closing])

	// rest[0] is field 3 (state); field n is rest[n-3].
	rest := strings.Fields(string(b[closing+1:]))
	const lastField = 24 // rss
	if len(rest) < lastField-2 {
		return Stat{}, fmt.Errorf("%w: %d fields after comm, want at least %d", errGarbled, len(rest), lastField-2)
	}
	if len(rest[0]) != 1 {
		return Stat{}, fmt.Errorf("%w: state %q", errGarbled, rest[0])
	}
	st.State = rest[0][0]

	p := fieldParser{rest: rest}
	st.PPID = p.int(4)
	st.PGRP = p.int(5)
	st.Session = p.int(6)
	st.UTime = p.uint(14)
	st.STime = p.uint(15)
	st.NumThreads = p.int(20)
	st.StartTime = p.uint(22)
	st.RSSPages = p.int64(24)
	if p.err != nil {
		return Stat{}, p.err
	}
	st.ExitCode = -1
	const exitCodeField = 52
	if len(rest) >= exitCodeField-2 {
		if v, err := strconv.Atoi(p.field(exitCodeField)); err == nil && v >= 0 {
			st.ExitCode = v
		}
	}
	return st, nil
}

// fieldParser converts stat fields by their 1-based number and keeps the
// first error.
type fieldParser struct {
	rest []string
	err  error
}

func (p *fieldParser) field(n int) string { return p.rest[n-3] }

func (p *fieldParser) fail(n int, err error) {
	if p.err == nil {
		p.err = fmt.Errorf("%w: field %d %q: %w", errGarbled, n, p.field(n), err)
	}
}

func (p *fieldParser) int(n int) int {
	v, err := strconv.Atoi(p.field(n))
	if err != nil {
		p.fail(n, err)
	}
	return v
}

func (p *fieldParser) int64(n int) int64 {
	v, err := strconv.ParseInt(p.field(n), 10, 64)
	if err != nil {
		p.fail(n, err)
	}
	return v
}

func (p *fieldParser) uint(n int) uint64 {
	v, err := strconv.ParseUint(p.field(n), 10, 64)
	if err != nil {
		p.fail(n, err)
	}
	return v
}

// isESRCH reports whether err says the process went away mid-read.
func isESRCH(err error) bool { return errors.Is(err, unix.ESRCH) }
