package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
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
	"herd/internal/startup"
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
	// A command naming another config than the daemon's is refused
	// whoever would start it.
	cfg, err := g.autostartConfig(dir)
	if err != nil {
		return err
	}
	if unit, err := systemdRunsDaemon(dir); err != nil || unit {
		if err != nil {
			return err
		}
		// systemd runs this state dir's daemon: a daemon started here
		// would be outside it and block its restarts.
		return startUnit(dir, sock, deadline)
	}
	return g.startDaemon(dir, sock, cfg, deadline)
}

// configRecord is the file in a state dir that names the config its
// daemon last ran with: a daemon started for a command runs with it, not
// with whatever config that command happens to see.
const configRecord = "daemon.config"

// ranWith is what configRecord holds (JSON; a bare path in older state
// dirs): the config file (absolute; "" for the defaults), a hash of its
// content, and the tmux socket the daemon's agents run on ("" is the
// user's default server; nil: not recorded, an older daemon).
type ranWith struct {
	Config     string  `json:"config"`
	SHA256     string  `json:"sha256,omitempty"`
	TmuxSocket *string `json:"tmux_socket,omitempty"`
}

// recordConfig writes, for the daemon of dir about to run, the config it
// runs with: path ("" for the defaults) and the tmux socket it names.
func recordConfig(dir, path, tmuxSocket string) error {
	rec := ranWith{TmuxSocket: &tmuxSocket}
	if path != "" {
		abs, err := filepath.Abs(path)
		if err != nil {
			return fmt.Errorf("daemon: %w", err)
		}
		rec.Config, rec.SHA256 = abs, fileHash(abs)
	}
	b, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("daemon: %w", err)
	}
	tmp := filepath.Join(dir, configRecord+".tmp")
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("daemon: record its config: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, configRecord)); err != nil {
		return fmt.Errorf("daemon: record its config: %w", err)
	}
	return nil
}

// fileHash is the hex SHA-256 of path's content, "" when unreadable.
func fileHash(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// recordedConfig is what the daemon of dir last ran with, and whether one
// ever ran there (since configs were recorded).
func recordedConfig(dir string) (ranWith, bool) {
	b, err := os.ReadFile(filepath.Join(dir, configRecord))
	if err != nil {
		return ranWith{}, false
	}
	var rec ranWith
	if bytes.HasPrefix(bytes.TrimSpace(b), []byte("{")) {
		if json.Unmarshal(b, &rec) != nil {
			return ranWith{}, false // damaged: as if none ran
		}
		return rec, true
	}
	return ranWith{Config: strings.TrimSpace(string(b))}, true
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
	ran, ok := recordedConfig(dir)
	rec := ran.Config
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
	if rec != "" && ran.SHA256 != "" && fileHash(rec) != ran.SHA256 {
		fmt.Fprintf(os.Stderr, "herd: %s changed since the daemon of %s last ran with it; starting it with the file as it is now\n", rec, dir)
	}
	return rec, nil
}

// systemdRunsDaemon reports whether `herd startup` installed a systemd user unit
// that runs the daemon of dir.
func systemdRunsDaemon(dir string) (bool, error) {
	units, err := startup.Dir()
	if err != nil {
		return false, nil // no home: no user unit either
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return false, fmt.Errorf("autostart: %w", err)
	}
	ok, err := startup.InstalledFor(units, abs)
	if err != nil {
		return false, fmt.Errorf("autostart: %w", err)
	}
	return ok, nil
}

// startUnit asks systemd to start the unit that runs the daemon of dir,
// and waits until it answers.
func startUnit(dir, sock string, deadline time.Time) error {
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	out, err := exec.CommandContext(ctx, "systemctl", "--user", "start", startup.UnitName).CombinedOutput()
	if err != nil {
		return fmt.Errorf("autostart: systemd runs the daemon of %s (%s), and `systemctl --user start %s` failed: %v: %s; "+
			"see `systemctl --user status %s`", dir, startup.UnitName, startup.UnitName, err, strings.TrimSpace(string(out)), startup.UnitName)
	}
	fmt.Fprintf(os.Stderr, "herd: no daemon was running for %s; asked systemd to start %s\n", dir, startup.UnitName)
	for !answers(sock) {
		if time.Now().After(deadline) {
			return fmt.Errorf("autostart: systemd started %s, but the daemon did not answer within %s; see `systemctl --user status %s`",
				startup.UnitName, autostartWait, startup.UnitName)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return nil
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
