package herd

import "time"

// Incarnation is one launch of a session.
type Incarnation struct {
	ID          string   `json:"id"`
	Session     string   `json:"session"`
	Host        string   `json:"host"`
	RuntimeKind string   `json:"runtime_kind"`
	Argv        []string `json:"argv"`
	Workdir     string   `json:"workdir"`
	// Identity is the agent process's identity (zero until first seen).
	Identity Identity `json:"identity"`
	// Root is the identity of the process herd launched (the pane's process
	// for tmux). It equals Identity unless the command is a wrapper.
	Root      Identity   `json:"root"`
	StartedAt time.Time  `json:"started_at"`
	EndedAt   *time.Time `json:"ended_at"`
	Exit      *Exit      `json:"exit"`
	// AgentSessionID is the agent's own session id (for resume), when known.
	AgentSessionID string `json:"agent_session_id,omitempty"`
	// Template is the fingerprint of the role's command, workdir and env
	// this incarnation was launched from (see internal/rollout); "" when
	// recorded before fingerprints.
	Template string `json:"template,omitempty"`
}

// AgentIdentity is the identity that speaks for inc's agent: the process
// found to be the agent (Identity), else the process herd launched
// (Root), else zero.
func (inc Incarnation) AgentIdentity() Identity {
	if !inc.Identity.Zero() {
		return inc.Identity
	}
	return inc.Root
}
