package agents

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"herd"
)

const sid = "0f8fad5b-d9cb-469f-a165-70867728950e"

func TestLaunchArgv(t *testing.T) {
	fixed := func() string { return sid }
	tests := []struct {
		name   string
		kind   string
		argv   []string
		want   []string
		wantID string
	}{
		{"claude", herd.AgentClaude, []string{"claude", "--model", "opus"}, []string{"claude", "--session-id", sid, "--model", "opus"}, sid},
		{"claude variadic flag last", herd.AgentClaude, []string{"claude", "--allowedTools", "Bash", "Edit"}, []string{"claude", "--session-id", sid, "--allowedTools", "Bash", "Edit"}, sid},
		{"claude own id", herd.AgentClaude, []string{"claude", "--session-id", "abc-1"}, []string{"claude", "--session-id", "abc-1"}, "abc-1"},
		{"claude own id =", herd.AgentClaude, []string{"claude", "--session-id=abc-2"}, []string{"claude", "--session-id=abc-2"}, "abc-2"},
		{"claude resume", herd.AgentClaude, []string{"claude", "--resume", "x"}, []string{"claude", "--resume", "x"}, ""},
		{"claude continue", herd.AgentClaude, []string{"claude", "-c"}, []string{"claude", "-c"}, ""},
		{"claude node launcher", herd.AgentClaude, []string{"node", "/l/@anthropic-ai/claude-code/cli.js", "-p"}, []string{"node", "/l/@anthropic-ai/claude-code/cli.js", "--session-id", sid, "-p"}, sid},
		{"claude wrapped", herd.AgentClaude, []string{"./run.sh"}, []string{"./run.sh"}, ""},
		{"codex", herd.AgentCodex, []string{"codex"}, []string{"codex"}, ""},
		{"generic", herd.AgentGeneric, []string{"aider"}, []string{"aider"}, ""},
	}
	for _, tc := range tests {
		got, id := LaunchArgv(tc.kind, tc.argv, "", fixed)
		if diff := cmp.Diff(tc.want, got); diff != "" || id != tc.wantID {
			t.Errorf("[%s] expected id %q, got %q; argv (-want +got):\n%s", tc.name, tc.wantID, id, diff)
		}
	}
	// A bad id from the generator is never passed.
	got, id := LaunchArgv(herd.AgentClaude, []string{"claude"}, "", func() string { return "--evil" })
	if id != "" || len(got) != 1 {
		t.Errorf("bad generated id: got %q %q", got, id)
	}
	if _, id := LaunchArgv(herd.AgentClaude, []string{"claude"}, "", nil); !ValidSessionID(id) {
		t.Errorf("NewSessionID gave %q", id)
	}
}

func TestResumeCommand(t *testing.T) {
	tests := []struct {
		name string
		kind string
		argv []string
		id   string
		want []string
		ok   bool
	}{
		{"claude", herd.AgentClaude, []string{"claude"}, sid, []string{"claude", "--resume", sid}, true},
		{"claude keeps flags", herd.AgentClaude, []string{"claude", "--model", "opus", "--allowedTools", "Bash", "Edit"}, sid,
			[]string{"claude", "--resume", sid, "--model", "opus", "--allowedTools", "Bash", "Edit"}, true},
		{"claude drops session flags", herd.AgentClaude, []string{"claude", "--session-id", "old", "-c", "--resume=old2", "-r", "old3", "--fork-session", "--verbose"}, sid,
			[]string{"claude", "--resume", sid, "--verbose"}, true},
		{"claude after --", herd.AgentClaude, []string{"claude", "--", "-c"}, sid, []string{"claude", "--resume", sid, "--", "-c"}, true},
		{"claude exe", herd.AgentClaude, []string{"/p/bin/claude.exe", "--model", "x"}, sid, []string{"/p/bin/claude.exe", "--resume", sid, "--model", "x"}, true},
		{"codex", herd.AgentCodex, []string{"codex"}, "th_1", []string{"codex", "resume", "th_1"}, true},
		{"codex flags and prompt", herd.AgentCodex, []string{"codex", "-m", "o3", "--full-auto", "-c", "a=b", "fix the tests"}, "th_1",
			[]string{"codex", "resume", "th_1", "-m", "o3", "--full-auto", "-c", "a=b"}, true},
		{"codex exec", herd.AgentCodex, []string{"codex", "exec", "--json", "-s", "workspace-write", "do it"}, "th_1",
			[]string{"codex", "exec", "resume", "th_1", "--json", "-s", "workspace-write"}, true},
		{"codex resume again", herd.AgentCodex, []string{"codex", "resume", "old", "--search"}, "th_2", []string{"codex", "resume", "th_2", "--search"}, true},
		{"codex resume --last", herd.AgentCodex, []string{"codex", "resume", "--last"}, "th_2", []string{"codex", "resume", "th_2"}, true},
		{"gemini", herd.AgentGemini, []string{"gemini", "-m", "gemini-2.5-pro", "-i", "start", "--yolo"}, sid,
			[]string{"gemini", "-r", sid, "-m", "gemini-2.5-pro", "--yolo"}, true},
		{"gemini old resume", herd.AgentGemini, []string{"gemini", "--resume", "latest"}, sid, []string{"gemini", "-r", sid}, true},
		{"id like a flag", herd.AgentClaude, []string{"claude"}, "--dangerously-skip-permissions", []string{"claude"}, false},
		{"empty id", herd.AgentClaude, []string{"claude"}, "", []string{"claude"}, false},
		{"wrapper", herd.AgentClaude, []string{"bash", "-c", "claude"}, sid, []string{"bash", "-c", "claude"}, false},
		{"generic", herd.AgentGeneric, []string{"aider"}, sid, []string{"aider"}, false},
		{"kind mismatch", herd.AgentCodex, []string{"claude"}, sid, []string{"claude"}, false},
	}
	for _, tc := range tests {
		got, ok := ResumeCommand(tc.kind, tc.argv, "", tc.id)
		if diff := cmp.Diff(tc.want, got); diff != "" || ok != tc.ok {
			t.Errorf("[%s] expected ok=%v, got %v; argv (-want +got):\n%s", tc.name, tc.ok, ok, diff)
		}
	}
}

func TestResumeCommandDoesNotAlias(t *testing.T) {
	argv := []string{"claude", "--model", "x"}
	out, _ := ResumeCommand(herd.AgentClaude, argv, "", sid)
	out[0] = "changed"
	if argv[0] != "claude" {
		t.Error("ResumeCommand shares its result with its input")
	}
}

func TestValidSessionID(t *testing.T) {
	for id, want := range map[string]bool{
		sid: true, "th_01:a.b": true, "-r": false, "": false, "a b": false, "a/b": false,
		"x" + string(make([]byte, 200)): false,
	} {
		if got := ValidSessionID(id); got != want {
			t.Errorf("ValidSessionID(%q): expected %v, got %v", id, want, got)
		}
	}
}

func TestIDInUse(t *testing.T) {
	// What Claude Code (2.1.197 and 2.1.330) prints.
	if !IDInUse("Error: Session ID 91723a88-63f5-466d-8779-aa0142601658 is already in use.\n") {
		t.Error("the real refusal is not recognised")
	}
	if IDInUse("Error: Invalid session ID. Must be a valid UUID.") {
		t.Error("an invalid id is not an id in use")
	}
}
