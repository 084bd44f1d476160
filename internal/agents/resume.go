// Package agents holds what herd knows of each agent kind: the names of
// its process and how to resume its conversation.
package agents

import (
	"path/filepath"
	"slices"

	"herd"
	"herd/internal/activity"
)

// ProcessNames returns the names that pick the agent process out of the
// launched tree, and whether the launched process is a wrapper around it.
func ProcessNames(r herd.Role, argv []string) (names []string, wrapped bool) {
	base := ""
	if len(argv) > 0 {
		base = filepath.Base(argv[0])
	}
	want := r.AgentProcess
	if want == "" {
		switch r.Agent {
		case herd.AgentClaude, herd.AgentCodex, herd.AgentGemini:
			want = r.Agent
		}
	}
	if want == "" || want == base {
		return nil, false
	}
	return []string{want}, true
}

// ResumeArgv is the command that continues a stopped agent's conversation:
// `claude --resume <id>` for Claude Code, `codex resume <id>` for Codex,
// and the original command for anything else or when no id is known.
func ResumeArgv(snap herd.Snapshot) []string {
	argv := slices.Clone(snap.Argv)
	id := snap.AgentSessionID
	if id == "" || len(argv) == 0 || !activity.ValidAgentSessionID(id) {
		// No id, or one stored before ids were validated that could
		// pass for a flag: relaunch the command as it was.
		return argv
	}
	switch snap.Agent {
	case herd.AgentClaude:
		out := []string{argv[0]}
		for i := 1; i < len(argv); i++ {
			switch argv[i] {
			case "--resume", "-r":
				i++ // drop an older id
				continue
			case "--continue", "-c":
				continue
			}
			out = append(out, argv[i])
		}
		return append(out, "--resume", id)
	case herd.AgentCodex:
		return []string{argv[0], "resume", id}
	case herd.AgentGemini:
		return append(argv, "--resume", id)
	}
	return argv
}
