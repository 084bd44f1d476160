// Package peer tells who calls on the daemon's unix socket: the person
// who runs herd, or an agent herd runs (its session). It reads the
// kernel's word on a connection (SO_PEERCRED, SO_PEERPIDFD) and walks
// the caller's ancestry in /proc to an incarnation live on record. The
// API server (internal/server) asks it once per connection; it reads
// /proc and decides nothing of what a caller may do (internal/guard
// does), and it never signals or writes anything.
package peer

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"slices"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"herd"
	"herd/internal/cgroup"
	"herd/internal/proc"
)

// MaxDepth bounds the generations read above a caller: a tree deeper
// than this cannot be told, and is not taken for the user's.
const MaxDepth = 64

// Record is an incarnation live on record, as the identification needs
// it.
type Record struct {
	Session string
	// Root and Agent are the identities of the process herd launched and
	// of the agent: a caller of the incarnation descends from one of them.
	Root, Agent herd.Identity
}

// State is what this daemon's record says of an incarnation.
type State int

// States of an incarnation on record.
const (
	// Unrecorded: this daemon never recorded it. Its environment marker
	// is another herd's (a daemon of another state directory, around or
	// inside this one): the walk goes on past it.
	Unrecorded State = iota
	// Ended: recorded, but not live on this host now.
	Ended
	// Live: open and current on this host.
	Live
)

// Finder identifies callers.
type Finder struct {
	FS     proc.FS
	BootID string
	// Subtree is herd's cgroup subtree as /proc/PID/cgroup names it
	// (cgroup.Containment.Subtree); "" when incarnations do not run in
	// cgroups of their own.
	Subtree string
	// Lookup says what this host's record has of the incarnation with
	// this id; rec is filled when it is Live.
	Lookup func(ctx context.Context, id string) (rec Record, st State, err error)
}

// Caller is who calls.
type Caller struct {
	// PID is the caller's pid in the daemon's pid namespace (0: outside
	// it).
	PID int
	// Session and Incarnation are the agent whose tree holds the caller;
	// both "" for the user (and for an agent herd cannot place).
	Session, Incarnation string
	// Unplaced says why the caller is an agent herd cannot place, or
	// could not be told at all: fail closed.
	Unplaced string
	// Claimed is the one incarnation the caller's tree carries the marker
	// (or the cgroup) of, placed or not; "" when none or several.
	Claimed string
	// Pending: Claimed is live on record but its launch is not confirmed
	// yet (no process recorded to check the caller's descent against).
	Pending bool
}

// User reports whether the caller is the person who runs herd: outside
// every agent's tree, told for sure.
func (c Caller) User() bool { return c.Session == "" && c.Unplaced == "" }

// Who names the caller in a log line or an event.
func (c Caller) Who() string {
	switch {
	case c.Session != "":
		return c.Session
	case c.Unplaced != "":
		return "an agent herd cannot place"
	}
	return "the user"
}

// connKey keys a connection's state in its context.
type connKey struct{}

// conn is what the server keeps of an accepted connection: the caller is
// told once, at its first request, in that request's goroutine (never in
// the accept loop).
type conn struct {
	c net.Conn
	// accepted is CLOCK_BOOTTIME, in clock ticks, at accept: a process
	// started later cannot be the one that connected.
	accepted uint64
	once     sync.Once
	caller   Caller
}

// ConnContext is http.Server.ConnContext for the daemon's socket: it
// notes the connection, to be identified at its first request.
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, &conn{c: c, accepted: bootTicks()})
}

// Caller returns who calls on ctx's connection; ok is false when ctx is
// not a request's from a connection ConnContext saw (a call the daemon
// makes of its own API in process: the console's, authenticated there).
func (f *Finder) Caller(ctx context.Context) (Caller, bool) {
	cs, ok := ctx.Value(connKey{}).(*conn)
	if !ok {
		return Caller{}, false
	}
	cs.once.Do(func() {
		cr, err := readCred(cs.c, cs.accepted)
		if err != nil {
			cs.caller = Caller{Unplaced: "the kernel did not say who connected: " + err.Error()}
			return
		}
		defer cr.close()
		cs.caller = f.Identify(ctx, cr)
	})
	return cs.caller, true
}

// Cred is the kernel's word on a connection's peer.
type Cred struct {
	// PID is the peer's pid at connect, in the daemon's pid namespace (0:
	// the peer is outside it).
	PID int
	// Accepted is CLOCK_BOOTTIME in clock ticks when the connection was
	// accepted (0: unknown).
	Accepted uint64
	// pidfd refers to the peer (SO_PEERPIDFD, else pidfd_open of PID); -1
	// when the kernel gives none.
	pidfd int
}

// readCred reads c's peer credentials.
func readCred(c net.Conn, accepted uint64) (Cred, error) {
	// A connection a listener wrapped (frontdoor's) says what it wraps.
	for i := 0; i < 4; i++ {
		w, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			break
		}
		c = w.NetConn()
	}
	sc, ok := c.(syscall.Conn)
	if !ok {
		return Cred{}, fmt.Errorf("peer: %T is not a socket", c)
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return Cred{}, fmt.Errorf("peer: %w", err)
	}
	cr := Cred{Accepted: accepted, pidfd: -1}
	var uerr error
	err = rc.Control(func(fd uintptr) {
		var u *unix.Ucred
		u, uerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
		if uerr != nil {
			return
		}
		cr.PID = int(u.Pid)
		// The peer's own pidfd (Linux 6.5+) pins the process that
		// connected, whatever became of its pid since.
		if p, err := unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_PEERPIDFD); err == nil {
			cr.pidfd = p
		}
	})
	if err == nil {
		err = uerr
	}
	if err != nil {
		return Cred{}, fmt.Errorf("peer: SO_PEERCRED: %w", err)
	}
	if cr.pidfd < 0 && cr.PID > 0 {
		if p, err := unix.PidfdOpen(cr.PID, 0); err == nil {
			cr.pidfd = p
		}
	}
	return cr, nil
}

// close releases the pidfd.
func (c Cred) close() {
	if c.pidfd >= 0 {
		unix.Close(c.pidfd)
	}
}

// bootTicks is CLOCK_BOOTTIME in clock ticks (the unit of a process's
// start time); 0 when it cannot be read.
func bootTicks() uint64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		return 0
	}
	hz := proc.ClockTicks()
	return uint64(ts.Sec)*hz + uint64(ts.Nsec)/(1e9/uint64(hz))
}

// link is one process of a caller's ancestry.
type link struct {
	pid   int
	start uint64
	// inc is the incarnation this process is marked with (cgroup, else
	// environment marker); "" none.
	inc string
	// env: inc is the environment's marker (a cgroup under herd's
	// subtree is this daemon's by construction).
	env bool
}

// Identify tells who the peer cr is:
//
//   - a peer outside the daemon's pid namespace (pid 0) is the user:
//     every process herd launches, and all they start, live in the
//     daemon's namespace or one nested in it, where they have a pid;
//   - the peer and its ancestors, up to MaxDepth generations, are read
//     for an incarnation's mark: its cgroup (when incarnations run in
//     cgroups) or its HERD_INCARNATION marker; a marker of an
//     incarnation this daemon never recorded is another herd's (a
//     daemon of another state directory, around or inside this one) and
//     is passed over;
//   - no mark on a tree read to its top: the user;
//   - one incarnation's mark, that incarnation live on record, and its
//     launched process or its agent on the path: that session;
//   - anything else is an agent herd cannot place (Unplaced), and is
//     bound to reads: marks of several incarnations (a marker set by
//     hand), an incarnation not live, a mark outside the incarnation's
//     tree, and every case where the tree could not be read (the peer
//     gone or replaced before it was read, /proc unreadable, a tree too
//     deep). A person's CLI is never there: it waits for its answer, and
//     its tree is shallow and readable.
func (f *Finder) Identify(ctx context.Context, cr Cred) Caller {
	if cr.PID <= 0 {
		return Caller{}
	}
	c := Caller{PID: cr.PID}
	links, err := f.walk(cr)
	var (
		seen   []string
		rec    Record
		st     State
		lookup error
		looked = map[string]State{}
	)
	for _, l := range links {
		if l.inc == "" || slices.Contains(seen, l.inc) {
			continue
		}
		s, done := looked[l.inc]
		if !done {
			var r Record
			r, s, lookup = f.Lookup(ctx, l.inc)
			if lookup != nil {
				break
			}
			looked[l.inc] = s
			if s == Live {
				rec = r
			}
		}
		if s == Unrecorded && l.env {
			continue // another herd's marker
		}
		seen = append(seen, l.inc)
		st = s
	}
	if len(seen) == 1 {
		c.Claimed = seen[0]
	}
	switch {
	case err == nil && lookup != nil:
		c.Unplaced = fmt.Sprintf("the record of its incarnation could not be read: %v", lookup)
		return c
	case err != nil:
		c.Unplaced = err.Error()
		return c
	case len(seen) == 0:
		return c
	case len(seen) > 1:
		c.Unplaced = fmt.Sprintf("its process tree carries the marks of several incarnations (%v)", seen)
		return c
	}
	switch {
	case st != Live:
		c.Unplaced = fmt.Sprintf("incarnation %s is not live on record", c.Claimed)
	case rec.Root.PID == 0 && rec.Agent.PID == 0:
		c.Unplaced, c.Pending = fmt.Sprintf("incarnation %s's launch is not confirmed yet", c.Claimed), true
	case !f.onPath(links, rec.Root) && !f.onPath(links, rec.Agent):
		c.Unplaced = fmt.Sprintf("it carries incarnation %s's mark but does not descend from its process", c.Claimed)
	default:
		c.Session, c.Incarnation = rec.Session, c.Claimed
	}
	return c
}

// onPath reports whether the process id is one of links (same pid and
// start time, this boot).
func (f *Finder) onPath(links []link, id herd.Identity) bool {
	if id.PID <= 0 || id.BootID != f.BootID {
		return false
	}
	for _, l := range links {
		if l.pid == id.PID && l.start == id.StartTime {
			return true
		}
	}
	return false
}

// walk reads the peer and its ancestors up to the top of the tree (pid 1,
// or a process whose parent is outside the namespace), each with its
// mark. Every process is read between two reads of its start time; a
// parent must have started no later than its child, and the peer no
// later than the connection's accept, so a pid reused meanwhile is never
// taken for the process it was. The peer's pidfd, looked at last, says
// it is still the process that connected.
func (f *Finder) walk(cr Cred) ([]link, error) {
	var links []link
	pid, moves := cr.PID, 0
	for {
		if len(links) == MaxDepth {
			return links, fmt.Errorf("its process tree is deeper than %d generations", MaxDepth)
		}
		l, ppid, err := f.read(pid, links, cr.Accepted)
		if err != nil && len(links) > 0 && moves < maxMoves {
			// A parent that exits while it is read leaves its child to
			// another (a subreaper, init): the walk goes on from the
			// child's parent now, as a person's CLI whose shell left
			// must not be refused.
			child := links[len(links)-1]
			if cst, cerr := f.FS.Stat(child.pid); cerr == nil && cst.StartTime == child.start && cst.PPID != pid {
				pid, moves = cst.PPID, moves+1
				if pid <= 0 {
					break
				}
				continue
			}
		}
		if err != nil {
			return links, err
		}
		links = append(links, l)
		if pid == 1 || ppid <= 0 {
			break
		}
		pid = ppid
	}
	if cr.pidfd >= 0 {
		exited, err := pidfdExited(cr.pidfd)
		if err != nil || exited {
			return links, fmt.Errorf("pid %d exited before it was told", cr.PID)
		}
	}
	return links, nil
}

// maxMoves bounds how often one walk follows a child to its new parent.
const maxMoves = 8

// read reads one process of the walk (links are its descendants read so
// far): its link and its parent's pid.
func (f *Finder) read(pid int, links []link, accepted uint64) (link, int, error) {
	st, err := f.FS.Stat(pid)
	if err != nil {
		return link{}, 0, fmt.Errorf("pid %d of its tree cannot be read: %w", pid, err)
	}
	if len(links) == 0 {
		if st.Zombie() {
			return link{}, 0, fmt.Errorf("pid %d exited before it was told", pid)
		}
		if accepted > 0 && st.StartTime > accepted+1 {
			return link{}, 0, fmt.Errorf("pid %d started after the connection: not the process that connected", pid)
		}
	} else if prev := links[len(links)-1]; st.StartTime > prev.start {
		return link{}, 0, fmt.Errorf("pid %d started after its child %d: not its parent any more", pid, prev.pid)
	}
	l := link{pid: pid, start: st.StartTime}
	if f.Subtree != "" {
		inc, err := cgroup.IncarnationOf(f.FS, pid, f.Subtree)
		if err != nil {
			return link{}, 0, fmt.Errorf("pid %d's cgroup cannot be read: %w", pid, err)
		}
		l.inc = inc
	}
	if l.inc == "" {
		m, ok, err := f.FS.EnvValue(pid, herd.EnvIncarnation)
		switch {
		case err == nil && ok:
			l.inc, l.env = m, true
		case err != nil && !errors.Is(err, fs.ErrPermission):
			// Another user's process, or one that made itself
			// undumpable, hides its environment: its parent is read
			// all the same. Anything else is not read.
			return link{}, 0, fmt.Errorf("pid %d's environment cannot be read: %w", pid, err)
		}
	}
	again, err := f.FS.Stat(pid)
	if err != nil || again.StartTime != st.StartTime {
		return link{}, 0, fmt.Errorf("pid %d was replaced while read", pid)
	}
	return l, st.PPID, nil
}

// pidfdExited reports whether pidfd's process has exited (its pidfd is
// readable then).
func pidfdExited(pidfd int) (bool, error) {
	fds := []unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(fds, 0)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return false, fmt.Errorf("peer: poll pidfd: %w", err)
		}
		return n > 0 && fds[0].Revents != 0, nil
	}
}
