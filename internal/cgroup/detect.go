// Package cgroup contains each incarnation's whole process tree: in a cgroup v2 of its own when the host allows, else by its environment marker.
package cgroup

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// ErrUnavailable means herd cannot run incarnations in cgroups of its own
// here; the error says why, and containment falls back to the marker.
var ErrUnavailable = errors.New("cgroup: unavailable")

// DefaultName is the directory of herd's subtree under its own cgroup.
const DefaultName = "herd"

// Options say where to look for cgroups. The zero value looks at the
// running system.
type Options struct {
	ProcRoot string // "" is /proc
	Mount    string // cgroup2 mount point; "" finds it in <ProcRoot>/self/mountinfo
	Name     string // herd's subtree under its own cgroup; "" is DefaultName
	// Off, when set, is why cgroups are not to be used even where the
	// host allows them (HERD_CONTAINMENT=marker): the marker contains.
	Off string
}

// Manager creates incarnation cgroups under herd's subtree.
type Manager struct {
	mount string // the cgroup2 mount point
	root  string // herd's subtree, e.g. /sys/fs/cgroup/herd
	// subtree is root as /proc/PID/cgroup names it ("/herd").
	subtree string

	// Which features the kernel and the hierarchy offer under root.
	memory bool // memory controller: memory.max, memory.current, memory.events
	pids   bool // pids controller: pids.max
	kill   bool // cgroup.kill (Linux 5.14+); else freeze and kill each process

	// notes say why a feature is missing, for the one log line.
	notes []string
}

// Root returns the directory of herd's subtree.
func (m *Manager) Root() string { return m.root }

// Subtree returns herd's subtree as /proc/PID/cgroup names it ("/herd",
// "/user.slice/.../herd"): an incarnation's processes are in
// <subtree>/<incarnation>.
func (m *Manager) Subtree() string { return m.subtree }

// Memory reports whether memory.max is enforced by the kernel and memory
// usage and OOM kills can be read from the cgroup.
func (m *Manager) Memory() bool { return m.memory }

// Pids reports whether pids.max is enforced by the kernel.
func (m *Manager) Pids() bool { return m.pids }

// Describe says in one line what containment this host gets and why
// features are missing.
func (m *Manager) Describe() string {
	var have []string
	if m.kill {
		have = append(have, "cgroup.kill")
	} else {
		have = append(have, "freeze+kill")
	}
	if m.memory {
		have = append(have, "memory")
	}
	if m.pids {
		have = append(have, "pids")
	}
	s := fmt.Sprintf("cgroup v2 at %s (%s)", m.root, strings.Join(have, ", "))
	if len(m.notes) > 0 {
		s += "; " + strings.Join(m.notes, "; ")
	}
	return s
}

// Detect finds the cgroup v2 hierarchy, herd's own cgroup in it, and makes
// (or reuses) herd's subtree there, enabling the memory and pids
// controllers for its children where the hierarchy has them. It returns an
// error wrapping ErrUnavailable, saying why, when herd cannot create and
// write cgroups: no cgroup2 mounted, not root and not delegated, read-only.
//
// herd's subtree goes under the cgroup herd runs in: the root cgroup when
// herd runs there (as root, on the host or in a container with its own
// cgroup namespace), or a systemd-delegated cgroup (systemd-run --user
// --scope -p Delegate=yes herd daemon, or a unit with Delegate=yes).
func Detect(opts Options) (*Manager, error) {
	if opts.Off != "" {
		return nil, fmt.Errorf("%w: %s", ErrUnavailable, opts.Off)
	}
	procRoot := opts.ProcRoot
	if procRoot == "" {
		procRoot = "/proc"
	}
	mount := opts.Mount
	if mount == "" {
		var err error
		mount, err = findMount(filepath.Join(procRoot, "self", "mountinfo"))
		if err != nil {
			return nil, err
		}
	}
	own, err := ownCgroup(filepath.Join(procRoot, "self", "cgroup"))
	if err != nil {
		return nil, err
	}
	name := opts.Name
	if name == "" {
		name = DefaultName
	}
	if err := checkName(name); err != nil {
		return nil, err
	}
	parent := filepath.Join(mount, own)
	root := filepath.Join(parent, name)
	if err := os.Mkdir(root, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		hint := ""
		if errors.Is(err, fs.ErrPermission) || errors.Is(err, unix.EROFS) {
			hint = " (not root and no delegated cgroup; run the daemon under systemd-run --user --scope -p Delegate=yes)"
		}
		return nil, fmt.Errorf("%w: cannot create %s: %w%s", ErrUnavailable, root, err, hint)
	}
	for _, f := range []string{filepath.Join(root, "cgroup.procs"), filepath.Join(parent, "cgroup.procs")} {
		if err := unix.Access(f, unix.W_OK); err != nil {
			return nil, fmt.Errorf("%w: %s is not writable: %w (processes cannot be moved)", ErrUnavailable, f, err)
		}
	}
	m := &Manager{mount: mount, root: root, subtree: filepath.Join(own, name)}
	_, err = os.Stat(filepath.Join(root, "cgroup.kill"))
	m.kill = err == nil
	if !m.kill {
		if _, err := os.Stat(filepath.Join(root, "cgroup.freeze")); err != nil {
			return nil, fmt.Errorf("%w: %s has neither cgroup.kill nor cgroup.freeze (kernel older than 5.2)", ErrUnavailable, root)
		}
		m.notes = append(m.notes, "no cgroup.kill (kernel older than 5.14): freeze, then kill each process")
	}
	m.enableControllers(parent, own == "/")
	return m, nil
}

// enableControllers turns on memory and pids for the children of root,
// noting why not when the hierarchy does not offer them.
func (m *Manager) enableControllers(parent string, parentIsRoot bool) {
	avail, err := readWords(filepath.Join(parent, "cgroup.controllers"))
	if err != nil {
		m.notes = append(m.notes, fmt.Sprintf("controllers unreadable: %v", err))
		return
	}
	for _, c := range []string{"memory", "pids"} {
		ok := false
		var why string
		switch {
		case !slices.Contains(avail, c):
			why = fmt.Sprintf("%s controller is not in cgroup v2 here (bound to a cgroup v1 hierarchy, or not delegated)", c)
		default:
			// The parent enables it for herd's subtree, which enables it
			// for the incarnations. A non-root parent with processes of
			// its own refuses (no internal processes): herd then needs a
			// cgroup with nothing else in it.
			if err := enable(parent, c); err != nil {
				why = fmt.Sprintf("cannot enable %s in %s: %v", c, parent, err)
				if errors.Is(err, unix.EBUSY) && !parentIsRoot {
					why += " (the cgroup herd runs in has processes; give the daemon a cgroup of its own)"
				}
			} else if err := enable(m.root, c); err != nil {
				why = fmt.Sprintf("cannot enable %s in %s: %v", c, m.root, err)
			} else {
				ok = true
			}
		}
		if !ok {
			m.notes = append(m.notes, why+"; "+map[string]string{
				"memory": "memory_max enforced by the watchdog",
				"pids":   "pids_max not enforced",
			}[c])
		}
		switch c {
		case "memory":
			m.memory = ok
		case "pids":
			m.pids = ok
		}
	}
}

// enable writes +controller to dir's cgroup.subtree_control, unless it is
// already there.
func enable(dir, controller string) error {
	on, err := readWords(filepath.Join(dir, "cgroup.subtree_control"))
	if err != nil {
		return err
	}
	if slices.Contains(on, controller) {
		return nil
	}
	return writeFile(filepath.Join(dir, "cgroup.subtree_control"), "+"+controller)
}

// findMount returns the mount point of the cgroup2 file system from a
// mountinfo file (the unified hierarchy of a hybrid host too).
func findMount(mountinfo string) (string, error) {
	f, err := os.Open(mountinfo)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		mp, fstype, ok := parseMountinfo(sc.Text())
		if ok && fstype == "cgroup2" {
			return mp, nil
		}
	}
	if err := sc.Err(); err != nil {
		return "", fmt.Errorf("%w: %s: %w", ErrUnavailable, mountinfo, err)
	}
	return "", fmt.Errorf("%w: no cgroup2 file system mounted", ErrUnavailable)
}

// parseMountinfo returns the mount point and file system type of one
// mountinfo line: "36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw".
func parseMountinfo(line string) (mountPoint, fstype string, ok bool) {
	fields := strings.Fields(line)
	sep := slices.Index(fields, "-")
	if len(fields) < 5 || sep < 5 || sep+1 >= len(fields) {
		return "", "", false
	}
	return unescapeOctal(fields[4]), fields[sep+1], true
}

// unescapeOctal undoes mountinfo's \040-style escapes.
func unescapeOctal(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			var v byte
			okOct := true
			for _, c := range []byte(s[i+1 : i+4]) {
				if c < '0' || c > '7' {
					okOct = false
					break
				}
				v = v*8 + (c - '0')
			}
			if okOct {
				b.WriteByte(v)
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// ownCgroup returns the cgroup v2 path of the calling process from its
// /proc/self/cgroup (the "0::" line).
func ownCgroup(file string) (string, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return parseOwnCgroup(string(b))
}

// parseOwnCgroup finds the "0::/path" line of a /proc/PID/cgroup file.
func parseOwnCgroup(content string) (string, error) {
	for _, line := range strings.Split(content, "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			p = strings.TrimSuffix(p, " (deleted)")
			if !strings.HasPrefix(p, "/") || strings.Contains(p, "/../") || strings.HasSuffix(p, "/..") {
				return "", fmt.Errorf("%w: own cgroup path %q is not usable (another cgroup namespace?)", ErrUnavailable, p)
			}
			return p, nil
		}
	}
	return "", fmt.Errorf("%w: this process is in no cgroup v2 (no 0:: line)", ErrUnavailable)
}

// readWords reads a space-separated cgroup file.
func readWords(file string) ([]string, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	return strings.Fields(string(b)), nil
}

// writeFile writes one value to a cgroup control file. Control files
// exist already; O_CREATE is never wanted.
func writeFile(file, value string) error {
	f, err := os.OpenFile(file, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(value); err != nil {
		f.Close()
		return fmt.Errorf("write %q to %s: %w", value, file, err)
	}
	return f.Close()
}

// checkName accepts names that are one safe path element.
func checkName(name string) error {
	if name == "" || name == "." || name == ".." || len(name) > 200 {
		return fmt.Errorf("cgroup: invalid name %q", name)
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return fmt.Errorf("cgroup: invalid name %q: only letters, digits, '-', '_' and '.'", name)
		}
	}
	return nil
}
