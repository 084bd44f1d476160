// Package proc reads process facts from /proc and signals processes only after verifying their identity.
package proc

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// EnvBootIDFile names a file that replaces /proc/sys/kernel/random/boot_id,
// so tests can simulate a reboot.
const EnvBootIDFile = "HERD_BOOT_ID_FILE"

// DefaultBootIDFile is where the kernel publishes the current boot id.
const DefaultBootIDFile = "/proc/sys/kernel/random/boot_id"

// ErrNoProcess means the process does not exist (any more). It wraps
// os.ErrNotExist, so errors.Is(err, fs.ErrNotExist) holds as well.
var ErrNoProcess = fmt.Errorf("proc: no such process: %w", os.ErrNotExist)

// ErrIdentityMismatch means the process behind a pid is not (or cannot be
// shown to be) the recorded one; herd never signals it.
var ErrIdentityMismatch = errors.New("proc: identity mismatch")

// errGarbled marks proc files whose content cannot be parsed.
var errGarbled = errors.New("proc: garbled")

// BootID returns the current boot id: the content of the file named by
// HERD_BOOT_ID_FILE when set, else of /proc/sys/kernel/random/boot_id,
// with surrounding white space removed.
func BootID() (string, error) {
	path := os.Getenv(EnvBootIDFile)
	if path == "" {
		path = DefaultBootIDFile
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("proc: boot id: %w", err)
	}
	id := strings.TrimSpace(string(b))
	if id == "" {
		return "", fmt.Errorf("proc: boot id: %s is empty", path)
	}
	return id, nil
}

// FS reads a proc file system mounted at Root ("/proc" for the real one;
// tests point it at fixture trees).
type FS struct {
	Root string
}

// Real returns the FS of the running system.
func Real() FS { return FS{Root: "/proc"} }

// path joins Root, the pid and the file name.
func (fs FS) path(pid int, name ...string) string {
	return filepath.Join(append([]string{fs.Root, strconv.Itoa(pid)}, name...)...)
}

// readPidFile reads /proc/<pid>/<name>. A missing pid (or a process that
// went away while being read) yields ErrNoProcess; a missing or unreadable
// Root yields a different error, because then nothing is known.
func (fs FS) readPidFile(pid int, name string) ([]byte, error) {
	return fs.readPid(pid, name, os.ReadFile)
}

// readPidMemory is readPidFile for the files the kernel copies out of the
// process's memory at each read (environ, cmdline): they are read whole
// in one read(2), see readOnce.
func (fs FS) readPidMemory(pid int, name string) ([]byte, error) {
	return fs.readPid(pid, name, readOnce)
}

// readPid reads /proc/<pid>/<name> with read, mapping the errors as
// readPidFile says.
func (fs FS) readPid(pid int, name string, read func(string) ([]byte, error)) ([]byte, error) {
	if pid <= 0 {
		return nil, fmt.Errorf("proc: invalid pid %d", pid)
	}
	b, err := read(fs.path(pid, name))
	if err != nil {
		return nil, fs.pidFileErr(pid, name, err)
	}
	return b, nil
}

// pidFileErr is the error of reading /proc/<pid>/<name>: ErrNoProcess for
// a process that is gone, something else when Root itself is unreadable.
func (fs FS) pidFileErr(pid int, name string, err error) error {
	if errors.Is(err, os.ErrNotExist) || isESRCH(err) {
		if _, rerr := os.Stat(fs.Root); rerr != nil {
			return fmt.Errorf("proc: root unreadable: %w", rerr)
		}
		return fmt.Errorf("proc: pid %d: %w", pid, ErrNoProcess)
	}
	return fmt.Errorf("proc: read %s of pid %d: %w", name, pid, err)
}

// envBufs holds the buffers EnvValue reads environment blocks into: a
// scan of every process reads thousands of them, and each read through
// os.ReadFile costs a stat, a second read and a fresh buffer.
var envBufs = sync.Pool{New: func() any { b := make([]byte, 16<<10); return &b }}

// maxPooledEnv is the largest buffer envBufs keeps.
const maxPooledEnv = 256 << 10

// readPidFileInto reads /proc/<pid>/<name> into *buf (grown when the file
// is larger) with open, one read from its start and close, and returns
// the bytes read.
func (fs FS) readPidFileInto(pid int, name string, buf *[]byte) ([]byte, error) {
	if pid <= 0 {
		return nil, fmt.Errorf("proc: invalid pid %d", pid)
	}
	path := fs.Root + "/" + strconv.Itoa(pid) + "/" + name
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fs.pidFileErr(pid, name, err)
	}
	defer unix.Close(fd)
	// One read from the start, as readOnce, for the same reason: a
	// block read in pieces across an exec comes back cut short.
	b := *buf
	for {
		n, err := unix.Pread(fd, b, 0)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case err != nil:
			return nil, fs.pidFileErr(pid, name, err)
		case n < len(b):
			return b[:n], nil
		case len(b) >= maxMemoryFile:
			return nil, fmt.Errorf("proc: %s of pid %d: %w: larger than %d bytes", name, pid, errGarbled, maxMemoryFile)
		}
		b = make([]byte, 4*len(b))
		*buf = b
	}
}

// readOnce reads a file whole in one read(2) from its start, reading again
// with a larger buffer while the buffer comes back full. For environ and
// cmdline each read is a copy of the process's memory at that moment: read
// in pieces, as os.ReadFile does, a piece read after the process exec'd
// comes back empty (the image it was opened on is gone), and the content
// is cut short — an environment without its HERD_INCARNATION marker, or
// with the marker's value cut, would read as another incarnation's.
func readOnce(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, err
	}
	for size := 4 << 10; size <= maxMemoryFile; size *= 4 {
		buf := make([]byte, size)
		var n int
		var rerr error
		if err := rc.Read(func(fd uintptr) bool {
			for {
				n, rerr = unix.Pread(int(fd), buf, 0)
				if !errors.Is(rerr, unix.EINTR) {
					return true
				}
			}
		}); err != nil {
			return nil, err
		}
		if rerr != nil {
			return nil, &os.PathError{Op: "read", Path: path, Err: rerr}
		}
		if n < size {
			return buf[:n], nil
		}
	}
	return nil, fmt.Errorf("proc: %s: %w: larger than %d bytes", path, errGarbled, maxMemoryFile)
}

// maxMemoryFile bounds what readOnce reads: the kernel limits a process's
// arguments and environment to a quarter of its stack limit.
const maxMemoryFile = 64 << 20

// Environ returns the environment the process was started with (or has
// since written into its environment block). Permission errors are
// returned as such (errors.Is(err, fs.ErrPermission)).
func (fs FS) Environ(pid int) (map[string]string, error) {
	b, err := fs.readPidMemory(pid, "environ")
	if err != nil {
		return nil, err
	}
	env := make(map[string]string)
	for _, kv := range splitNUL(b) {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			continue // not a K=V entry; the process may have scribbled over its block
		}
		if _, dup := env[k]; !dup {
			env[k] = v // first wins, as getenv(3) does
		}
	}
	return env, nil
}

// HasEnv reports whether the process's environment sets key to value (its
// first key= entry, as Environ and getenv(3) read it), without building
// the map: a scan of every process for one marker reads each block once
// and allocates nothing per entry.
func (fs FS) HasEnv(pid int, key, value string) (bool, error) {
	v, ok, err := fs.EnvValue(pid, key)
	return ok && v == value, err
}

// EnvValue returns the value of key in the process's environment (its
// first key= entry, as Environ and getenv(3) read it) and whether it is
// set, without building the map: a scan of every process for several
// markers at once reads each block once.
func (fs FS) EnvValue(pid int, key string) (string, bool, error) {
	buf := envBufs.Get().(*[]byte)
	defer func() {
		if cap(*buf) <= maxPooledEnv {
			envBufs.Put(buf) // a rare huge block is not kept
		}
	}()
	b, err := fs.readPidFileInto(pid, "environ", buf)
	if err != nil {
		return "", false, err
	}
	for len(b) > 0 {
		entry := b
		if i := bytes.IndexByte(b, 0); i >= 0 {
			entry, b = b[:i], b[i+1:]
		} else {
			b = nil
		}
		if len(entry) > len(key) && entry[len(key)] == '=' && string(entry[:len(key)]) == key {
			return string(entry[len(key)+1:]), true, nil
		}
	}
	return "", false, nil
}

// Cmdline returns the argument vector of the process; empty for kernel
// threads and zombies.
func (fs FS) Cmdline(pid int) ([]string, error) {
	b, err := fs.readPidMemory(pid, "cmdline")
	if err != nil {
		return nil, err
	}
	return splitNUL(b), nil
}

// splitNUL splits a NUL-separated (and usually NUL-terminated) block.
func splitNUL(b []byte) []string {
	b = bytes.TrimSuffix(b, []byte{0})
	if len(b) == 0 {
		return []string{}
	}
	parts := bytes.Split(b, []byte{0})
	out := make([]string, len(parts))
	for i, p := range parts {
		out[i] = string(p)
	}
	return out
}

// ClockTicks returns USER_HZ, the unit of start times and CPU times in
// /proc/<pid>/stat. The kernel fixes it at 100 on every Linux architecture
// herd runs on, whatever the internal HZ.
func ClockTicks() uint64 { return 100 }

// StartedAt converts a start time in clock ticks since boot into wall time.
func StartedAt(bootTime time.Time, startTicks uint64) time.Time {
	hz := ClockTicks()
	sec := startTicks / hz
	frac := startTicks % hz
	return bootTime.Add(time.Duration(sec)*time.Second + time.Duration(frac)*time.Second/time.Duration(hz))
}

// BootTime reads the boot time (btime) from <Root>/stat.
func (fs FS) BootTime() (time.Time, error) {
	f, err := os.Open(filepath.Join(fs.Root, "stat"))
	if err != nil {
		return time.Time{}, fmt.Errorf("proc: boot time: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "btime ")
		if !ok {
			continue
		}
		sec, err := strconv.ParseInt(strings.TrimSpace(rest), 10, 64)
		if err != nil {
			return time.Time{}, fmt.Errorf("proc: boot time: %w: %q", errGarbled, rest)
		}
		return time.Unix(sec, 0), nil
	}
	if err := sc.Err(); err != nil {
		return time.Time{}, fmt.Errorf("proc: boot time: %w", err)
	}
	return time.Time{}, fmt.Errorf("proc: boot time: no btime line")
}

// Read returns /proc/<pid>/<name> (a small file the kernel writes whole:
// cgroup, status), with the errors of readPidFile: ErrNoProcess for a
// process that is gone.
func (fs FS) Read(pid int, name string) ([]byte, error) {
	return fs.readPidFile(pid, name)
}
