package agents

import (
	"os"
	"path/filepath"
	"testing"

	"herd"
)

func TestInfer(t *testing.T) {
	tests := []struct {
		name     string
		argv     []string
		resolved string
		want     string
	}{
		{"plain", []string{"claude"}, "", herd.AgentClaude},
		{"path", []string{"/usr/local/bin/codex", "--model", "o3"}, "", herd.AgentCodex},
		{"exe name", []string{"/opt/x/node_modules/@anthropic-ai/claude-code/bin/claude.exe"}, "", herd.AgentClaude},
		{"link resolved", []string{"/opt/x/node_modules/.bin/cc"}, "/opt/x/node_modules/@anthropic-ai/claude-code/bin/claude.exe", herd.AgentClaude},
		{"node launcher", []string{"node", "/usr/lib/node_modules/@google/gemini-cli/dist/index.js"}, "", herd.AgentGemini},
		{"node launcher with flags", []string{"/usr/bin/node", "--max-old-space-size=8192", "/usr/local/bin/gemini", "-y"}, "", herd.AgentGemini},
		{"node require", []string{"node", "-r", "codex", "script.js"}, "", herd.AgentGeneric},
		{"codex js", []string{"node", "/usr/lib/node_modules/@openai/codex/bin/codex.js"}, "", herd.AgentCodex},
		{"wrapper", []string{"bash", "-c", "claude"}, "", herd.AgentGeneric},
		{"aider", []string{"aider"}, "", herd.AgentGeneric},
		{"empty", nil, "", herd.AgentGeneric},
		{"claude-like name", []string{"claudex"}, "", herd.AgentGeneric},
	}
	for _, tc := range tests {
		if got := Infer(tc.argv, tc.resolved); got != tc.want {
			t.Errorf("[%s] Infer(%q, %q): expected %q, got %q", tc.name, tc.argv, tc.resolved, tc.want, got)
		}
	}
}

func TestResolveFollowsLinks(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "pkg", "bin", "claude.exe")
	if err := os.MkdirAll(filepath.Dir(real), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(real, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "bin", "claude")
	if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../pkg/bin/claude.exe", link); err != nil {
		t.Fatal(err)
	}
	realResolved, _ := filepath.EvalSymlinks(real)
	if got := Resolve(link, ""); got != realResolved {
		t.Errorf("Resolve(%s): expected %s, got %q", link, realResolved, got)
	}
	if got := Resolve("bin/claude", dir); got != realResolved {
		t.Errorf("Resolve(bin/claude in %s): expected %s, got %q", dir, realResolved, got)
	}
	if got := Resolve(filepath.Join(dir, "missing"), ""); got != "" {
		t.Errorf("Resolve(missing): expected \"\", got %q", got)
	}
	if k := Infer([]string{link}, Resolve(link, "")); k != herd.AgentClaude {
		t.Errorf("Infer through the link: got %q", k)
	}
}

func TestMatches(t *testing.T) {
	tests := []struct {
		name  string
		names []string
		p     Proc
		want  bool
	}{
		{"comm", []string{"claude"}, Proc{Comm: "claude", Argv: []string{"x"}}, true},
		{"argv0 exe", []string{"claude"}, Proc{Comm: "MainThread", Argv: []string{"/p/bin/claude.exe"}}, true},
		{"exe only", []string{"claude"}, Proc{Comm: "x", Argv: []string{"x"}, Exe: "/p/claude-code/bin/claude.exe"}, true},
		{"exe deleted", []string{"codex"}, Proc{Comm: "x", Argv: []string{"x"}, Exe: "/v/codex (deleted)"}, true},
		{"node script", []string{"gemini"}, Proc{Comm: "node", Argv: []string{"node", "/usr/local/bin/gemini"}, Exe: "/usr/bin/node"}, true},
		{"node package", []string{"gemini"}, Proc{Comm: "node", Argv: []string{"node", "--no-warnings", "/l/@google/gemini-cli/dist/index.js"}}, true},
		{"shell", []string{"claude"}, Proc{Comm: "bash", Argv: []string{"bash", "-c", "claude"}, Exe: "/bin/bash"}, false},
		{"agent_process long", []string{"my-agent-wrapper-process"}, Proc{Comm: "my-agent-wrappe", Argv: []string{"python3"}}, true},
		{"no names", nil, Proc{Comm: "claude"}, false},
		{"other", []string{"claude"}, Proc{Comm: "claudex", Argv: []string{"claudex"}}, false},
	}
	for _, tc := range tests {
		if got := Matches(tc.names, tc.p); got != tc.want {
			t.Errorf("[%s] Matches(%q, %+v): expected %v, got %v", tc.name, tc.names, tc.p, tc.want, got)
		}
	}
}

func TestNames(t *testing.T) {
	if got := Names(herd.AgentClaude, ""); len(got) != 1 || got[0] != "claude" {
		t.Errorf("Names(claude): got %q", got)
	}
	if got := Names(herd.AgentGeneric, ""); got != nil {
		t.Errorf("Names(generic): got %q", got)
	}
	if got := Names(herd.AgentCodex, "wrapped"); len(got) != 1 || got[0] != "wrapped" {
		t.Errorf("Names(codex, wrapped): got %q", got)
	}
}

// TestPickCodexTree is the tree the real Codex 0.169 (npm) runs in a pane:
// node launcher, native TUI, and the managed app-server daemon that
// outlives the session.
func TestPickCodexTree(t *testing.T) {
	node := Proc{Comm: "node", Argv: []string{"node", "/x/node_modules/.bin/codex", "-a", "on-request"}, Exe: "/usr/bin/node"}
	tui := Proc{Comm: "codex", Argv: []string{"/x/node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex", "-a", "on-request"}}
	daemon := Proc{Comm: "codex", Argv: []string{"/h/.codex/packages/app-server-daemon/releases/0.169.0/bin/codex", "app-server", "--listen", "unix://", "--managed-daemon"}}
	loop := Proc{Comm: "codex", Argv: []string{"/h/.codex/packages/app-server-daemon/releases/0.169.0/bin/codex", "app-server", "daemon", "pid-update-loop"}}
	tests := []struct {
		name string
		tree []Proc
		want int
	}{
		{"full tree", []Proc{node, tui, daemon, loop}, 1},
		{"daemon first", []Proc{daemon, tui}, 1},
		{"launcher only", []Proc{node}, 0},
		{"helpers only", []Proc{daemon, loop}, -1},
		{"shell wrapper", []Proc{{Comm: "bash", Argv: []string{"bash", "-c", "codex"}}, tui}, 1},
		{"nothing", nil, -1},
	}
	for _, tc := range tests {
		if got := Pick([]string{"codex"}, tc.tree); got != tc.want {
			t.Errorf("[%s] expected %d, got %d", tc.name, tc.want, got)
		}
	}
	if !IsHelper(daemon) || IsHelper(tui) || !IsLauncher(node) || IsLauncher(tui) {
		t.Error("IsHelper/IsLauncher misclassify the codex tree")
	}
}
