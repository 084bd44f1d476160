// Package config loads and validates herd.toml.
package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"herd"
	"herd/internal/config/tomlpos"
)

// Store drivers.
const (
	DriverSQLite   = "sqlite"
	DriverPostgres = "postgres"
)

// MaxFileSize bounds a config file. Real files are a few kilobytes; the
// bound keeps error reporting on a huge garbled file from taking long.
const MaxFileSize = 256 << 10

// Config is a fully validated herd.toml with every default filled in.
type Config struct {
	Daemon     Daemon
	Store      Store
	Tmux       Tmux
	Probe      Probe
	Restart    herd.RestartPolicy // [restart]: defaults for every role
	Watchdog   Watchdog
	Reaper     Reaper
	Escalation Escalation
	Notify     Notify
	Metrics    Metrics
	Web        Web
	Fleet      Fleet
	MCP        MCP
	// AutoContinue is [auto_continue]: the staggered continue of an
	// account's sessions after a rate limit resets.
	AutoContinue AutoContinue
	// Prices are the [prices] overrides of the usage ledger's price
	// table, by model name or prefix.
	Prices map[string]Price
	// Reactions is [reactions]: what a task's failed check or conflict
	// does.
	Reactions Reactions
	// Roles are fully resolved: defaults filled, each role's restart table
	// merged over [restart], workdir expanded to an absolute path.
	Roles []herd.Role
}

// Daemon is the [daemon] table.
type Daemon struct {
	Host string // the machine's hostname unless set
}

// Store is the [store] table.
type Store struct {
	Driver string // DriverSQLite or DriverPostgres
	DSN    string // required for DriverPostgres
	// EventRetention: events older than this are deleted; 0 keeps all.
	EventRetention time.Duration
	// EventMaxRows: events beyond the newest this many are deleted; 0
	// keeps all.
	EventMaxRows int
}

// Tmux is the [tmux] table.
type Tmux struct {
	Socket string // tmux -L name; "" means the user's default server
	Binary string
}

// Probe is the [probe] table.
type Probe struct {
	Interval    time.Duration
	Timeout     time.Duration // per external call
	Concurrency int
	// MassDeathFraction: one observation accounting more than this
	// fraction of at least 5 sessions dead is inconclusive (0 < f <= 1).
	MassDeathFraction float64
}

// Watchdog is the [watchdog] table.
type Watchdog struct {
	StallAfter      time.Duration
	StallRepeat     time.Duration
	LivenessTimeout time.Duration
	StallAutoKill   bool
}

// Reaper is the [reaper] table.
type Reaper struct {
	Interval  time.Duration
	IdleAfter time.Duration
	Orphans   bool
	Archived  bool
}

// Escalation is the [escalation] table.
type Escalation struct {
	WaitingAfter time.Duration
	UnknownAfter time.Duration
	Command      []string // notifier argv; nil when unset
	Webhook      string
}

// Metrics is the [metrics] table.
type Metrics struct {
	// Listen is the host:port serving /metrics and /debug/pprof; ""
	// (the default) serves nothing.
	Listen string
}

// Error is one problem in a config file, located by file and line.
type Error struct {
	File string
	Line int    // 1-based; 0 when no line applies
	Key  string // canonical key path, e.g. "role[1].restart.policy"
	Err  error  // the problem, naming the key
}

// Error formats the problem as "file:line: message".
func (e *Error) Error() string {
	if e.Line <= 0 {
		return fmt.Sprintf("%s: %v", e.File, e.Err)
	}
	return fmt.Sprintf("%s:%d: %v", e.File, e.Line, e.Err)
}

// Unwrap returns the underlying problem.
func (e *Error) Unwrap() error { return e.Err }

// Default returns a Config holding every default of herd.toml and no roles.
func Default() *Config {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	return &Config{
		Daemon: Daemon{Host: host},
		Store:  Store{Driver: DriverSQLite, EventRetention: 720 * time.Hour, EventMaxRows: 1_000_000},
		Tmux:   Tmux{Socket: "herd", Binary: "tmux"},
		Probe: Probe{
			Interval:    time.Second,
			Timeout:     2 * time.Second,
			Concurrency: 8,
			// liveness.DefaultMassDeathFraction
			MassDeathFraction: 0.5,
		},
		Restart: herd.RestartPolicy{
			Policy:         herd.PolicyAlways,
			InitialBackoff: 10 * time.Second,
			MaxBackoff:     5 * time.Minute,
			ResetAfter:     10 * time.Minute,
			MaxRestarts:    5,
		},
		Watchdog: Watchdog{
			StallAfter:      5 * time.Minute,
			StallRepeat:     3 * time.Minute,
			LivenessTimeout: 10 * time.Minute,
		},
		Reaper: Reaper{
			Interval:  30 * time.Minute,
			IdleAfter: 48 * time.Hour,
			Orphans:   true,
			Archived:  true,
		},
		Escalation: Escalation{
			WaitingAfter: 30 * time.Minute,
			UnknownAfter: 5 * time.Minute,
		},
		Web:          Web{Listen: DefaultWebListen},
		Fleet:        defaultFleet(),
		AutoContinue: DefaultAutoContinue,
		Reactions:    defaultReactions(),
	}
}

// Load reads and parses the config file at path; relative role workdirs are
// resolved against the file's directory.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	base, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return Parse(data, path, base)
}

// Parse decodes and validates a herd.toml document. filename only labels
// error messages; relative role workdirs are resolved against baseDir. Any
// problem rejects the whole document: the result is then nil and the error
// joins one *Error per problem, each formatted "file:line: key: message",
// in line order.
func Parse(data []byte, filename, baseDir string) (*Config, error) {
	if len(data) > MaxFileSize {
		return nil, &Error{File: filename, Err: fmt.Errorf("config: file is %d bytes, more than the limit of %d", len(data), MaxFileSize)}
	}
	if !filepath.IsAbs(baseDir) {
		abs, err := filepath.Abs(baseDir)
		if err != nil {
			return nil, fmt.Errorf("config: base directory: %w", err)
		}
		baseDir = abs
	}
	pos, posErr := tomlpos.Index(data)
	var deep *tomlpos.DepthError
	if errors.As(posErr, &deep) {
		// Checked before decoding: the decoder's own limit is far deeper,
		// and its messages would quote the whole nested value.
		return nil, &Error{File: filename, Line: deep.Line, Key: deep.Key, Err: deep}
	}
	f, err := decode(data)
	if f == nil {
		return nil, decodeError(filename, pos, err)
	}
	if posErr != nil {
		// The decoder accepted what the position indexer did not; report it
		// rather than guess lines.
		return nil, &Error{File: filename, Err: fmt.Errorf("config: %w", posErr)}
	}
	b := &builder{file: filename, pos: pos, baseDir: baseDir}
	b.errs = unknownKeys(filename, pos, err)
	cfg := b.build(f)
	if len(b.errs) > 0 {
		return nil, b.err()
	}
	return cfg, nil
}

// joinErrors joins errs, or returns nil when there are none.
func joinErrors(errs []*Error) error {
	if len(errs) == 0 {
		return nil
	}
	all := make([]error, len(errs))
	for i, e := range errs {
		all[i] = e
	}
	return errors.Join(all...)
}
