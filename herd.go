// Package herd holds the domain types shared by every part of the supervisor.
package herd

import (
	"fmt"
	"regexp"
	"strings"
	"time"
)

// State is the lifecycle state of a session (one replica slot of a role).
type State string

// Session states; see PRODUCT.md, "Session states".
const (
	StatePending   State = "pending"
	StateRunning   State = "running"
	StateStalled   State = "stalled"
	StateUnknown   State = "unknown"
	StateBackoff   State = "backoff"
	StateCrashed   State = "crashed"
	StateFailed    State = "failed"
	StateSucceeded State = "succeeded"
	StateStopped   State = "stopped"
)

// CountsTowardReplicas reports whether a session in state s occupies a replica
// slot, so the reconciler does not launch another one beside it.
func (s State) CountsTowardReplicas() bool {
	switch s {
	case StatePending, StateRunning, StateStalled, StateUnknown, StateBackoff:
		return true
	}
	return false
}

// HoldsSlot reports whether a session in state s occupies its slot (its
// index) for reconciliation. Every state but stopped does: a failed or
// succeeded session keeps its slot, without counting toward replicas, so
// that nothing relaunches beside it until a person acts.
func (s State) HoldsSlot() bool { return s != StateStopped }

// Live reports whether a session in state s has (or may have) a live
// incarnation that herd must watch.
func (s State) Live() bool {
	switch s {
	case StatePending, StateRunning, StateStalled, StateUnknown:
		return true
	}
	return false
}

// Axis is one liveness axis (runtime or process): alive, dead or unknown.
type Axis string

// Axis values. Unknown is never read as dead.
const (
	Alive   Axis = "alive"
	Dead    Axis = "dead"
	Unknown Axis = "unknown"
)

// Activity is what the agent is doing, as far as herd can tell.
type Activity string

// Activity values.
const (
	ActivityWorking Activity = "working"
	ActivityWaiting Activity = "waiting"
	ActivityIdle    Activity = "idle"
	ActivityUnknown Activity = "unknown"
	// ActivityBlocked is a turn ended by a rate limit or an API error; the
	// agent cannot go on before the limit resets or the error clears.
	ActivityBlocked Activity = "blocked"
)

// Runtime kinds.
const (
	RuntimeTmux = "tmux"
	RuntimeExec = "exec"
)

// Agent kinds.
const (
	AgentClaude  = "claude"
	AgentCodex   = "codex"
	AgentGemini  = "gemini"
	AgentGeneric = "generic"
)

// Restart policy names.
const (
	PolicyAlways    = "always"
	PolicyOnFailure = "on-failure"
	PolicyNever     = "never"
)

// Event kinds; see PRODUCT.md, "Event kinds".
const (
	EventSpawned      = "spawned"
	EventAdopted      = "adopted"
	EventExited       = "exited"
	EventCrashed      = "crashed"
	EventBackoff      = "backoff"
	EventRestarted    = "restarted"
	EventFailed       = "failed"
	EventSucceeded    = "succeeded"
	EventStalled      = "stalled"
	EventStallWarning = "stall_warning"
	EventUnstalled    = "unstalled"
	EventKilled       = "killed"
	EventReaped       = "reaped"
	EventStopped      = "stopped"
	EventResumed      = "resumed"
	EventRecovered    = "recovered"
	EventEscalated    = "escalated"
	EventActivity     = "activity"
	EventProbeUnknown = "probe_unknown"
	EventSummary      = "summary"
	// Additions.
	EventNotified = "notified"
	EventRollout  = "rollout"
	// EventWorktree records what became of a session's git worktree when
	// its role was deleted: reason removed, or kept (with why and where).
	EventWorktree = "worktree"
	// EventLeftover records what a stop could not remove at once (a tmux
	// session while tmux hung or its listings were unreadable, processes
	// carrying the incarnation's marker that would not end): reason
	// left_behind when it is queued for retries, removed when a retry
	// removed it, abandoned when the retries gave up.
	EventLeftover = "leftover"
	// EventOutdated records that a session's agent binary was replaced on
	// disk while it ran (reason binary_updated): it shows OUTDATED.
	EventOutdated = "outdated"

	// EventMCPCall records one tool call of herd's MCP server: the
	// calling session, the tool, its targets, and a refusal's reason
	// (reason mcp_refused).
	EventMCPCall = "mcp_call"
	// EventAnswered records a person's answer to an agent that waited,
	// given through the console: who, from where, what.
	EventAnswered = "answered"
	// EventConsole records any other action taken through the console
	// (reason: the verb, or input), with its origin.
	EventConsole = "console"
)

// EventKinds lists the event kinds, in the order of PRODUCT.md.
var EventKinds = []string{
	EventSpawned, EventAdopted, EventExited, EventCrashed,
	EventBackoff, EventRestarted, EventFailed, EventSucceeded,
	EventStalled, EventStallWarning, EventUnstalled, EventKilled,
	EventReaped, EventStopped, EventResumed, EventRecovered,
	EventEscalated, EventActivity, EventProbeUnknown, EventSummary,
	EventNotified, EventRollout, EventWorktree, EventLeftover, EventOutdated,
	EventMCPCall,
	EventAnswered, EventConsole,
}

// Reasons: short machine words carried by events and exits.
const (
	ReasonExitCode       = "exit_code"
	ReasonSignal         = "signal"
	ReasonPaneGone       = "pane_gone"
	ReasonProcessGone    = "process_gone"
	ReasonHeartbeatStale = "heartbeat_stale"
	ReasonStallKilled    = "stall_killed"
	ReasonIdle           = "idle"
	ReasonOrphan         = "orphan"
	ReasonArchived       = "archived"
	ReasonReboot         = "reboot"
	ReasonUser           = "user"
	ReasonRoleDeleted    = "role_deleted"
	ReasonScaledDown     = "scaled_down"
	// ReasonMoved: the slot was placed on another host (a placement
	// changed, or failover moved it while this host was away).
	ReasonMoved = "moved"
	// ReasonFenced: the host could not renew its lease for fleet.lease
	// (the store out of reach), so it stopped the agents of its failover
	// roles before another host may take their slots. Resumable.
	ReasonFenced       = "fenced"
	ReasonLaunchFailed = "launch_failed"
	// ReasonResumeFailed: the agent refused to resume its conversation
	// (an id it no longer knows, or one in use); the next launch starts
	// fresh with the role's command.
	ReasonResumeFailed = "resume_failed"
	// ReasonNeverStarted: the summary of an incarnation written ahead of
	// its launch and ended before its start was ever recorded or adopted
	// (a daemon killed during the launch; the slot stopped before the next
	// daemon resolved it).
	ReasonNeverStarted = "never_started"
	// ReasonBudget: a role's spend today reached its daily_budget_usd;
	// the session resumes the next day.
	ReasonBudget = "budget"
	// ReasonNoTask: a replica of an exec task role runs nothing until
	// a task is given to it (it is succeeded, parked, until then).
	ReasonNoTask = "no_task"
)

// Environment variables herd sets in every agent's environment.
const (
	EnvSession     = "HERD_SESSION"
	EnvIncarnation = "HERD_INCARNATION"
	EnvSocket      = "HERD_SOCKET"
)

// RestartPolicy says whether and how fast a crashed session is relaunched.
type RestartPolicy struct {
	Policy         string        `json:"policy"`
	InitialBackoff time.Duration `json:"initial_backoff"`
	MaxBackoff     time.Duration `json:"max_backoff"`
	ResetAfter     time.Duration `json:"reset_after"`
	MaxRestarts    int           `json:"max_restarts"` // 0 = unlimited
}

// Role is a named template with a desired replica count.
type Role struct {
	Name         string            `json:"name"`
	Replicas     int               `json:"replicas"`
	Command      []string          `json:"command"`
	Workdir      string            `json:"workdir"`
	Env          map[string]string `json:"env"`
	Runtime      string            `json:"runtime"`
	Agent        string            `json:"agent"`
	AgentProcess string            `json:"agent_process"`
	Restart      RestartPolicy     `json:"restart"`
	UpdatedAt    time.Time         `json:"updated_at"`

	Worktree        bool     `json:"worktree,omitempty"`          // each session in its own git worktree
	WorktreeBase    string   `json:"worktree_base,omitempty"`     // ref to branch from; "" is the workdir's branch
	WorktreeSetup   []string `json:"worktree_setup,omitempty"`    // argv run once in a new worktree
	WorktreeInclude []string `json:"worktree_include,omitempty"`  // globs of untracked files copied in
	MemoryMax       int64    `json:"memory_max,omitempty"`        // bytes; 0 is no limit
	PidsMax         int64    `json:"pids_max,omitempty"`          // 0 is no limit
	RestartOnUpdate bool     `json:"restart_on_update,omitempty"` // restart at the next idle moment when the agent binary was replaced
	// ResumeOnCrash: a crash relaunch continues the agent's conversation
	// when its session id is known; nil is the default, true (see
	// ResumesOnCrash).
	ResumeOnCrash *bool `json:"resume_on_crash,omitempty"`
	// AutoContinue: a session blocked by a rate limit with a named reset
	// time gets "continue" typed in at that time; nil is the default,
	// true (see ContinuesAfterReset).
	AutoContinue *bool `json:"auto_continue,omitempty"`
	// Manages lists the roles whose sessions this role's agents may type
	// into and wait on through herd's MCP server.
	Manages []string `json:"manages,omitempty"`
	// MCP: the role's agents get herd's MCP server at launch.
	MCP bool `json:"mcp,omitempty"`
	// Account names the agent account the role's sessions use (role key
	// account): a rate limit seen on one session blocks every session of
	// its account. Empty derives it (see internal/accounts).
	Account string `json:"account,omitempty"`
	// DailyBudgetUSD is what the role may spend in a day (local time); 0
	// is no budget.
	DailyBudgetUSD float64 `json:"daily_budget_usd,omitempty"`
	// BudgetHard stops a role's sessions at once when its budget is
	// reached, not at their next idle moment.
	BudgetHard bool `json:"budget_hard,omitempty"`
	// Host is the host whose daemon declared the role: its sessions run
	// there, and only that daemon reconciles it. Empty (a role recorded
	// before hosts were kept): every daemon reconciles it.
	Host string `json:"host,omitempty"`

	// Placement across a fleet. Hosts are the hosts the role's slots may
	// run on; Spread balances its replicas over them (over every live
	// host when Hosts is empty); Failover moves the slots of a host whose
	// daemon went stale to a live one. A role with neither Hosts nor
	// Spread runs on the host that declared it.
	Hosts    []string `json:"hosts,omitempty"`
	Spread   bool     `json:"spread,omitempty"`
	Failover bool     `json:"failover,omitempty"`

	// Tasks: the role's replicas take queued tasks, one each at a time
	// (role key tasks).
	Tasks bool `json:"tasks,omitempty"`
	// Check is the argv run in a task's worktree when its agent is done
	// (a task's own --check replaces it); CheckTimeout bounds it (0 is
	// DefaultCheckTimeout).
	Check        []string      `json:"check,omitempty"`
	CheckTimeout time.Duration `json:"check_timeout,omitempty"`
	// Merge is how an approved task lands: merge (""), squash or rebase.
	Merge string `json:"merge,omitempty"`
	// KeepBranch keeps a landed task's branch (its worktree goes).
	KeepBranch bool `json:"keep_branch,omitempty"`
	// MaxReplicas lets the task queue start replicas beyond Replicas, up
	// to it (0: the replicas are fixed); a replica beyond Replicas with no
	// task for ScaleDownAfter (0 is DefaultScaleDownAfter) is stopped.
	MaxReplicas    int           `json:"max_replicas,omitempty"`
	ScaleDownAfter time.Duration `json:"scale_down_after,omitempty"`
}

// DefaultScaleDownAfter is how long a replica the queue started waits
// without a task before it is stopped.
const DefaultScaleDownAfter = 10 * time.Minute

// DefaultCheckTimeout bounds a task's check when its role sets none.
const DefaultCheckTimeout = 20 * time.Minute

// Merge modes of a landing.
const (
	MergeMerge  = "merge"
	MergeSquash = "squash"
	MergeRebase = "rebase"
)

// ResumesOnCrash reports whether a crash relaunch of r's sessions
// continues the conversation (role key resume_on_crash, default true).
func (r Role) ResumesOnCrash() bool { return r.ResumeOnCrash == nil || *r.ResumeOnCrash }

// ContinuesAfterReset reports whether a session of r blocked by a rate
// limit is continued at the reset time (role key auto_continue, default
// true).
func (r Role) ContinuesAfterReset() bool { return r.AutoContinue == nil || *r.AutoContinue }

// Bool returns a pointer to b, for the optional booleans of a Role.
func Bool(b bool) *bool { return &b }

// Placed reports whether the placement leader assigns r's slots to hosts.
func (r Role) Placed() bool { return len(r.Hosts) > 0 || r.Spread }

var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,40}$`)

// ValidRoleName reports whether name is a legal role name.
func ValidRoleName(name string) bool { return nameRE.MatchString(name) }

// SessionName is the name of slot index of role.
func SessionName(role string, index int) string { return fmt.Sprintf("%s-%d", role, index) }

// InNamespace reports whether a (tmux) session name is in herd's
// namespace, <role>-<index>.
func InNamespace(name string) bool {
	i := strings.LastIndexByte(name, '-')
	if i <= 0 || i == len(name)-1 || !ValidRoleName(name[:i]) {
		return false
	}
	for _, c := range name[i+1:] {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// Identity pins down one process across pid reuse and reboots.
type Identity struct {
	BootID    string `json:"boot_id"`
	PID       int    `json:"pid"`
	StartTime uint64 `json:"start_time"` // clock ticks since boot, /proc/<pid>/stat field 22
	Marker    string `json:"marker"`     // value of HERD_INCARNATION in its environment
}

// Zero reports whether no process has been recorded.
func (id Identity) Zero() bool { return id.PID == 0 }

// Exit describes how an incarnation ended.
type Exit struct {
	Code   *int      `json:"code"`
	Signal *int      `json:"signal"`
	Reason string    `json:"reason"`
	At     time.Time `json:"at"`
	// Message says why when the agent never ran (a launch that failed).
	Message string `json:"message,omitempty"`
}

// Brief says how an incarnation ended in a few words, for a person: its
// exit code and signal, else its reason, and its message (trimmed, cut at
// 200 bytes); "unknown" when nothing is known.
func (e Exit) Brief() string {
	var parts []string
	if e.Code != nil {
		parts = append(parts, fmt.Sprintf("exit code %d", *e.Code))
	}
	if e.Signal != nil {
		parts = append(parts, fmt.Sprintf("signal %d", *e.Signal))
	}
	if e.Reason != "" && len(parts) == 0 {
		parts = append(parts, e.Reason)
	}
	if m := strings.TrimSpace(e.Message); m != "" {
		if len(m) > 200 {
			m = m[:200] + "..."
		}
		parts = append(parts, m)
	}
	if len(parts) == 0 {
		return "unknown"
	}
	return strings.Join(parts, ", ")
}

// Snapshot is what is needed to relaunch a stopped session.
type Snapshot struct {
	Argv           []string `json:"argv"`
	Workdir        string   `json:"workdir"`
	EnvNames       []string `json:"env_names"`
	Agent          string   `json:"agent"`
	AgentSessionID string   `json:"agent_session_id,omitempty"`
	RuntimeKind    string   `json:"runtime_kind"`
}

// Session is one replica slot of a role, with its crash bookkeeping.
type Session struct {
	Name        string `json:"name"`
	Role        string `json:"role"`
	Index       int    `json:"index"`
	Host        string `json:"host"`
	State       State  `json:"state"`
	Incarnation string `json:"incarnation"` // current (or last) incarnation id
	RuntimeKind string `json:"runtime_kind"`

	Runtime  Axis     `json:"runtime"`
	Process  Axis     `json:"process"`
	Activity Activity `json:"activity"`

	Restarts     int        `json:"restarts"`
	LastCrashAt  *time.Time `json:"last_crash_at"`
	BackoffUntil *time.Time `json:"backoff_until"`
	Exit         *Exit      `json:"exit"`

	StartedAt      *time.Time `json:"started_at"`
	LastActivityAt *time.Time `json:"last_activity_at"`
	StateSince     time.Time  `json:"state_since"`
	Archived       bool       `json:"archived"`
	Snapshot       *Snapshot  `json:"snapshot,omitempty"`
}

// Event is one entry of the append-only event log.
type Event struct {
	ID          int64          `json:"id"`
	Time        time.Time      `json:"time"`
	Host        string         `json:"host"`
	Session     string         `json:"session"`
	Incarnation string         `json:"incarnation"`
	Kind        string         `json:"kind"`
	Reason      string         `json:"reason"`
	Message     string         `json:"message"`
	Data        map[string]any `json:"data"`
}

// Host is one machine's daemon as recorded in the store: which boot of the
// machine it runs in, which version, since when, and when it last said so.
type Host struct {
	Name        string    `json:"name"`
	BootID      string    `json:"boot_id"`
	Version     string    `json:"version"` // the daemon's version
	StartedAt   time.Time `json:"started_at"`
	HeartbeatAt time.Time `json:"heartbeat_at"`
	// LeaseUntil is when the host's lease ends, by the database's clock
	// (zero: it never held one). Only the host renews it, with its
	// heartbeat; another host's failover slots move only once it has
	// ended (see placement).
	LeaseUntil time.Time `json:"lease_until"`
}

// Placement assigns one slot of a placed role to a host: only that host's
// daemon runs the slot's session. The placement leader is its one writer.
type Placement struct {
	Role       string    `json:"role"`
	Index      int       `json:"index"`
	Host       string    `json:"host"`
	AssignedAt time.Time `json:"assigned_at"`
	// Generation is the slot's fencing token: the store raises it with
	// every put, and a launch of the slot checks, in the transaction that
	// allows it, that the placement is still the one it read.
	Generation int64 `json:"generation"`
}

// Kinds of Command: what another host's daemon is asked to do.
const (
	CommandStop    = "stop"
	CommandResume  = "resume"
	CommandInject  = "inject"
	CommandArchive = "archive"
	CommandScale   = "scale" // Session names the role; Args["replicas"]
	CommandRestart = "restart"
	CommandReset   = "reset"
	CommandSignal  = "signal" // Args["signal"]
	// CommandAnswer answers a session's need from a console of another
	// host: Args["option"] or Args["text"], Args["since"], Args["who"].
	CommandAnswer = "answer"
	// CommandDeleteRole and CommandRollout name the role in Session.
	CommandDeleteRole = "delete_role"
	CommandRollout    = "rollout"
)

// States of a Command.
const (
	CommandPending = "pending" // written, not yet claimed
	CommandClaimed = "claimed" // the owning daemon is executing it
	CommandDone    = "done"    // executed; Result says what happened
	CommandFailed  = "failed"  // refused, failed or cancelled; Result says why
)

// Command is a request for the daemon of Host to act on one of its
// sessions, written by a CLI served on another host: the owning daemon
// claims it and executes it through its usual paths.
type Command struct {
	ID      int64             `json:"id"`
	Host    string            `json:"host"` // whose daemon executes it
	From    string            `json:"from"` // the host whose daemon wrote it
	Kind    string            `json:"kind"`
	Session string            `json:"session"`
	Args    map[string]string `json:"args"` // per kind: inject's "text" and "enter"
	State   string            `json:"state"`
	Result  string            `json:"result"`
	// CreatedAt, ClaimedAt and DoneAt are zero until they happen.
	CreatedAt time.Time `json:"created_at"`
	ClaimedAt time.Time `json:"claimed_at"`
	DoneAt    time.Time `json:"done_at"`
}
