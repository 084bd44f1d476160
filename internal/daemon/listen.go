package daemon

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	"herd/internal/api"
)

// SocketPath is where the daemon of stateDir listens.
func SocketPath(stateDir string) string { return api.SocketPath(stateDir) }

// Listen claims stateDir for one daemon and listens on its socket (mode
// 0600). It refuses when a live daemon holds the claim or answers on the
// socket, and removes a stale socket left by a daemon that died. release
// closes the listener, removes the socket and drops the claim.
func Listen(stateDir string) (ln net.Listener, release func(), err error) {
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return nil, nil, fmt.Errorf("daemon: %w", err)
	}
	sock := SocketPath(stateDir)
	// The lock file makes "is a daemon running?" atomic: two daemons started
	// at once cannot both see a stale socket and both listen.
	lock, err := os.OpenFile(filepath.Join(stateDir, "herd.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, nil, fmt.Errorf("daemon: %w", err)
	}
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		lock.Close()
		if h, perr := api.NewClient(sock).Ping(context.Background(), 2*time.Second); perr == nil {
			return nil, nil, fmt.Errorf("daemon: another daemon (pid %d) already runs on %s", h.PID, sock)
		}
		return nil, nil, fmt.Errorf("daemon: another daemon holds %s", lock.Name())
	}
	if _, err := os.Stat(sock); err == nil {
		if _, perr := api.NewClient(sock).Ping(context.Background(), 2*time.Second); perr == nil {
			lock.Close()
			return nil, nil, fmt.Errorf("daemon: a daemon already answers on %s", sock)
		}
		if err := os.Remove(sock); err != nil {
			lock.Close()
			return nil, nil, fmt.Errorf("daemon: remove stale socket: %w", err)
		}
	}
	old := syscall.Umask(0o177) // the socket is born 0600: no window with a wider mode
	ln, err = net.Listen("unix", sock)
	syscall.Umask(old)
	if err != nil {
		lock.Close()
		return nil, nil, fmt.Errorf("daemon: %w", err)
	}
	if err := os.Chmod(sock, 0o600); err != nil && !errors.Is(err, os.ErrNotExist) {
		ln.Close()
		lock.Close()
		return nil, nil, fmt.Errorf("daemon: %w", err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(true)
	release = func() {
		ln.Close()
		lock.Close()
	}
	return ln, release, nil
}
