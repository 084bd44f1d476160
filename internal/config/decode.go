package config

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"strings"

	toml "github.com/pelletier/go-toml/v2"

	"herd/internal/config/tomlpos"
)

// The file* types mirror herd.toml. Pointers tell an absent key from a zero
// value; durations stay strings until validation so a bad one can be named;
// commands are decoded loosely so a string command gets a helpful error.

type fileConfig struct {
	Daemon     fileDaemon           `toml:"daemon"`
	Store      fileStore            `toml:"store"`
	Tmux       fileTmux             `toml:"tmux"`
	Probe      fileProbe            `toml:"probe"`
	Restart    fileRestart          `toml:"restart"`
	Watchdog   fileWatchdog         `toml:"watchdog"`
	Reaper     fileReaper           `toml:"reaper"`
	Escalation fileEscalation       `toml:"escalation"`
	Notify     fileNotify           `toml:"notify"`
	Metrics    fileMetrics          `toml:"metrics"`
	Web        fileWeb              `toml:"web"`
	Fleet      fileFleet            `toml:"fleet"`
	MCP        fileMCP              `toml:"mcp"`
	AutoCont   fileAutoCont         `toml:"auto_continue"`
	Prices     map[string]filePrice `toml:"prices"`
	Reactions  fileReactions        `toml:"reactions"`
	Role       []fileRole           `toml:"role"`
}

type fileDaemon struct {
	Host *string `toml:"host"`
}

type fileStore struct {
	Driver         *string `toml:"driver"`
	DSN            *string `toml:"dsn"`
	EventRetention any     `toml:"event_retention"` // a duration string, or 0
	EventMaxRows   *int    `toml:"event_max_rows"`
}

type fileTmux struct {
	Socket *string `toml:"socket"`
	Binary *string `toml:"binary"`
}

type fileProbe struct {
	Interval          *string  `toml:"interval"`
	Timeout           *string  `toml:"timeout"`
	Concurrency       *int     `toml:"concurrency"`
	MassDeathFraction *float64 `toml:"mass_death_fraction"`
}

type fileRestart struct {
	Policy         *string `toml:"policy"`
	InitialBackoff *string `toml:"initial_backoff"`
	MaxBackoff     *string `toml:"max_backoff"`
	ResetAfter     *string `toml:"reset_after"`
	MaxRestarts    *int    `toml:"max_restarts"`
}

type fileWatchdog struct {
	StallAfter      *string `toml:"stall_after"`
	StallRepeat     *string `toml:"stall_repeat"`
	LivenessTimeout *string `toml:"liveness_timeout"`
	StallAutoKill   *bool   `toml:"stall_auto_kill"`
}

type fileReaper struct {
	Interval  *string `toml:"interval"`
	IdleAfter *string `toml:"idle_after"`
	Orphans   *bool   `toml:"orphans"`
	Archived  *bool   `toml:"archived"`
}

type fileEscalation struct {
	WaitingAfter *string `toml:"waiting_after"`
	UnknownAfter *string `toml:"unknown_after"`
	Command      any     `toml:"command"`
	Webhook      *string `toml:"webhook"`
}

type fileMetrics struct {
	Listen *string `toml:"listen"`
}

type fileRole struct {
	Name         *string           `toml:"name"`
	Replicas     *int              `toml:"replicas"`
	Command      any               `toml:"command"`
	Workdir      *string           `toml:"workdir"`
	Env          map[string]string `toml:"env"`
	Runtime      *string           `toml:"runtime"`
	Agent        *string           `toml:"agent"`
	AgentProcess *string           `toml:"agent_process"`
	Restart      fileRestart       `toml:"restart"`

	Worktree        *bool   `toml:"worktree"`
	WorktreeBase    *string `toml:"worktree_base"`
	WorktreeSetup   any     `toml:"worktree_setup"`
	WorktreeInclude any     `toml:"worktree_include"`
	MemoryMax       *string `toml:"memory_max"`
	PidsMax         *int64  `toml:"pids_max"`
	RestartOnUpdate *bool   `toml:"restart_on_update"`
	ResumeOnCrash   *bool   `toml:"resume_on_crash"`
	AutoContinue    *bool   `toml:"auto_continue"`

	Hosts    any   `toml:"hosts"`
	Spread   *bool `toml:"spread"`
	Failover *bool `toml:"failover"`

	Manages any   `toml:"manages"`
	MCP     *bool `toml:"mcp"`

	Account        *string  `toml:"account"`
	DailyBudgetUSD *float64 `toml:"daily_budget_usd"`
	BudgetHard     *bool    `toml:"budget_hard"`

	Tasks        *bool   `toml:"tasks"`
	Check        any     `toml:"check"`
	CheckTimeout *string `toml:"check_timeout"`
	Merge        *string `toml:"merge"`
	KeepBranch   *bool   `toml:"keep_branch"`

	MaxReplicas    *int    `toml:"max_replicas"`
	ScaleDownAfter *string `toml:"scale_down_after"`
}

// decode strictly decodes data: unknown keys and mistyped values are errors.
// After unknown keys alone, the rest of the document is decoded and
// returned with the error so its other problems can be reported too.
func decode(data []byte) (*fileConfig, error) {
	var f fileConfig
	d := toml.NewDecoder(bytes.NewReader(data))
	d.DisallowUnknownFields()
	if err := d.Decode(&f); err != nil {
		var strict *toml.StrictMissingError
		if errors.As(err, &strict) {
			return &f, err
		}
		return nil, err
	}
	return &f, nil
}

// unknownKeys returns one *Error per unknown key go-toml reported in err.
func unknownKeys(file string, pos *tomlpos.Positions, err error) []*Error {
	var strict *toml.StrictMissingError
	if !errors.As(err, &strict) {
		return nil
	}
	errs := make([]*Error, 0, len(strict.Errors))
	for i := range strict.Errors {
		de := &strict.Errors[i]
		line, col := de.Position()
		key := pos.Name(strings.Join(de.Key(), "."), line, col)
		errs = append(errs, &Error{File: file, Line: line, Key: key,
			Err: fmt.Errorf("%s: unknown key", key)})
	}
	return errs
}

// decodeError turns a go-toml syntax or type error into an *Error naming
// key and line.
func decodeError(file string, pos *tomlpos.Positions, err error) error {
	var de *toml.DecodeError
	if errors.As(err, &de) {
		line, col := de.Position()
		msg := strings.TrimPrefix(de.Error(), "toml: ")
		if len(de.Key()) == 0 {
			// A syntax error: no key to name.
			return &Error{File: file, Line: line, Err: errors.New(msg)}
		}
		key := pos.Name(strings.Join(de.Key(), "."), line, col)
		return &Error{File: file, Line: line, Key: key,
			Err: fmt.Errorf("%s: %s", key, friendlyTypeError(msg))}
	}
	return &Error{File: file, Err: fmt.Errorf("config: %w", err)}
}

var typeErrRE = regexp.MustCompile(`^cannot decode TOML (.+?) into .* of type (.+)$`)

// friendlyTypeError rewrites go-toml's type mismatch message, which names
// Go types, in the words of the file.
func friendlyTypeError(msg string) string {
	m := typeErrRE.FindStringSubmatch(msg)
	if m == nil {
		return msg
	}
	got, want := m[1], m[2]
	switch {
	case want == "string":
		want = "a string"
	case want == "bool":
		want = "a boolean (true or false)"
	case strings.HasPrefix(want, "int"), strings.HasPrefix(want, "uint"):
		want = "an integer"
	case strings.HasPrefix(want, "map["):
		want = "a table of strings"
	case strings.HasPrefix(want, "[]"):
		want = "an array of tables"
	default:
		want = "a table"
	}
	return fmt.Sprintf("got a TOML %s, want %s", got, want)
}
