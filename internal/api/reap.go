package api

import "time"

// ReapRequest is the body of POST /v1/reap (the query parameter dry_run=1
// works too).
type ReapRequest struct {
	// DryRun decides and reports, changing nothing.
	DryRun bool `json:"dry_run"`
}

// ReapReport is the reply of POST /v1/reap: one reaper pass.
type ReapReport struct {
	DryRun    bool      `json:"dry_run"`
	StartedAt time.Time `json:"started_at"`
	// DurationMS is how long the pass took, in milliseconds.
	DurationMS int64 `json:"duration_ms"`
	// Candidates are every session the pass looked at, by name.
	Candidates []ReapCandidate `json:"candidates"`
	// Reaped counts the sessions reaped (or, in a dry run, that would be)
	// per reason: idle, orphan, archived.
	Reaped map[string]int `json:"reaped"`
	// Kept and Skipped count the candidates left alone: kept because
	// they are needed, skipped because a fact was unknown or the
	// re-check before the kill said no.
	Kept    int `json:"kept"`
	Skipped int `json:"skipped"`
	// Notes say what the pass could not examine (e.g. tmux not installed).
	Notes []string `json:"notes,omitempty"`
}

// Reap candidate outcomes (ReapCandidate.Action).
const (
	ReapActionReaped    = "reaped"
	ReapActionWouldReap = "would_reap"
	ReapActionKept      = "kept"
	ReapActionSkipped   = "skipped"
)

// ReapCandidate is the reaper's decision on one session.
type ReapCandidate struct {
	Session     string `json:"session"`
	Incarnation string `json:"incarnation,omitempty"`
	RuntimeKind string `json:"runtime_kind"`
	// Unmanaged marks a herd-named tmux session with no record.
	Unmanaged bool `json:"unmanaged,omitempty"`
	Attached  bool `json:"attached"`
	// Verdict is the policy's: reap, keep or skip.
	Verdict string `json:"verdict"`
	// Reason is the reap reason (idle, orphan, archived), or why not
	// (attached, active, unknown, absent, ...).
	Reason string `json:"reason"`
	// Detail is one human-readable line.
	Detail string `json:"detail"`
	// IdleSeconds is how long the session has shown no output or
	// activity, when known.
	IdleSeconds float64 `json:"idle_seconds,omitempty"`
	// Action is what was done: reaped, would_reap, kept or skipped.
	Action string `json:"action"`
	// Error says why a reap was not carried out (the re-check said no, or
	// the stop failed).
	Error string `json:"error,omitempty"`
}
