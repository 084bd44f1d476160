package conversation

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"herd"
)

func TestConversation(t *testing.T) {
	const (
		fresh = "11111111-2222-4333-8444-555555555555"
		prior = "aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee"
		own   = "99999999-8888-4777-8666-555555555555"
	)
	newID := func() string { return fresh }
	none := func(string) bool { return false }
	begun := func(id string) bool { return id == prior } // prior's transcript exists
	cases := []struct {
		name    string
		kind    string
		argv    []string
		priorID string
		cont    bool
		inUse   func(string) bool
		want    string
		wantID  string
		wantHow string
	}{
		{"new claude gets an id", herd.AgentClaude, []string{"claude", "--model", "x"}, "", false, none,
			"claude --session-id " + fresh + " --model x", fresh, New},
		{"crash relaunch continues, flags kept", herd.AgentClaude, []string{"claude", "--model", "x"}, prior, true, begun,
			"claude --resume " + prior + " --model x", prior, Resumed},
		{"crash before the conversation began: same id again", herd.AgentClaude, []string{"claude", "--model", "x"}, prior, true, none,
			"claude --session-id " + prior + " --model x", prior, New},
		{"resume_on_crash false starts anew", herd.AgentClaude, []string{"claude", "--model", "x"}, prior, false, none,
			"claude --session-id " + fresh + " --model x", fresh, New},
		{"crash before any id known starts anew", herd.AgentClaude, []string{"claude"}, "", true, none,
			"claude --session-id " + fresh, fresh, New},
		{"role's own id, first launch", herd.AgentClaude, []string{"claude", "--session-id", own}, "", false, none,
			"claude --session-id " + own, own, New},
		{"role's own id, prior incarnation died before its first prompt", herd.AgentClaude, []string{"claude", "--session-id", own, "-p"}, own, false, none,
			"claude --session-id " + own + " -p", own, New},
		{"role's own id, no way to look, used by the prior incarnation", herd.AgentClaude, []string{"claude", "--session-id", own, "-p"}, own, false, nil,
			"claude --resume " + own + " -p", own, InUse},
		{"role's own id, crash relaunch of a begun conversation", herd.AgentClaude, []string{"claude", "--session-id", own}, own, true,
			func(id string) bool { return id == own }, "claude --resume " + own, own, Resumed},
		{"role's own id with a transcript on disk", herd.AgentClaude, []string{"claude", "--session-id", own}, "", false,
			func(id string) bool { return id == own }, "claude --resume " + own, own, InUse},
		{"role resumes itself: left alone", herd.AgentClaude, []string{"claude", "--continue"}, "", false, none,
			"claude --continue", "", New},
		{"role --resume: left alone", herd.AgentClaude, []string{"claude", "--resume", own}, "", false, none,
			"claude --resume " + own, "", New},
		{"codex crash relaunch resumes with flags", herd.AgentCodex, []string{"codex", "-m", "o3", "fix it"}, prior, true, none,
			"codex resume " + prior + " -m o3", prior, Resumed},
		{"codex fresh gets no id", herd.AgentCodex, []string{"codex"}, "", false, none, "codex", "", New},
		{"generic is left alone", herd.AgentGeneric, []string{"sh", "-c", "x"}, prior, true, none, "sh -c x", "", New},
		{"wrapper is left alone", herd.AgentClaude, []string{"bash", "run-claude.sh"}, prior, true, none, "bash run-claude.sh", "", New},
	}
	for _, c := range cases {
		out, id, how := Pick(c.kind, c.argv, "", c.priorID, c.cont, c.inUse, newID)
		if strings.Join(out, " ") != c.want || id != c.wantID || how != c.wantHow {
			t.Errorf("[%s] expected (%q, %q, %q), got (%q, %q, %q)", c.name, c.want, c.wantID, c.wantHow, strings.Join(out, " "), id, how)
		}
	}
}

func TestClaudeTranscriptExists(t *testing.T) {
	cfg := t.TempDir()
	const id = "99999999-8888-4777-8666-555555555555"
	dir := filepath.Join(cfg, "projects", "-srv-app")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, id+".jsonl"), []byte("{}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	exists := ClaudeTranscriptExists("/srv/app", map[string]string{"CLAUDE_CONFIG_DIR": cfg})
	if !exists(id) {
		t.Error("expected the transcript found under CLAUDE_CONFIG_DIR")
	}
	if exists("11111111-2222-4333-8444-555555555555") {
		t.Error("expected another id not found")
	}
	if ClaudeTranscriptExists("/srv/other", map[string]string{"CLAUDE_CONFIG_DIR": cfg})(id) {
		t.Error("expected the id not found for another workdir")
	}
}

func TestResumeArgv(t *testing.T) {
	cfg := t.TempDir()
	const begun, never = "99999999-8888-4777-8666-555555555555", "11111111-2222-4333-8444-555555555555"
	dir := filepath.Join(cfg, "projects", "-srv-app")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, begun+".jsonl"), []byte("{}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"CLAUDE_CONFIG_DIR": cfg}
	cases := []struct {
		name string
		snap herd.Snapshot
		want string
	}{
		{"begun conversation resumes", herd.Snapshot{Agent: herd.AgentClaude, AgentSessionID: begun, Workdir: "/srv/app",
			Argv: []string{"claude", "--session-id", begun, "--model", "x"}}, "claude --resume " + begun + " --model x"},
		{"never begun: same id again", herd.Snapshot{Agent: herd.AgentClaude, AgentSessionID: never, Workdir: "/srv/app",
			Argv: []string{"claude", "--session-id", never, "--model", "x"}}, "claude --session-id " + never + " --model x"},
		{"codex resumes", herd.Snapshot{Agent: herd.AgentCodex, AgentSessionID: never, Workdir: "/srv/app",
			Argv: []string{"codex", "-m", "o3"}}, "codex resume " + never + " -m o3"},
	}
	for _, c := range cases {
		if got := strings.Join(ResumeArgv(c.snap, env), " "); got != c.want {
			t.Errorf("[%s] expected %q, got %q", c.name, c.want, got)
		}
	}
}
