package proc

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Why the proc connector: an agent under a launcher (npm's node shim,
// Gemini CLI's relaunching parent, a shell wrapper) is not herd's child,
// so herd cannot wait(2) for it, and its launcher reports its death in
// its own words (Gemini's exits 1 whatever killed its child). The kernel
// announces every exit, with the wait status, to the listeners of its
// proc connector (needs CAP_NET_ADMIN in the initial namespaces). Reading
// field 52 of /proc/PID/stat while the process is a zombie (ExitOfZombie)
// is the fallback: it races with the parent reaping it.

// Exit is how a process ended, as wait(2) reports it.
type Exit struct {
	// Code is the exit code when Signal is 0.
	Code int
	// Signal is the signal that killed it, 0 when it exited.
	Signal int
	// Core: it dumped core.
	Core bool
}

// DecodeWaitStatus splits a wait status (stat's exit_code, the proc
// connector's exit_code) into an Exit.
func DecodeWaitStatus(ws int) Exit {
	if sig := ws & 0x7f; sig != 0 {
		return Exit{Signal: sig, Core: ws&0x80 != 0}
	}
	return Exit{Code: (ws >> 8) & 0xff}
}

// ExitOfZombie returns how the process recorded by pid and start time
// ended while it is a zombie its parent has not reaped yet; false once it
// is reaped (or still runs, or is another process).
func (fs FS) ExitOfZombie(pid int, startTime uint64) (Exit, bool) {
	st, err := fs.Stat(pid)
	if err != nil || st.StartTime != startTime || !st.Zombie() || st.ExitCode < 0 {
		return Exit{}, false
	}
	return DecodeWaitStatus(st.ExitCode), true
}

// The proc connector's constants (linux/connector.h, linux/cn_proc.h).
const (
	cnIdxProc         = 1
	cnValProc         = 1
	procCnMcastListen = 1
	procEventNone     = 0
	procEventExit     = 0x80000000
	nlmsgHdrLen       = 16
	cnMsgLen          = 20
	procEventHdrLen   = 16 // what, cpu, timestamp_ns
)

// exitRecord is one exit the connector reported.
type exitRecord struct {
	exit Exit
	at   time.Time
}

// exitsKept bounds the exits kept: they are looked up within seconds of
// the death, and older ones are dropped first.
const (
	exitsKept   = 16384
	exitsMaxAge = 2 * time.Minute
)

// Exits listens to the kernel's proc connector and keeps the recent exits
// of every process, by pid, for a death seen by a pidfd to be told how it
// ended. Open it with OpenExits, read with Run, look up with Lookup.
type Exits struct {
	f *os.File
	// buf receives the datagrams (read by one goroutine at a time:
	// OpenExits, then Run).
	buf []byte

	mu sync.Mutex // guards the fields below
	// byPID holds the recent exits of thread-group leaders.
	byPID map[int]exitRecord
	// changed is closed (and replaced) when an exit is added.
	changed chan struct{}
	// lost counts the times the socket overran.
	lost int
	// others counts the events other than exits received (none where the
	// kernel filters them).
	others int
}

// OpenExits subscribes to the proc connector's events and waits for the
// kernel's answer; an error (no CAP_NET_ADMIN, not in the initial
// namespaces, no connector in the kernel) means exits are not reported
// this way and callers fall back. It then asks for exits only: kernels
// since 6.6 send this socket nothing else (older ones ignore the ask and
// send every event, forks and execs too, skipped here).
func OpenExits() (*Exits, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, unix.NETLINK_CONNECTOR)
	if err != nil {
		return nil, fmt.Errorf("proc: exits: socket: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Groups: cnIdxProc}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("proc: exits: bind: %w", err)
	}
	// Room for a burst of exits (a make -j, a test run) between reads.
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 4<<20)
	e := &Exits{f: os.NewFile(uintptr(fd), "proc-connector"), buf: make([]byte, 8192), byPID: map[int]exitRecord{}, changed: make(chan struct{})}
	if err := e.subscribe(fd, false); err != nil {
		e.f.Close()
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for {
		acked, ackErr, err := e.read(ctx)
		if err != nil {
			e.f.Close()
			return nil, fmt.Errorf("proc: exits: no answer from the proc connector: %w", err)
		}
		if !acked {
			continue
		}
		if ackErr != 0 {
			e.f.Close()
			return nil, fmt.Errorf("proc: exits: the proc connector refused: %w", unix.Errno(ackErr))
		}
		break
	}
	// Its answer is filtered out like every event but exits: not awaited.
	if err := e.subscribe(fd, true); err != nil {
		e.f.Close()
		return nil, err
	}
	return e, nil
}

// subscribe asks the connector for its events: exits only when filtered
// (struct proc_input: the operation, then the events wanted).
func (e *Exits) subscribe(fd int, filtered bool) error {
	n := 4
	if filtered {
		n = 8
	}
	msg := make([]byte, nlmsgHdrLen+cnMsgLen+n)
	ne := binary.NativeEndian
	ne.PutUint32(msg[0:], uint32(len(msg)))
	ne.PutUint16(msg[4:], unix.NLMSG_DONE)
	ne.PutUint32(msg[12:], uint32(os.Getpid()))
	cn := msg[nlmsgHdrLen:]
	ne.PutUint32(cn[0:], cnIdxProc)
	ne.PutUint32(cn[4:], cnValProc)
	ne.PutUint32(cn[12:], 1) // ack: the kernel answers with ack+1
	ne.PutUint16(cn[16:], uint16(n))
	ne.PutUint32(cn[cnMsgLen:], procCnMcastListen)
	if filtered {
		ne.PutUint32(cn[cnMsgLen+4:], procEventExit)
	}
	if err := unix.Sendto(fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return fmt.Errorf("proc: exits: subscribe: %w", err)
	}
	return nil
}

// Run reads the connector's events until ctx ends, then closes it.
func (e *Exits) Run(ctx context.Context) error {
	e.f.SetReadDeadline(time.Time{}) // OpenExits' deadline
	stop := context.AfterFunc(ctx, func() { e.f.SetReadDeadline(time.Now()) })
	defer stop()
	defer e.f.Close()
	for {
		_, _, err := e.read(ctx)
		switch {
		case ctx.Err() != nil:
			return nil
		case errors.Is(err, unix.ENOBUFS):
			// The socket overran: some exits are lost, and their deaths
			// are told as their launchers tell them.
			e.mu.Lock()
			e.lost++
			e.mu.Unlock()
		case err != nil:
			return fmt.Errorf("proc: exits: %w", err)
		}
	}
}

// Lost returns how many times the socket overran (exits lost).
func (e *Exits) Lost() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.lost
}

// read receives one datagram and records the exits in it; acked reports
// a subscription answer (with its error number) among them.
func (e *Exits) read(ctx context.Context) (acked bool, ackErr uint32, err error) {
	if dl, ok := ctx.Deadline(); ok {
		e.f.SetReadDeadline(dl)
	}
	rc, err := e.f.SyscallConn()
	if err != nil {
		return false, 0, err
	}
	buf := e.buf
	var n int
	var rerr error
	if err := rc.Read(func(fd uintptr) bool {
		n, _, rerr = unix.Recvfrom(int(fd), buf, 0)
		return !errors.Is(rerr, unix.EAGAIN) && !errors.Is(rerr, unix.EINTR)
	}); err != nil {
		return false, 0, err
	}
	if rerr != nil {
		return false, 0, rerr
	}
	now := time.Now()
	ne := binary.NativeEndian
	// One datagram holds one or more netlink messages, each aligned to 4
	// bytes; a garbled length ends the datagram.
	for b := buf[:n]; len(b) >= nlmsgHdrLen; {
		l := int(ne.Uint32(b[0:]))
		if l < nlmsgHdrLen || l > len(b) {
			break
		}
		if a, aerr := e.record(b[nlmsgHdrLen:l], now); a {
			acked, ackErr = true, aerr
		}
		b = b[min((l+3)&^3, len(b)):]
	}
	return acked, ackErr, nil
}

// record parses one connector message (cn_msg and proc_event) and keeps
// an exit of a thread-group leader; ack reports a subscription answer.
func (e *Exits) record(b []byte, now time.Time) (ack bool, ackErr uint32) {
	ne := binary.NativeEndian
	if len(b) < cnMsgLen+procEventHdrLen+4 || ne.Uint32(b[0:]) != cnIdxProc || ne.Uint32(b[4:]) != cnValProc {
		return false, 0
	}
	ev := b[cnMsgLen:]
	data := ev[procEventHdrLen:]
	switch ne.Uint32(ev[0:]) {
	case procEventNone:
		return true, ne.Uint32(data[0:])
	case procEventExit:
		if len(data) < 16 {
			return false, 0
		}
		pid, tgid, code := int(ne.Uint32(data[0:])), int(ne.Uint32(data[4:])), int(ne.Uint32(data[8:]))
		if pid != tgid {
			return false, 0 // a thread, not the process
		}
		e.add(pid, DecodeWaitStatus(code), now)
	default:
		e.mu.Lock()
		e.others++
		e.mu.Unlock()
	}
	return false, 0
}

// add keeps one exit and wakes the lookups waiting.
func (e *Exits) add(pid int, x Exit, now time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.byPID) >= exitsKept {
		for p, r := range e.byPID {
			if now.Sub(r.at) > exitsMaxAge || len(e.byPID) >= exitsKept {
				delete(e.byPID, p)
			}
		}
	}
	e.byPID[pid] = exitRecord{exit: x, at: now}
	close(e.changed)
	e.changed = make(chan struct{})
}

// Lookup returns how pid ended when the connector reported its exit at or
// after since (when the process was last seen alive, so that an earlier
// process with the same pid is not taken for it), waiting up to wait for
// the report: the kernel sends it just after the exit wakes the pidfd.
func (e *Exits) Lookup(ctx context.Context, pid int, since time.Time, wait time.Duration) (Exit, bool) {
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		e.mu.Lock()
		r, ok := e.byPID[pid]
		changed := e.changed
		e.mu.Unlock()
		if ok && !r.at.Before(since) {
			return r.exit, true
		}
		select {
		case <-changed:
		case <-timer.C:
			return Exit{}, false
		case <-ctx.Done():
			return Exit{}, false
		}
	}
}
