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

func TestResumesID(t *testing.T) {
	const id = "aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee"
	for _, c := range []struct {
		name string
		kind string
		argv []string
		want bool
	}{
		{"claude --resume", herd.AgentClaude, []string{"claude", "--resume", id, "--model", "x"}, true},
		{"claude --resume=", herd.AgentClaude, []string{"claude", "--resume=" + id}, true},
		{"claude another id", herd.AgentClaude, []string{"claude", "--resume", "other"}, false},
		{"claude --session-id is a start", herd.AgentClaude, []string{"claude", "--session-id", id}, false},
		{"gemini -r", herd.AgentGemini, []string{"/usr/bin/gemini", "-m", "gemini-2.5-flash", "-r", id}, true},
		{"gemini fresh", herd.AgentGemini, []string{"gemini", "-m", "gemini-2.5-flash"}, false},
		{"codex resume", herd.AgentCodex, []string{"codex", "resume", id, "-a", "on-request"}, true},
		{"codex exec resume", herd.AgentCodex, []string{"codex", "exec", "resume", id, "--json"}, true},
		{"codex a prompt that says resume", herd.AgentCodex, []string{"codex", "resume the work"}, false},
		{"generic", herd.AgentGeneric, []string{"sh", "-r", id}, false},
	} {
		if got := ResumesID(c.kind, c.argv, id); got != c.want {
			t.Errorf("[%s] expected %v, got %v", c.name, c.want, got)
		}
	}
	if ResumesID(herd.AgentClaude, []string{"claude", "--resume", ""}, "") {
		t.Error("[no id] expected false")
	}
}

func TestResumeRefused(t *testing.T) {
	code := func(n int) herd.Exit { return herd.Exit{Code: &n, Reason: herd.ReasonExitCode} }
	sig := func(n int) herd.Exit { return herd.Exit{Signal: &n, Reason: herd.ReasonSignal} }
	const geminiOut = "Error resuming session: Invalid session identifier \"4b1c\".\n  Searched for sessions in /home/user/.gemini/tmp/proj/chats.\n"
	for _, c := range []struct {
		name   string
		kind   string
		exit   herd.Exit
		output string
		want   bool
	}{
		{"gemini says so", herd.AgentGemini, code(42), geminiOut, true},
		{"gemini has no session left (real)", herd.AgentGemini, code(42), "Error resuming session: No previous sessions found for this project.\n", true},
		{"gemini exit 42 alone (output lost)", herd.AgentGemini, code(42), "", true},
		{"gemini another failure", herd.AgentGemini, code(1), "boom", false},
		{"gemini killed", herd.AgentGemini, sig(11), geminiOut, false},
		{"claude no conversation", herd.AgentClaude, code(1), "No conversation found with session ID: aaaa", true},
		{"claude in use", herd.AgentClaude, code(1), "Error: Session ID aaaa is already in use.", true},
		{"claude exit 42 is nothing", herd.AgentClaude, code(42), "", false},
		{"codex no saved session", herd.AgentCodex, code(1), "Error: No saved session found with ID aaaa. Run `codex resume` without an ID to choose from existing sessions.", true},
		{"codex crash", herd.AgentCodex, code(1), "thread 'main' panicked", false},
		{"a clean exit never", herd.AgentGemini, code(0), geminiOut, false},
		{"no exit known, said so", herd.AgentClaude, herd.Exit{Reason: herd.ReasonPaneGone}, "No conversation found with session ID", true},
		{"no exit known, gemini said so", herd.AgentGemini, herd.Exit{Reason: herd.ReasonProcessGone}, geminiOut, true},
		{"no exit known, nothing said", herd.AgentGemini, herd.Exit{Reason: herd.ReasonProcessGone}, "", false},
		{"no exit known, other words", herd.AgentCodex, herd.Exit{Reason: herd.ReasonPaneGone}, "thread 'main' panicked", false},
		{"generic", herd.AgentGeneric, code(42), geminiOut, false},
	} {
		why, got := ResumeRefused(c.kind, c.exit, c.output)
		if got != c.want || got == (why == "") {
			t.Errorf("[%s] expected %v with a reason, got %v %q", c.name, c.want, got, why)
		}
	}
}
