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
	cfg, err := g.autostartConfig(dir)
	if err != nil {
		return err
	}
	return g.startDaemon(dir, sock, cfg, deadline)
}

// configRecord is the file in a state dir that names the config its
// daemon last ran with: a daemon started for a command runs with it, not
// with whatever config that command happens to see.
const configRecord = "daemon.config"

// recordConfig writes, for the daemon of dir about to run, the config it
// runs with (its absolute path; "" for the defaults).
func recordConfig(dir, path string) error {
	if path != "" {
		abs, err := filepath.Abs(path)
		if err != nil {
			return fmt.Errorf("daemon: %w", err)
		}
		path = abs
	}
	if err := os.WriteFile(filepath.Join(dir, configRecord), []byte(path+"\n"), 0o600); err != nil {
		return fmt.Errorf("daemon: record its config: %w", err)
	}
	return nil
}

// recordedConfig is the config the daemon of dir last ran with, and
// whether one ever ran there (since configs were recorded).
func recordedConfig(dir string) (path string, ok bool) {
	b, err := os.ReadFile(filepath.Join(dir, configRecord))
	if err != nil {
		return "", false
	}
	return strings.TrimSpace(string(b)), true
}

// autostartConfig is the config a daemon started for this command runs
// with: the one the state dir's daemon last ran with. A command naming
// another (--config, HERD_CONFIG), or a recorded config that is gone, is
// refused with how to start the daemon by hand: a cron job's or another
// shell's command must never bring up the daemon with the wrong config
// (another tmux socket, SQLite where the fleet uses PostgreSQL).
func (g *globals) autostartConfig(dir string) (string, error) {
	named := g.config
	if named == "" {
		named = os.Getenv("HERD_CONFIG")
	}
	if named != "" {
		abs, err := filepath.Abs(named)
		if err != nil {
			return "", fmt.Errorf("autostart: %w", err)
		}
		named = abs
	}
	rec, ok := recordedConfig(dir)
	switch {
	case !ok:
		return named, nil // no daemon ran here yet: the command's own
	case named != "" && named != rec:
		was := rec
		if was == "" {
			was = "no config file (the defaults)"
		}
		return "", fmt.Errorf("autostart: no daemon runs for %s, and the one that ran there used %s, not %s; "+
			"start it by hand with the config it should run with: herd daemon --state-dir %s --config %s", dir, was, named, dir, named)
	case rec != "" && !fileExists(rec):
		return "", fmt.Errorf("autostart: no daemon runs for %s, and the config it ran with, %s, is gone; "+
			"start it by hand: herd daemon --state-dir %s --config CONFIG", dir, rec, dir)
	}
	return rec, nil
}

// startDaemon runs `herd daemon` with config ("" for none) in a session
// of its own, its output appended to <dir>/daemon.log, and waits until it
// answers.
func (g *globals) startDaemon(dir, sock, config string, deadline time.Time) error {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("autostart: %w", err)
	}
	args := []string{"daemon", "--state-dir", dir}
	if config != "" {
		args = append(args, "--config", config)
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
