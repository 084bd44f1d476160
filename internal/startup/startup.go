// Package startup writes and removes the systemd user unit that starts herd's daemon at boot.
package startup

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// UnitName is the unit's file name.
const UnitName = "herd.service"

// DefaultWatchdog is WatchdogSec: the daemon pings at half of it.
const DefaultWatchdog = 30 * time.Second

// Options are what the unit needs to know.
type Options struct {
	// Binary is the absolute path of the herd binary.
	Binary string
	// StateDir is the daemon's state directory, absolute.
	StateDir string
	// Config is the config file, absolute; "" lets the daemon find it.
	Config string
	// Path is PATH for the daemon and its agents: a user manager's own
	// PATH rarely has ~/.local/bin, where agent CLIs live.
	Path string
	// Watchdog is WatchdogSec; 0 means DefaultWatchdog.
	Watchdog time.Duration
}

// Unit renders the unit file.
//
// KillMode=process: stopping or restarting the daemon must never take the
// agents with it (they are in its cgroup when it launched them).
// Type=notify: the daemon says READY=1 once it serves its socket, and
// pings WATCHDOG=1 from its loops, so a wedged daemon is restarted.
func Unit(o Options) (string, error) {
	if !filepath.IsAbs(o.Binary) || !filepath.IsAbs(o.StateDir) {
		return "", errors.New("startup: binary and state dir must be absolute paths")
	}
	if o.Config != "" && !filepath.IsAbs(o.Config) {
		return "", errors.New("startup: config must be an absolute path")
	}
	wd := o.Watchdog
	if wd == 0 {
		wd = DefaultWatchdog
	}
	if wd < time.Second {
		return "", fmt.Errorf("startup: watchdog %s is under a second", wd)
	}
	args := []string{o.Binary, "daemon", "--state-dir", o.StateDir}
	if o.Config != "" {
		args = append(args, "--config", o.Config)
	}
	var b strings.Builder
	fmt.Fprintf(&b, `[Unit]
Description=herd: supervisor of AI coding-agent sessions
StartLimitIntervalSec=300
StartLimitBurst=5

[Service]
Type=notify
NotifyAccess=main
ExecStart=%s
KillMode=process
Restart=on-failure
RestartSec=5s
WatchdogSec=%d
TimeoutStopSec=60
`, execLine(args), int(wd.Seconds()))
	if o.Path != "" {
		fmt.Fprintf(&b, "Environment=%s\n", quote("PATH="+o.Path))
	}
	b.WriteString(`
[Install]
WantedBy=default.target
`)
	return b.String(), nil
}

// execLine quotes argv for ExecStart=: every word in double quotes, with
// backslash, quote, "$" and "%" escaped (systemd would expand the last two).
func execLine(argv []string) string {
	out := make([]string, len(argv))
	for i, a := range argv {
		out[i] = quote(a)
	}
	return strings.Join(out, " ")
}

func quote(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "$", "$$", "%", "%%", "\n", `\n`)
	return `"` + r.Replace(s) + `"`
}

// Dir is the user unit directory: $XDG_CONFIG_HOME/systemd/user, else
// ~/.config/systemd/user.
func Dir() (string, error) {
	if v := os.Getenv("XDG_CONFIG_HOME"); v != "" {
		return filepath.Join(v, "systemd", "user"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("startup: %w", err)
	}
	return filepath.Join(home, ".config", "systemd", "user"), nil
}

// Install writes unit into dir (created if needed) and returns its path.
// The file is replaced atomically.
func Install(dir, unit string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("startup: %w", err)
	}
	path := filepath.Join(dir, UnitName)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(unit), 0o644); err != nil {
		return "", fmt.Errorf("startup: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("startup: %w", err)
	}
	return path, nil
}

// Remove deletes the unit from dir; removed is false when there was none.
func Remove(dir string) (path string, removed bool, err error) {
	path = filepath.Join(dir, UnitName)
	err = os.Remove(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return path, false, nil
	case err != nil:
		return path, false, fmt.Errorf("startup: %w", err)
	}
	return path, true, nil
}

// StateDirOf is the state directory a unit's ExecStart runs the daemon
// for ("" when it names none): the word after --state-dir, unquoted as
// execLine quoted it.
func StateDirOf(unit string) string {
	for _, line := range strings.Split(unit, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "ExecStart=")
		if !ok {
			continue
		}
		words := unquoteWords(rest)
		for i, w := range words {
			if w == "--state-dir" && i+1 < len(words) {
				return words[i+1]
			}
			if v, ok := strings.CutPrefix(w, "--state-dir="); ok {
				return v
			}
		}
	}
	return ""
}

// unquoteWords splits an ExecStart= value into its words: double-quoted
// (with execLine's escapes) or bare.
func unquoteWords(s string) []string {
	var (
		words []string
		cur   strings.Builder
		in    bool // inside quotes
		word  bool // a word is under way
	)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case in && c == '\\' && i+1 < len(s):
			i++
			if s[i] == 'n' {
				cur.WriteByte('\n')
			} else {
				cur.WriteByte(s[i])
			}
		case c == '"':
			in, word = !in, true
		case (c == '$' || c == '%') && i+1 < len(s) && s[i+1] == c:
			cur.WriteByte(c)
			i++
		case !in && (c == ' ' || c == '\t'):
			if word {
				words = append(words, cur.String())
				cur.Reset()
				word = false
			}
		default:
			cur.WriteByte(c)
			word = true
		}
	}
	if word {
		words = append(words, cur.String())
	}
	return words
}

// InstalledFor reports whether the unit in dir runs the daemon for
// stateDir (an absolute path).
func InstalledFor(dir, stateDir string) (bool, error) {
	b, err := os.ReadFile(filepath.Join(dir, UnitName))
	switch {
	case errors.Is(err, os.ErrNotExist):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("startup: %w", err)
	}
	got := StateDirOf(string(b))
	return got != "" && filepath.Clean(got) == filepath.Clean(stateDir), nil
}
