package agents

import (
	"strings"
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

func TestWithSettingsFile(t *testing.T) {
	const f = "/state/hooks/w.claude.json"
	tests := []struct {
		name  string
		argv  []string
		want  []string
		prior string
		ok    bool
	}{
		{"plain", []string{"claude", "--model", "opus"}, []string{"claude", "--settings", f, "--model", "opus"}, "", true},
		{"own settings", []string{"claude", "--settings", "my.json", "-p"}, []string{"claude", "--settings", f, "-p"}, "my.json", true},
		{"own settings =", []string{"claude", "--settings={\"a\":1}"}, []string{"claude", "--settings=" + f}, `{"a":1}`, true},
		{"settings last word", []string{"claude", "--settings"}, []string{"claude", "--settings", f}, "", true},
		{"after --", []string{"claude", "--", "--settings", "x"}, []string{"claude", "--settings", f, "--", "--settings", "x"}, "", true},
		{"node launcher", []string{"node", "/l/@anthropic-ai/claude-code/cli.js"}, []string{"node", "/l/@anthropic-ai/claude-code/cli.js", "--settings", f}, "", true},
		{"wrapper", []string{"./run.sh"}, []string{"./run.sh"}, "", false},
		{"codex", []string{"codex"}, []string{"codex"}, "", false},
	}
	for _, tc := range tests {
		got, prior, ok := WithSettingsFile(tc.argv, "", f)
		if diff := cmp.Diff(tc.want, got); diff != "" || prior != tc.prior || ok != tc.ok {
			t.Errorf("[%s] expected prior %q ok %v, got %q %v; argv (-want +got):\n%s", tc.name, tc.prior, tc.ok, prior, ok, diff)
		}
	}
}

// The hashes Codex 0.171 wrote into config.toml when a person chose
// "Trust all and continue" for these hooks given with -c (the second with
// a matcher and no timeout: Codex's default is 600 s).
func TestCodexHookHash(t *testing.T) {
	tests := []struct {
		event, command string
		timeout        int
		matcher        string
		want           string
	}{
		{"SessionStart", "/opt/herd/bin/herd hook --agent codex SessionStart", 5, "", "sha256:a5b44fcef180e0e3691d6b6df293da741490926791987ed7692f1ee090e0399e"},
		{"PreToolUse", "/opt/herd/bin/herd hook --agent codex PreToolUse", 600, "^Bash$", "sha256:29d29d37688d43eebdae8a2ca834ba2ecc4aaddb0aa356c7b806f02206584584"},
	}
	for _, tc := range tests {
		if got := CodexHookHash(tc.event, tc.command, tc.timeout, tc.matcher); got != tc.want {
			t.Errorf("[%s] expected %s, got %s", tc.event, tc.want, got)
		}
	}
	if CodexHookHash("Stop", "a && b", 5, "") == CodexHookHash("Stop", "a && c", 5, "") {
		t.Error("the hash ignores the command")
	}
}

func TestCodexEventLabel(t *testing.T) {
	for in, want := range map[string]string{"PreToolUse": "pre_tool_use", "Stop": "stop", "SessionStart": "session_start", "PermissionRequest": "permission_request"} {
		if got := codexEventLabel(in); got != want {
			t.Errorf("[%s] expected %s, got %s", in, want, got)
		}
	}
}

func TestCodexHookOverrides(t *testing.T) {
	cmd := func(ev string) string { return `/s/bin/herd hook --agent codex ` + ev }
	got := CodexHookOverrides([]string{"codex", "-c", "hooks.Stop=[]"}, []string{HookSessionStart, HookStop}, cmd,
		[]string{"/s/bin/herd", "hook", "--agent", "codex", "notify"})
	h := CodexHookHash(HookSessionStart, cmd(HookSessionStart), CodexHookTimeout, "")
	want := []string{
		"-c", "features.hooks=true",
		"-c", `hooks.SessionStart=[{hooks=[{type="command",command="/s/bin/herd hook --agent codex SessionStart",timeout=5}]}]`,
		"-c", `hooks.state={"/<session-flags>/config.toml:session_start:0:0"={trusted_hash="` + h + `"}}`,
		"-c", `notify=["/s/bin/herd", "hook", "--agent", "codex", "notify"]`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("overrides (-want +got):\n%s", diff)
	}
	for _, w := range got {
		if w != "-c" && !IsHerdCodexOverride(w) {
			t.Errorf("IsHerdCodexOverride(%q) = false", w)
		}
	}
	for _, w := range []string{"hooks.Stop=[]", "notify=[\"notify-send\"]", "model=\"o3\"", `hooks.state={"x"={trusted_hash="y"}}`} {
		if IsHerdCodexOverride(w) {
			t.Errorf("IsHerdCodexOverride(%q) = true, a user's override", w)
		}
	}
	// Codex holds an Interrupt hook to 3 s: declared (and hashed) so.
	intr := CodexHookOverrides(nil, []string{HookInterrupt}, cmd, nil)
	if want := `hooks.Interrupt=[{hooks=[{type="command",command="/s/bin/herd hook --agent codex Interrupt",timeout=3}]}]`; intr[3] != want {
		t.Errorf("expected %s, got %s", want, intr[3])
	}
	if h := CodexHookHash(HookInterrupt, cmd(HookInterrupt), 3, ""); !strings.Contains(intr[5], h) {
		t.Errorf("expected the trust of the 3 s hook (%s), got %s", h, intr[5])
	}
	// Quotes and backslashes in a command stay one TOML string.
	odd := CodexHookOverrides(nil, []string{HookStop}, func(string) string { return `/a "b"\c hook --agent codex Stop` }, nil)
	if want := `hooks.Stop=[{hooks=[{type="command",command="/a \"b\"\\c hook --agent codex Stop",timeout=5}]}]`; odd[3] != want {
		t.Errorf("expected %s, got %s", want, odd[3])
	}
}

func TestInsertAfterAgent(t *testing.T) {
	got, ok := InsertAfterAgent(herd.AgentCodex, []string{"codex", "resume", "x"}, "", "-c", "a=b")
	if !ok || !cmp.Equal(got, []string{"codex", "-c", "a=b", "resume", "x"}) {
		t.Errorf("got %q %v", got, ok)
	}
	if got, ok := InsertAfterAgent(herd.AgentCodex, []string{"claude"}, "", "-c"); ok || len(got) != 1 {
		t.Errorf("kind mismatch: got %q %v", got, ok)
	}
}
