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
			[]string{"claude", "--model", "x", "--resume", "abc-1"}},
		{"claude: an older id and --continue dropped", herd.Snapshot{Agent: herd.AgentClaude, Argv: []string{"claude", "--resume", "old", "-c"}, AgentSessionID: "new"},
			[]string{"claude", "--resume", "new"}},
		{"codex resume", herd.Snapshot{Agent: herd.AgentCodex, Argv: []string{"codex", "exec", "--json"}, AgentSessionID: "t1"},
			[]string{"codex", "resume", "t1"}},
		{"gemini --resume", herd.Snapshot{Agent: herd.AgentGemini, Argv: []string{"gemini"}, AgentSessionID: "g1"},
			[]string{"gemini", "--resume", "g1"}},
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
