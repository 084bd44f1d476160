// Package api defines the daemon's HTTP+JSON API over its unix socket, and a client for it.
package api

import (
	"time"

	"herd"
)

// SessionView is one session as shown by `herd get sessions -o json`.
// The keys are fixed by the product contract.
type SessionView struct {
	Name           string        `json:"name"`
	Role           string        `json:"role"`
	Index          int           `json:"index"`
	Host           string        `json:"host"`
	Incarnation    string        `json:"incarnation"`
	RuntimeKind    string        `json:"runtime_kind"`
	State          herd.State    `json:"state"`
	Runtime        herd.Axis     `json:"runtime"`
	Process        herd.Axis     `json:"process"`
	Activity       herd.Activity `json:"activity"`
	Restarts       int           `json:"restarts"`
	PID            int           `json:"pid"`
	StartedAt      *time.Time    `json:"started_at"`
	LastActivityAt *time.Time    `json:"last_activity_at"`
	BackoffUntil   *time.Time    `json:"backoff_until"`
	Attached       bool          `json:"attached"`
	Exit           *herd.Exit    `json:"exit"`
	StateSince     time.Time     `json:"state_since"`
	Archived       bool          `json:"archived"`
	// Escalated is true while the session has an open escalation.
	Escalated bool `json:"escalated"`
	// Notified is true while the session has an open notification: it
	// needs a person, and [notify] told one.
	Notified bool `json:"notified"`
	// Outdated is true while the session runs an older command, workdir
	// or env than its role's; OutdatedReason says which.
	Outdated       bool   `json:"outdated"`
	OutdatedReason string `json:"outdated_reason,omitempty"`
	// Unmanaged marks a herd-named tmux session with no record (left for the reaper).
	Unmanaged bool `json:"unmanaged,omitempty"`
	// Worktree is the session's own git worktree; nil when it runs in its
	// role's workdir.
	Worktree *Worktree `json:"worktree"`
	// Account is the agent account of the session's role (role key
	// account, else derived from the agent's config dir); "" when the
	// role is gone.
	Account string `json:"account,omitempty"`
	// Usage is what the session's agents recorded of their token use, of
	// all its incarnations, and its cost.
	Usage Usage `json:"usage"`
}

// Attention reports whether the session shows "!": an open escalation or
// an open notification.
func (v SessionView) Attention() bool { return v.Escalated || v.Notified }

// SessionDetail is `herd describe session NAME -o json`.
type SessionDetail struct {
	SessionView
	Identity     *herd.Identity `json:"identity"`
	Root         *herd.Identity `json:"root"`
	Argv         []string       `json:"argv"`
	Workdir      string         `json:"workdir"`
	Snapshot     *herd.Snapshot `json:"snapshot"`
	Diagnostics  any            `json:"diagnostics"`
	RecentEvents []herd.Event   `json:"recent_events"`
	StderrTail   []string       `json:"stderr_tail"`
	// ActivityDetail is what the watchdog saw of the agent's output and hooks.
	ActivityDetail any `json:"activity_detail,omitempty"`
	// Notification is the session's open notification, nil when none.
	Notification *Notification `json:"notification,omitempty"`
	// Budget is the role's daily budget; nil when it has none.
	Budget *Budget `json:"budget,omitempty"`
}

// Budget is a role's daily budget as describe shows it.
type Budget struct {
	DailyBudgetUSD float64 `json:"daily_budget_usd"`
	BudgetHard     bool    `json:"budget_hard"`
}

// Notification is a session's open notification ([notify]): what it
// needs, since when, and how each channel took it.
type Notification struct {
	Need     string                         `json:"need"`
	Since    time.Time                      `json:"since"`
	Title    string                         `json:"title"`
	Action   string                         `json:"action"`
	Channels map[string]NotificationChannel `json:"channels"`
}

// NotificationChannel is one channel's delivery of a notification.
type NotificationChannel struct {
	Delivered bool       `json:"delivered"`
	Attempts  int        `json:"attempts"`
	LastError string     `json:"last_error,omitempty"`
	NextTry   *time.Time `json:"next_try,omitempty"`
}

// RoleView is one role as shown by `herd get roles`.
type RoleView struct {
	herd.Role
	Ready int `json:"ready"` // sessions running
	Live  int `json:"live"`  // sessions holding a replica
	// Hosts counts the role's sessions per host, for every host with one
	// recorded.
	Hosts map[string]RoleCount `json:"hosts,omitempty"`
	// Placement is set for a role placed across the fleet (its hosts,
	// spread or failover keys).
	Placement *PlacementView `json:"placement,omitempty"`
}

// PlacementView is where a placed role's slots run.
type PlacementView struct {
	// Hosts is the role's hosts key: the hosts its slots may run on
	// (empty: any host of the fleet).
	Hosts    []string `json:"hosts"`
	Spread   bool     `json:"spread"`
	Failover bool     `json:"failover"`
	// Slots maps each assigned slot's session name to its host.
	Slots map[string]string `json:"slots"`
}

// ScaleRequest is the body of POST /v1/roles/{name}/scale.
type ScaleRequest struct {
	Replicas int `json:"replicas"`
}

// Result is the body of replies to commands.
type Result struct {
	// Message is a one-line, human-readable outcome.
	Message string `json:"message"`
}

// Error is the body of every non-2xx reply.
type Error struct {
	Error string `json:"error"`
}

// Health is the body of GET /v1/health.
type Health struct {
	Version string `json:"version"`
	PID     int    `json:"pid"`
	Host    string `json:"host"`
	BootID  string `json:"boot_id"`
	// StoreAwaySince is when the shared store (PostgreSQL) stopped
	// answering, while it is away: the daemon supervises its own
	// sessions meanwhile and answers from its live set; absent while the
	// store answers.
	StoreAwaySince *time.Time `json:"store_away_since,omitempty"`
}

// ActivityReport is the body of POST /v1/activity, sent by `herd hook`.
type ActivityReport struct {
	Session     string    `json:"session"`
	Incarnation string    `json:"incarnation"`
	Event       string    `json:"event"`
	Payload     []byte    `json:"payload"` // the hook JSON as received
	At          time.Time `json:"at"`
	// Agent is the kind the hook was installed for (herd hook --agent);
	// the daemon reads the payload as the session's role says, this when
	// the role does not say.
	Agent string `json:"agent,omitempty"`
}

// InjectRequest is the body of POST /v1/sessions/{name}/inject.
type InjectRequest struct {
	Text  string `json:"text"`
	Enter bool   `json:"enter"`
	// NoClear keeps what is on the agent's input line; by default the
	// agent's clear keys (agents.ClearKeys) empty it first.
	NoClear bool `json:"no_clear,omitempty"`
	// Multiline lets Text hold line breaks, pasted as one input
	// (bracketed paste); without it, a line break in Text is 400.
	Multiline bool `json:"multiline,omitempty"`
}
