package api

import (
	"time"

	"herd"
)

// StopRequest is the optional body of POST /v1/sessions/{name}/stop.
type StopRequest struct {
	// Grace overrides the daemon's grace period before SIGKILL ("10s").
	Grace string `json:"grace,omitempty"`
}

// RestartRequest is the optional body of the restart endpoints:
// POST /v1/sessions/{name}/restart, /v1/roles/{name}/restart, /v1/restart.
type RestartRequest struct {
	Grace string `json:"grace,omitempty"`
}

// RestartResult is the reply of the restart endpoints.
type RestartResult struct {
	Message string `json:"message"`
	// Restarted lists each session given a fresh incarnation.
	Restarted []Restarted `json:"restarted"`
}

// Restarted is one session restarted.
type Restarted struct {
	Session     string `json:"session"`
	Incarnation string `json:"incarnation,omitempty"`
	Error       string `json:"error,omitempty"`
}

// SignalRequest is the body of POST /v1/sessions/{name}/signal.
type SignalRequest struct {
	// Signal is a name (TERM, SIGTERM, HUP) or a number.
	Signal string `json:"signal"`
}

// RolloutRequest is the body of POST /v1/roles/{name}/rollout.
type RolloutRequest struct {
	MaxUnavailable int    `json:"max_unavailable"`
	Ready          string `json:"ready,omitempty"` // wait for each new incarnation to run; default 1m
	// All replaces every session, outdated or not.
	All bool `json:"all,omitempty"`
	// MinReady: each new incarnation must keep running this long ("1s").
	MinReady string `json:"min_ready,omitempty"`
}

// RolloutStep is one session a rollout replaced.
type RolloutStep struct {
	Session string        `json:"session"`
	From    string        `json:"from"`
	To      string        `json:"to"`
	Reason  string        `json:"reason"`
	Took    time.Duration `json:"took"`
}

// RolloutResult is the reply of a rollout.
type RolloutResult struct {
	Message  string        `json:"message"`
	Replaced []RolloutStep `json:"replaced"`
	Left     []string      `json:"left,omitempty"`
	Error    string        `json:"error,omitempty"`
}

// ApplyRequest is the body of POST /v1/roles from herd apply (herd run
// sends a bare array of roles).
type ApplyRequest struct {
	Roles []herd.Role `json:"roles"`
	// Inherit names, by role, the restart keys the daemon fills from its
	// own [restart] defaults.
	Inherit map[string][]string `json:"inherit,omitempty"`
	DryRun  bool                `json:"dry_run,omitempty"`
}

// RoleChange is what an apply did, or would do, to one role.
type RoleChange struct {
	Role     string   `json:"role"`
	Action   string   `json:"action"` // created, configured, unchanged
	Changed  []string `json:"changed,omitempty"`
	Outdated int      `json:"outdated,omitempty"`
	Rearmed  int      `json:"rearmed,omitempty"`
}

// ApplyResult is the reply of POST /v1/roles.
type ApplyResult struct {
	Message string       `json:"message"`
	Changes []RoleChange `json:"changes"`
}

// ReloadResult is the reply of POST /v1/reload: what a reload of the
// daemon's config file changed.
type ReloadResult struct {
	Message string `json:"message"`
	// File is the config file read ("" when there is none: the defaults).
	File string `json:"file"`
	// Applied lists the sections changed and applied live.
	Applied []string `json:"applied"`
	// NeedsRestart lists the sections changed that take effect only when
	// the daemon restarts, each with why.
	NeedsRestart []SectionNote `json:"needs_restart"`
	// Roles says what became of the file's roles.
	Roles []RoleChange `json:"roles"`
}

// SectionNote is one config section and a note on it.
type SectionNote struct {
	Section string `json:"section"`
	Why     string `json:"why"`
}
