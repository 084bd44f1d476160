// Package sdnotify tells systemd about the daemon's life (READY=1, WATCHDOG=1, STOPPING=1) over $NOTIFY_SOCKET.
package sdnotify

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"time"
)

// The messages of sd_notify(3) that herd sends.
const (
	Ready    = "READY=1"
	Watchdog = "WATCHDOG=1"
	Stopping = "STOPPING=1"
)

// Notifier sends notifications to the socket systemd named. The zero
// Notifier, and one made without $NOTIFY_SOCKET, does nothing.
type Notifier struct {
	// addr is the socket's address; nil means "not under systemd".
	addr *net.UnixAddr
}

// FromEnv returns a Notifier for $NOTIFY_SOCKET ("@name" is an abstract
// socket). Without the variable it returns a no-op Notifier.
func FromEnv() *Notifier {
	return New(os.Getenv("NOTIFY_SOCKET"))
}

// New returns a Notifier for the socket path (or "@abstract"); "" gives a
// no-op Notifier.
func New(socket string) *Notifier {
	if socket == "" {
		return &Notifier{}
	}
	name := socket
	if name[0] == '@' {
		// An abstract socket: the kernel's name starts with a NUL byte.
		name = "\x00" + name[1:]
	}
	return &Notifier{addr: &net.UnixAddr{Name: name, Net: "unixgram"}}
}

// Enabled reports whether notifications go anywhere.
func (n *Notifier) Enabled() bool { return n != nil && n.addr != nil }

// Notify sends one message (e.g. Ready, or "STATUS=..."). It is a no-op
// when not Enabled.
func (n *Notifier) Notify(msg string) error {
	if !n.Enabled() {
		return nil
	}
	conn, err := net.DialUnix("unixgram", nil, n.addr)
	if err != nil {
		return fmt.Errorf("sdnotify: %w", err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte(msg)); err != nil {
		return fmt.Errorf("sdnotify: %w", err)
	}
	return nil
}

// WatchdogInterval returns how often to send Watchdog: half of
// $WATCHDOG_USEC, as sd_watchdog_enabled(3) advises. ok is false when
// systemd expects no pings (unset, unparsable, or meant for another pid
// per $WATCHDOG_PID).
func WatchdogInterval() (d time.Duration, ok bool) {
	return watchdogInterval(os.Getenv("WATCHDOG_USEC"), os.Getenv("WATCHDOG_PID"), os.Getpid())
}

func watchdogInterval(usec, pid string, self int) (time.Duration, bool) {
	if usec == "" {
		return 0, false
	}
	if pid != "" {
		if p, err := strconv.Atoi(pid); err != nil || p != self {
			return 0, false
		}
	}
	us, err := strconv.ParseInt(usec, 10, 64)
	if err != nil || us <= 0 {
		return 0, false
	}
	return time.Duration(us) * time.Microsecond / 2, true
}
