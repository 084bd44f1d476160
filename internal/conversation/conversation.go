// Package conversation picks how a launch starts an agent's conversation:
// a new one under an id herd chose, the prior one continued after a crash
// (resume_on_crash), or one the role names that is already in use; and
// the command that brings a stopped session's conversation back. Slots
// calls it for every launch and resume; it reads the agents' transcripts
// to decide, and never writes anything.
package conversation

import (
	"os"
	"path/filepath"
	"slices"

	"herd"
	"herd/internal/agents"
)

// How a launch from a role's command starts the agent's conversation.
const (
	// New: a new conversation, under an id herd chose when it could.
	New = ""
	// Resumed: a crash relaunch continuing the conversation
	// (resume_on_crash).
	Resumed = "resume_on_crash"
	// InUse: the role's --session-id names a conversation that
	// already exists, so it is resumed instead.
	InUse = "id_in_use"
)

// Pick picks the argv of a launch from a role's command (kind,
// argv, resolved: the path argv[0] resolves to) and the agent session id
// to record on the incarnation at once:
//
//   - cont (a crash relaunch of a role with resume_on_crash) and the prior
//     incarnation's id known: the resume command, which keeps the role's
//     flags; how is Resumed. A Claude conversation that never began
//     (no transcript: the agent died before its first prompt) cannot be
//     resumed (claude --resume refuses it): the same id is given to
//     --session-id again.
//   - otherwise agents.LaunchArgv: Claude gets --session-id with a fresh
//     id, unless the command already picks a conversation. A --session-id
//     the role names itself that is already in use (inUse says its
//     transcript exists; without inUse, the prior incarnation had it) is
//     resumed instead
//     (Claude refuses to start a second conversation under one id); how
//     is InUse.
func Pick(kind string, argv []string, resolved, priorID string, cont bool, inUse func(id string) bool, newID func() string) (out []string, id, how string) {
	if cont && priorID != "" {
		if kind == herd.AgentClaude && inUse != nil && !inUse(priorID) {
			newID = func() string { return priorID }
		} else if out, ok := agents.ResumeCommand(kind, argv, resolved, priorID); ok {
			return out, priorID, Resumed
		}
	}
	out, id = agents.LaunchArgv(kind, argv, resolved, newID)
	if id == "" || len(out) != len(argv) {
		return out, id, New // herd chose the id: new, never in use
	}
	used := id == priorID // without a way to look, a prior launch used it
	if inUse != nil {
		used = inUse(id)
	}
	if used {
		if res, ok := agents.ResumeCommand(kind, argv, resolved, id); ok {
			return res, id, InUse
		}
	}
	return out, id, New
}

// ClaudeTranscriptExists reports whether Claude keeps a conversation
// under id for an agent run in workdir with env: its transcript file is
// there ($CLAUDE_CONFIG_DIR, else $HOME/.claude).
func ClaudeTranscriptExists(workdir string, env map[string]string) func(id string) bool {
	return func(id string) bool {
		w := agents.Where{Cwd: workdir, SessionID: id, Home: env["HOME"], ConfigDir: env["CLAUDE_CONFIG_DIR"]}
		if w.Home == "" {
			w.Home, _ = os.UserHomeDir()
		}
		if w.ConfigDir == "" {
			w.ConfigDir = os.Getenv("CLAUDE_CONFIG_DIR")
		}
		for _, p := range agents.TranscriptPatterns(herd.AgentClaude, w) {
			if m, _ := filepath.Glob(p); len(m) > 0 {
				return true
			}
		}
		return false
	}
}

// ResumeArgv is the command that brings a stopped session back (see
// agents.ResumeArgv), except for a Claude conversation that never began
// (no transcript): claude --resume would refuse it, so the command it was
// launched with, naming the same id with --session-id, runs again.
func ResumeArgv(snap herd.Snapshot, env map[string]string) []string {
	if snap.Agent == herd.AgentClaude && snap.AgentSessionID != "" && slices.Contains(snap.Argv, "--session-id") &&
		!ClaudeTranscriptExists(snap.Workdir, env)(snap.AgentSessionID) {
		return slices.Clone(snap.Argv)
	}
	return agents.ResumeArgv(snap)
}
