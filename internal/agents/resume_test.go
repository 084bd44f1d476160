package agents

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"herd"
)

func TestResumeArgv(t *testing.T) {
	for _, c := range []struct {
		name string
		snap herd.Snapshot
		want []string
	}{
		{"claude gets --resume", herd.Snapshot{Agent: herd.AgentClaude, Argv: []string{"claude", "--model", "x"}, AgentSessionID: "abc-1"},
			[]string{"claude", "--resume", "abc-1", "--model", "x"}},
		{"claude: an older id and --continue dropped", herd.Snapshot{Agent: herd.AgentClaude, Argv: []string{"claude", "--resume", "old", "-c"}, AgentSessionID: "new"},
			[]string{"claude", "--resume", "new"}},
		{"codex resume keeps the role's flags", herd.Snapshot{Agent: herd.AgentCodex, Argv: []string{"codex", "exec", "--json"}, AgentSessionID: "t1"},
			[]string{"codex", "exec", "resume", "t1", "--json"}},
		{"gemini --resume", herd.Snapshot{Agent: herd.AgentGemini, Argv: []string{"gemini"}, AgentSessionID: "g1"},
			[]string{"gemini", "-r", "g1"}},
		{"no id: the command as it was", herd.Snapshot{Agent: herd.AgentClaude, Argv: []string{"claude"}},
			[]string{"claude"}},
		{"an id that passes for a flag is never used", herd.Snapshot{Agent: herd.AgentClaude, Argv: []string{"claude"}, AgentSessionID: "--dangerously-skip-permissions"},
			[]string{"claude"}},
		{"an id with spaces is never used", herd.Snapshot{Agent: herd.AgentCodex, Argv: []string{"codex"}, AgentSessionID: "a b"},
			[]string{"codex"}},
		{"generic agent: the command as it was", herd.Snapshot{Agent: herd.AgentGeneric, Argv: []string{"my-agent", "-v"}, AgentSessionID: "x"},
			[]string{"my-agent", "-v"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if diff := cmp.Diff(c.want, ResumeArgv(c.snap)); diff != "" {
				t.Errorf("ResumeArgv (-want +got):\n%s", diff)
			}
		})
	}
}

// TestProcessNames: regression — a command naming claude.exe (what
// node_modules/.bin/claude links to) was taken for a wrapper around a
// process named claude, and the session stayed pending forever; so was an
// interpreter running the agent's script.
func TestProcessNames(t *testing.T) {
	for _, c := range []struct {
		name    string
		role    herd.Role
		argv    []string
		wrapped bool
	}{
		{"claude", herd.Role{Agent: herd.AgentClaude}, []string{"claude"}, false},
		{"claude.exe is claude", herd.Role{Agent: herd.AgentClaude}, []string{"/opt/x/node_modules/@anthropic-ai/claude-code/bin/claude.exe"}, false},
		{"node running gemini", herd.Role{Agent: herd.AgentGemini}, []string{"node", "/opt/x/node_modules/@google/gemini-cli/dist/index.js"}, false},
		{"a shell around claude", herd.Role{Agent: herd.AgentClaude}, []string{"sh", "-c", "claude"}, true},
		{"agent_process names the agent", herd.Role{Agent: herd.AgentGeneric, AgentProcess: "aider"}, []string{"./run.sh"}, true},
		{"generic", herd.Role{Agent: herd.AgentGeneric}, []string{"./run.sh"}, false},
	} {
		_, wrapped := ProcessNames(c.role, c.argv)
		if wrapped != c.wrapped {
			t.Errorf("[%s] expected wrapped %v … got %v", c.name, c.wrapped, wrapped)
		}
	}
}
