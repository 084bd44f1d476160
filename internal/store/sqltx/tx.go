// Package sqltx implements store.Tx on database/sql, for the SQL backends (SQLite, PostgreSQL).
package sqltx

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
	"unicode/utf8"

	"herd"
	"herd/internal/store"
)

var _ store.Tx = (*tx)(nil)

// Dialect is what differs between the SQL databases a Tx runs on.
type Dialect struct {
	// Name prefixes every error ("sqlite", "postgres").
	Name string
	// Numbered makes bind parameters $1, $2, ... instead of ?.
	Numbered bool
	// StrictText marks a database whose text columns hold only valid UTF-8
	// without NUL (PostgreSQL). Every string written or compared is then
	// made so first (see Text), rather than failing the transaction.
	StrictText bool
	// BeforeAppend, when set, runs once per transaction before its first
	// event is inserted. PostgreSQL uses it to take a transaction-level
	// lock so that event ids become visible in increasing order.
	BeforeAppend string
	// OnAppend, when set, runs once per transaction after its first event
	// is inserted; OnCommand after each command is added, with the
	// command's host as its parameter. PostgreSQL sends NOTIFY from them,
	// delivered at commit (and never for a rolled-back transaction).
	OnAppend  string
	OnCommand string
	// OnPlacement, when set, runs after each placement put, with the
	// placement's host as its parameter, and after each role written,
	// with "" (PostgreSQL: a NOTIFY on store.ChannelPlacements, so that
	// the leader assigns and every daemon reconciles at once).
	OnPlacement string
	// Now, when set, reads the database's clock, in nanoseconds since the
	// epoch: leases are judged by one clock whatever the hosts' clocks.
	Now string
}

// New returns a store.Tx running every statement of t under ctx.
func New(ctx context.Context, t *sql.Tx, d Dialect) store.Tx {
	return &tx{ctx: ctx, tx: t, d: d, name: d.Name}
}

// tx is one transaction; every statement runs under the context given to
// Update or View.
type tx struct {
	ctx  context.Context
	tx   *sql.Tx
	d    Dialect
	name string // d.Name, the error prefix
	// appending is set once BeforeAppend has run in this transaction.
	appending bool
	// notified is set once OnAppend has run in this transaction.
	notified bool
}

// scanner is a *sql.Row or *sql.Rows.
type scanner interface {
	Scan(dest ...any) error
}

// notFound turns a missing row into a store.NotFoundError, which names
// the row and not the backend; other errors keep the backend's prefix.
func (t *tx) notFound(err error, what, key string) error {
	if errors.Is(err, sql.ErrNoRows) {
		return &store.NotFoundError{What: what, Key: key}
	}
	return fmt.Errorf("%s: %s %q: %w", t.name, what, key, err)
}

// bind rewrites the ? parameters of query for the dialect. Queries here
// never contain a ? other than a parameter.
func (t *tx) bind(query string) string {
	if !t.d.Numbered || !strings.Contains(query, "?") {
		return query
	}
	var b strings.Builder
	n := 0
	for _, r := range query {
		if r == '?' {
			n++
			fmt.Fprintf(&b, "$%d", n)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// Text returns s as valid UTF-8 without NUL: each invalid byte sequence
// and each NUL becomes U+FFFD. Agents' output and hook reports reach event
// messages and ids unchecked; a byte PostgreSQL refuses must not cost the
// transaction that records a crash.
func Text(s string) string {
	if utf8.ValidString(s) && !strings.Contains(s, "\x00") {
		return s
	}
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
}

// args applies Text to the string arguments when the dialect needs it.
func (t *tx) args(args []any) []any {
	if !t.d.StrictText {
		return args
	}
	for i, a := range args {
		if s, ok := a.(string); ok {
			args[i] = Text(s)
		}
	}
	return args
}

// exec runs one statement.
func (t *tx) exec(query string, args ...any) (sql.Result, error) {
	return t.tx.ExecContext(t.ctx, t.bind(query), t.args(args)...)
}

// query runs one query returning rows.
func (t *tx) query(query string, args ...any) (*sql.Rows, error) {
	return t.tx.QueryContext(t.ctx, t.bind(query), t.args(args)...)
}

// queryRow runs one query returning at most one row.
func (t *tx) queryRow(query string, args ...any) *sql.Row {
	return t.tx.QueryRowContext(t.ctx, t.bind(query), t.args(args)...)
}

// collect runs query and scans every row with scan; what names the list in
// errors.
func collect[T any](t *tx, what string, scan func(scanner) (T, error), query string, args ...any) ([]T, error) {
	rows, err := t.query(query, args...)
	if err != nil {
		return nil, fmt.Errorf("%s: %s: %w", t.name, what, err)
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w", t.name, what, err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%s: %s: %w", t.name, what, err)
	}
	return out, nil
}

var roleCols = []string{
	"name", "replicas", "command", "workdir", "env", "runtime", "agent",
	"agent_process", "restart_policy", "initial_backoff", "max_backoff",
	"reset_after", "max_restarts", "updated_at", "options",
}

// roleOptions are the role fields kept together in the options column
// (JSON): the ones added after the first schema, so a new one needs no
// migration.
type roleOptions struct {
	Worktree        bool     `json:"worktree,omitempty"`
	WorktreeBase    string   `json:"worktree_base,omitempty"`
	WorktreeSetup   []string `json:"worktree_setup,omitempty"`
	WorktreeInclude []string `json:"worktree_include,omitempty"`
	MemoryMax       int64    `json:"memory_max,omitempty"`
	PidsMax         int64    `json:"pids_max,omitempty"`
	RestartOnUpdate bool     `json:"restart_on_update,omitempty"`
	ResumeOnCrash   *bool    `json:"resume_on_crash,omitempty"`
	AutoContinue    *bool    `json:"auto_continue,omitempty"`
	Host            string   `json:"host,omitempty"`
	Hosts           []string `json:"hosts,omitempty"`
	Spread          bool     `json:"spread,omitempty"`
	Failover        bool     `json:"failover,omitempty"`
	Manages         []string `json:"manages,omitempty"`
	MCP             bool     `json:"mcp,omitempty"`
	Account         string   `json:"account,omitempty"`
	DailyBudgetUSD  float64  `json:"daily_budget_usd,omitempty"`
	BudgetHard      bool     `json:"budget_hard,omitempty"`

	Tasks        bool          `json:"tasks,omitempty"`
	Check        []string      `json:"check,omitempty"`
	CheckTimeout time.Duration `json:"check_timeout,omitempty"`
	Merge        string        `json:"merge,omitempty"`
	KeepBranch   bool          `json:"keep_branch,omitempty"`

	MaxReplicas    int           `json:"max_replicas,omitempty"`
	ScaleDownAfter time.Duration `json:"scale_down_after,omitempty"`
}

func optionsOf(r herd.Role) roleOptions {
	return roleOptions{
		Worktree: r.Worktree, WorktreeBase: r.WorktreeBase, WorktreeSetup: r.WorktreeSetup, WorktreeInclude: r.WorktreeInclude,
		MemoryMax: r.MemoryMax, PidsMax: r.PidsMax, RestartOnUpdate: r.RestartOnUpdate, Host: r.Host,
		ResumeOnCrash: r.ResumeOnCrash, AutoContinue: r.AutoContinue,
		Hosts: r.Hosts, Spread: r.Spread, Failover: r.Failover, Manages: r.Manages, MCP: r.MCP,
		Account: r.Account, DailyBudgetUSD: r.DailyBudgetUSD, BudgetHard: r.BudgetHard,
		Tasks: r.Tasks, Check: r.Check, CheckTimeout: r.CheckTimeout, Merge: r.Merge, KeepBranch: r.KeepBranch,
		MaxReplicas: r.MaxReplicas, ScaleDownAfter: r.ScaleDownAfter,
	}
}

func (o roleOptions) apply(r *herd.Role) {
	r.Worktree, r.WorktreeBase, r.WorktreeSetup, r.WorktreeInclude = o.Worktree, o.WorktreeBase, o.WorktreeSetup, o.WorktreeInclude
	r.MemoryMax, r.PidsMax, r.RestartOnUpdate, r.Host = o.MemoryMax, o.PidsMax, o.RestartOnUpdate, o.Host
	r.ResumeOnCrash, r.AutoContinue = o.ResumeOnCrash, o.AutoContinue
	r.Hosts, r.Spread, r.Failover = o.Hosts, o.Spread, o.Failover
	r.Manages, r.MCP = o.Manages, o.MCP
	r.Account, r.DailyBudgetUSD, r.BudgetHard = o.Account, o.DailyBudgetUSD, o.BudgetHard
	r.Tasks, r.Check, r.CheckTimeout, r.Merge, r.KeepBranch = o.Tasks, o.Check, o.CheckTimeout, o.Merge, o.KeepBranch
	r.MaxReplicas, r.ScaleDownAfter = o.MaxReplicas, o.ScaleDownAfter
}

var (
	roleSelect = "SELECT " + strings.Join(roleCols, ", ") + " FROM roles"
	roleUpsert = upsertSQL("roles", "name", roleCols)
)

// Role returns the role called name, or an error wrapping store.ErrNotFound.
func (t *tx) Role(name string) (herd.Role, error) {
	r, err := scanRole(t.queryRow(roleSelect+" WHERE name = ?", name))
	if err != nil {
		return herd.Role{}, t.notFound(err, "role", name)
	}
	return r, nil
}

// Roles lists every role by name.
func (t *tx) Roles() ([]herd.Role, error) {
	return collect(t, "roles", scanRole, roleSelect+" ORDER BY name")
}

func scanRole(s scanner) (herd.Role, error) {
	var (
		r                     herd.Role
		command, env, options string
		updated               int64
	)
	err := s.Scan(&r.Name, &r.Replicas, &command, &r.Workdir, &env, &r.Runtime,
		&r.Agent, &r.AgentProcess, &r.Restart.Policy, &r.Restart.InitialBackoff,
		&r.Restart.MaxBackoff, &r.Restart.ResetAfter, &r.Restart.MaxRestarts, &updated, &options)
	if err != nil {
		return r, err
	}
	if err := decode(command, &r.Command); err != nil {
		return r, fmt.Errorf("role %q command: %w", r.Name, err)
	}
	if err := decode(env, &r.Env); err != nil {
		return r, fmt.Errorf("role %q env: %w", r.Name, err)
	}
	var o roleOptions
	if err := decode(options, &o); err != nil {
		return r, fmt.Errorf("role %q options: %w", r.Name, err)
	}
	o.apply(&r)
	r.UpdatedAt = fromNanos(updated)
	return r, nil
}

// PutRole inserts or replaces r.
func (t *tx) PutRole(r herd.Role) error {
	if r.Name == "" {
		return fmt.Errorf("%s: put role: empty name", t.name)
	}
	command, err := encode(r.Command)
	if err != nil {
		return fmt.Errorf("%s: put role %q: %w", t.name, r.Name, err)
	}
	env, err := encode(r.Env)
	if err != nil {
		return fmt.Errorf("%s: put role %q: %w", t.name, r.Name, err)
	}
	updated, err := nanos(r.UpdatedAt)
	if err != nil {
		return fmt.Errorf("%s: put role %q: updated_at: %w", t.name, r.Name, err)
	}
	options, err := encode(optionsOf(r))
	if err != nil {
		return fmt.Errorf("%s: put role %q: %w", t.name, r.Name, err)
	}
	_, err = t.exec(roleUpsert, r.Name, r.Replicas, command, r.Workdir, env, r.Runtime,
		r.Agent, r.AgentProcess, r.Restart.Policy, int64(r.Restart.InitialBackoff),
		int64(r.Restart.MaxBackoff), int64(r.Restart.ResetAfter), r.Restart.MaxRestarts, updated, options)
	if err != nil {
		return fmt.Errorf("%s: put role %q: %w", t.name, r.Name, err)
	}
	if err := t.notifyPlacement(""); err != nil {
		return fmt.Errorf("%s: put role %q: %w", t.name, r.Name, err)
	}
	return nil
}

// DeleteRole removes the role and its sessions; incarnations and events stay.
// Deleting a missing role is not an error.
func (t *tx) DeleteRole(name string) error {
	if _, err := t.exec("DELETE FROM sessions WHERE role = ?", name); err != nil {
		return fmt.Errorf("%s: delete role %q: %w", t.name, name, err)
	}
	if _, err := t.exec("DELETE FROM roles WHERE name = ?", name); err != nil {
		return fmt.Errorf("%s: delete role %q: %w", t.name, name, err)
	}
	if err := t.notifyPlacement(""); err != nil {
		return fmt.Errorf("%s: delete role %q: %w", t.name, name, err)
	}
	return nil
}

// notifyPlacement runs Dialect.OnPlacement, if any, with host: a
// placement put on host, or ("") a role written, which the placement
// leader assigns again at once. The server sends one notification per
// channel and payload per transaction.
func (t *tx) notifyPlacement(host string) error {
	if t.d.OnPlacement == "" {
		return nil
	}
	if _, err := t.exec(t.d.OnPlacement, host); err != nil {
		return fmt.Errorf("notify: %w", err)
	}
	return nil
}

var incarnationCols = []string{
	"id", "session", "host", "runtime_kind", "argv", "workdir", "boot_id", "pid",
	"start_time", "marker", "root_boot_id", "root_pid", "root_start_time", "root_marker", "started_at", "ended_at", "exit_code", "exit_signal",
	"exit_reason", "exit_at", "agent_session_id", "template",
}

var (
	incarnationSelect = "SELECT " + strings.Join(incarnationCols, ", ") + " FROM incarnations"
	incarnationUpsert = upsertSQL("incarnations", "id", incarnationCols)
)

// Incarnation returns the incarnation id, or an error wrapping
// store.ErrNotFound.
func (t *tx) Incarnation(id string) (herd.Incarnation, error) {
	inc, err := scanIncarnation(t.queryRow(incarnationSelect+" WHERE id = ?", id))
	if err != nil {
		return herd.Incarnation{}, t.notFound(err, "incarnation", id)
	}
	return inc, nil
}

// OpenIncarnations lists the incarnations without an end time, of every host,
// by start time.
func (t *tx) OpenIncarnations() ([]herd.Incarnation, error) {
	return collect(t, "open incarnations", scanIncarnation,
		incarnationSelect+" WHERE ended_at IS NULL ORDER BY started_at, id")
}

// OpenIncarnationsOnHost lists the incarnations of host without an end
// time, by start time.
func (t *tx) OpenIncarnationsOnHost(host string) ([]herd.Incarnation, error) {
	return collect(t, "open incarnations on "+host, scanIncarnation,
		incarnationSelect+" WHERE ended_at IS NULL AND host = ? ORDER BY started_at, id", host)
}

func scanIncarnation(s scanner) (herd.Incarnation, error) {
	var (
		inc                  herd.Incarnation
		argv                 string
		startTime, started   int64
		rootStart            int64
		ended, exitAt        sql.NullInt64
		exitCode, exitSignal sql.NullInt64
		exitReason           sql.NullString
	)
	err := s.Scan(&inc.ID, &inc.Session, &inc.Host, &inc.RuntimeKind, &argv, &inc.Workdir,
		&inc.Identity.BootID, &inc.Identity.PID, &startTime, &inc.Identity.Marker,
		&inc.Root.BootID, &inc.Root.PID, &rootStart, &inc.Root.Marker,
		&started, &ended, &exitCode, &exitSignal, &exitReason, &exitAt, &inc.AgentSessionID, &inc.Template)
	if err != nil {
		return inc, err
	}
	if err := decode(argv, &inc.Argv); err != nil {
		return inc, fmt.Errorf("incarnation %q argv: %w", inc.ID, err)
	}
	inc.Identity.StartTime = uint64(startTime)
	inc.Root.StartTime = uint64(rootStart)
	inc.StartedAt = fromNanos(started)
	inc.EndedAt = fromNullNanos(ended)
	if exitReason.Valid {
		e := &herd.Exit{Reason: exitReason.String}
		if exitCode.Valid {
			c := int(exitCode.Int64)
			e.Code = &c
		}
		if exitSignal.Valid {
			s := int(exitSignal.Int64)
			e.Signal = &s
		}
		if exitAt.Valid {
			e.At = fromNanos(exitAt.Int64)
		}
		inc.Exit = e
	}
	return inc, nil
}

// PutIncarnation inserts or replaces inc.
func (t *tx) PutIncarnation(inc herd.Incarnation) error {
	if inc.ID == "" {
		return fmt.Errorf("%s: put incarnation: empty id", t.name)
	}
	fail := func(err error) error { return fmt.Errorf("%s: put incarnation %q: %w", t.name, inc.ID, err) }
	if inc.Identity.StartTime > math.MaxInt64 || inc.Root.StartTime > math.MaxInt64 {
		return fail(fmt.Errorf("start time %d out of range", inc.Identity.StartTime))
	}
	argv, err := encode(inc.Argv)
	if err != nil {
		return fail(err)
	}
	started, err := nanos(inc.StartedAt)
	if err != nil {
		return fail(err)
	}
	ended, err := nullNanos(inc.EndedAt)
	if err != nil {
		return fail(err)
	}
	var exitCode, exitSignal, exitReason, exitAt any
	if e := inc.Exit; e != nil {
		if e.Code != nil {
			exitCode = int64(*e.Code)
		}
		if e.Signal != nil {
			exitSignal = int64(*e.Signal)
		}
		exitReason = e.Reason
		if exitAt, err = nanos(e.At); err != nil {
			return fail(err)
		}
	}
	_, err = t.exec(incarnationUpsert, inc.ID, inc.Session, inc.Host, inc.RuntimeKind, argv,
		inc.Workdir, inc.Identity.BootID, inc.Identity.PID, int64(inc.Identity.StartTime),
		inc.Identity.Marker, inc.Root.BootID, inc.Root.PID, int64(inc.Root.StartTime), inc.Root.Marker,
		started, ended, exitCode, exitSignal, exitReason, exitAt,
		inc.AgentSessionID, inc.Template)
	if err != nil {
		return fail(err)
	}
	return nil
}
