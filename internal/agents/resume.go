package agents

import (
	"slices"

	"herd"
)

// ProcessNames returns the names that pick the agent process out of the
// launched tree, and whether the launched process is a wrapper around it.
func ProcessNames(r herd.Role, argv []string) (names []string, wrapped bool) {
	base := ""
	if len(argv) > 0 {
		// claude.exe (what node_modules/.bin/claude links to) is claude.
		base = BaseName(argv[0])
	}
	want := r.AgentProcess
	if want == "" {
		switch r.Agent {
		case herd.AgentClaude, herd.AgentCodex, herd.AgentGemini:
			want = r.Agent
		}
	}
	if want == "" || want == base || (r.AgentProcess == "" && Infer(argv, "") == want) {
		// The launched process is the agent: named so, or an
		// interpreter running the agent's script (node .../gemini).
		return nil, false
	}
	return []string{want}, true
}

// ResumeArgv is the command that continues a stopped agent's conversation,
// keeping the role's flags (see ResumeCommand): `claude --resume <id> ...`,
// `codex [exec] resume <id> ...`, `gemini -r <id> ...`; the original
// command for anything else, for a wrapper, or when no valid id is known.
func ResumeArgv(snap herd.Snapshot) []string {
	argv := slices.Clone(snap.Argv)
	if snap.AgentSessionID == "" || len(argv) == 0 {
		return argv
	}
	out, ok := ResumeCommand(snap.Agent, argv, "", snap.AgentSessionID)
	if !ok {
		return argv
	}
	return out
}
