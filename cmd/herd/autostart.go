package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"herd"
	"herd/internal/daemon"
)

// envNoAutostart turns autostart off: a command finding no daemon says how
// to start one instead.
const envNoAutostart = "HERD_NO_AUTOSTART"

// autostartWait bounds how long a command waits for the lock of a start
// under way and for the daemon it started to answer.
const autostartWait = 30 * time.Second

// ensureDaemon starts a daemon for dir, detached, when none answers on its
// socket: commands racing to do so take a lock file, and only the first
// one to find no daemon starts one. It says so on stderr in one line.
func (g *globals) ensureDaemon(dir string) error {
	sock := daemon.SocketPath(dir)
	if g.noAutostart || autostartOff() || answers(sock) {
		return nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("autostart: %w", err)
	}
	lock, err := os.OpenFile(filepath.Join(dir, "autostart.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return fmt.Errorf("autostart: %w", err)
	}
	defer lock.Close() // drops the lock
	deadline := time.Now().Add(autostartWait)
	for {
		err := unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, unix.EWOULDBLOCK) {
			return fmt.Errorf("autostart: lock %s: %w", lock.Name(), err)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("autostart: another command has been starting a daemon for %s for %s; see %s", dir, autostartWait, logPath(dir))
		}
		time.Sleep(10 * time.Millisecond)
	}
	if answers(sock) {
		return nil // started by the command that held the lock
	}
	return g.startDaemon(dir, sock, deadline)
}

// startDaemon runs `herd daemon` in a session of its own, its output
// appended to <dir>/daemon.log, and waits until it answers.
func (g *globals) startDaemon(dir, sock string, deadline time.Time) error {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("autostart: %w", err)
	}
	args := []string{"daemon", "--state-dir", dir}
	if g.config != "" {
		cfg, err := filepath.Abs(g.config)
		if err != nil {
			return fmt.Errorf("autostart: %w", err)
		}
		args = append(args, "--config", cfg)
	}
	log, err := os.OpenFile(logPath(dir), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("autostart: %w", err)
	}
	defer log.Close()
	cmd := exec.Command(exe, args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.Env = daemonEnv(os.Environ())
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("autostart: start daemon: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	fmt.Fprintf(os.Stderr, "herd: no daemon was running for %s; started one (pid %d, log %s)\n", dir, cmd.Process.Pid, logPath(dir))
	for !answers(sock) {
		select {
		case err := <-exited:
			if answers(sock) {
				return nil
			}
			return fmt.Errorf("autostart: the daemon exited at start (%v): %s", err, lastLine(logPath(dir)))
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("autostart: the daemon (pid %d) did not answer within %s; see %s", cmd.Process.Pid, autostartWait, logPath(dir))
		}
	}
	return nil
}

// daemonEnv is the environment of a daemon started for a command: the
// command's, less the markers of the agent it may run in (the daemon is
// no part of that agent's incarnation, and must never be swept with it).
func daemonEnv(env []string) []string {
	return slices.DeleteFunc(slices.Clone(env), func(kv string) bool {
		k, _, _ := strings.Cut(kv, "=")
		return k == herd.EnvSession || k == herd.EnvIncarnation || k == herd.EnvSocket
	})
}

func autostartOff() bool {
	v := os.Getenv(envNoAutostart)
	if v == "" {
		return false
	}
	off, err := strconv.ParseBool(v)
	return err != nil || off
}

// answers reports whether something accepts connections on sock.
func answers(sock string) bool {
	c, err := net.DialTimeout("unix", sock, time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

func logPath(dir string) string { return filepath.Join(dir, "daemon.log") }

// lastLine is the last non-empty line of the file at path (the daemon's
// reason for exiting).
func lastLine(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "no log"
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return lines[len(lines)-1]
}
