package frontdoor

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// Listener is a net.Listener that holds at most Max connections open at
// a time, and takes none while the process is short of file descriptors
// (fewer than Reserve free): a connection over either is accepted and
// closed at once, and the reason logged (as often as Quiet allows, with
// how many were closed since). Supervision keeps its descriptors
// whatever a client does with the port.
type Listener struct {
	net.Listener
	// Max is the most connections open at a time.
	Max int
	// Reserve is how many free descriptors the process keeps for
	// itself; 0: none kept.
	Reserve int
	// Free reports the process's free descriptors (ok false: unknown);
	// nil: FreeFDs.
	Free func() (free int, ok bool)
	// Quiet bounds the log lines of refusals (at most one per 10 s by
	// default).
	Quiet Quiet
	Log   *slog.Logger
	// Name names the listener in the log ("web").
	Name string

	// open counts the connections open.
	open atomic.Int64
}

// Accept returns the next connection admitted, closing those refused.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if why := l.admit(); why != "" {
			l.refused(why, c.RemoteAddr())
			c.Close()
			continue
		}
		return &conn{Conn: c, l: l}, nil
	}
}

// Open is how many admitted connections are open.
func (l *Listener) Open() int { return int(l.open.Load()) }

// admit counts a new connection in, or says why it is refused.
func (l *Listener) admit() string {
	if l.Reserve > 0 {
		free := l.Free
		if free == nil {
			free = FreeFDs
		}
		if n, ok := free(); ok && n < l.Reserve {
			return "file descriptors short: fewer than the reserve kept for supervision are free"
		}
	}
	if n := l.open.Add(1); l.Max > 0 && n > int64(l.Max) {
		l.open.Add(-1)
		return "too many connections open"
	}
	return ""
}

// refused logs a refused connection, as often as Quiet allows.
func (l *Listener) refused(why string, from net.Addr) {
	ok, quiet := l.Quiet.Allow()
	if ok && l.Log != nil {
		l.Log.Warn(l.Name+": connection closed at once: "+why, "remote", from.String(), "open", l.Open(), "max", l.Max,
			"reserve", l.Reserve, "closed_unlogged", quiet)
	}
}

// conn is an admitted connection: closing it makes room for another.
type conn struct {
	net.Conn
	l    *Listener
	once sync.Once
}

// NetConn is the connection accepted, for what reads its socket (the
// peer's credentials).
func (c *conn) NetConn() net.Conn { return c.Conn }

func (c *conn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.open.Add(-1) })
	return err
}

// FreeFDs reports how many more descriptors the process may open: its
// RLIMIT_NOFILE less those open (/proc/self/fd). ok is false when it
// cannot tell.
func FreeFDs() (free int, ok bool) {
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil || lim.Cur == unix.RLIM_INFINITY {
		return 0, false
	}
	n, err := openFDs()
	if err != nil {
		return 0, false
	}
	return int(lim.Cur) - n, true
}

// openFDs counts the process's open descriptors.
func openFDs() (int, error) {
	d, err := os.Open("/proc/self/fd")
	if err != nil {
		return 0, err
	}
	defer d.Close()
	n := 0
	for {
		names, err := d.Readdirnames(256)
		n += len(names)
		if errors.Is(err, io.EOF) {
			return n - 1, nil // less the directory itself
		}
		if err != nil {
			return 0, err
		}
	}
}
