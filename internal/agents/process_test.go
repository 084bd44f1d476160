package agents

import (
	"encoding/json"
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

// TestPickLauncherShapes: the agent is the real process for every
// launcher shape, never the launcher while a child is there to be it.
func TestPickLauncherShapes(t *testing.T) {
	// Codex 0.169 (npm) in a pane: node launcher, native TUI, and the
	// managed app-server daemon that outlives the session.
	node := Proc{PID: 10, PPID: 1, Comm: "node", Argv: []string{"node", "/x/node_modules/.bin/codex", "-a", "on-request"}, Exe: "/usr/bin/node"}
	tui := Proc{PID: 11, PPID: 10, Comm: "codex", Argv: []string{"/x/node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex", "-a", "on-request"}}
	daemon := Proc{PID: 12, PPID: 1, Comm: "codex", Argv: []string{"/h/.codex/packages/app-server-daemon/releases/0.169.0/bin/codex", "app-server", "--listen", "unix://", "--managed-daemon"}}
	loop := Proc{PID: 13, PPID: 12, Comm: "codex", Argv: []string{"/h/.codex/packages/app-server-daemon/releases/0.169.0/bin/codex", "app-server", "daemon", "pid-update-loop"}}
	// Gemini CLI: the launcher (node …/gemini.js) and its child, relaunched
	// with more memory; a second child after the launcher relaunched it.
	gl := Proc{PID: 20, PPID: 1, Comm: "node", Argv: []string{"node", "/x/node_modules/.bin/gemini"}}
	gc := Proc{PID: 21, PPID: 20, Comm: "node", Argv: []string{"/usr/bin/node", "--max-old-space-size=4096", "/x/node_modules/@google/gemini-cli/bundle/gemini.js"}}
	gz := Proc{PID: 21, PPID: 20, Comm: "node"} // gc reaped not yet: a zombie has no argv
	gc2 := Proc{PID: 25, PPID: 20, Comm: "node", Argv: gc.Argv}
	gtool := Proc{PID: 30, PPID: 21, Comm: "bash", Argv: []string{"bash", "-c", "ls"}}
	// A tool of the agent that runs another copy of it is not the agent.
	nested := Proc{PID: 31, PPID: 21, Comm: "node", Argv: []string{"node", "/x/node_modules/.bin/gemini", "-p", "hi"}}
	claude := Proc{PID: 40, PPID: 1, Comm: "claude", Argv: []string{"/x/node_modules/.bin/claude"}, Exe: "/x/node_modules/@anthropic-ai/claude-code/bin/claude.exe"}
	subClaude := Proc{PID: 41, PPID: 40, Comm: "claude", Argv: []string{"claude", "-p", "review"}}
	sh := Proc{PID: 50, PPID: 1, Comm: "bash", Argv: []string{"bash", "/w/run-agent.sh"}}
	shCodex := node
	shCodex.PPID = 50
	tests := []struct {
		name    string
		names   []string
		tree    []Proc
		want    int
		settled bool
	}{
		{"codex full tree", []string{"codex"}, []Proc{node, tui, daemon, loop}, 1, true},
		{"codex daemon listed first", []string{"codex"}, []Proc{daemon, node, tui}, 2, true},
		{"codex launcher before its child", []string{"codex"}, []Proc{node}, 0, false},
		{"codex helpers only", []string{"codex"}, []Proc{daemon, loop}, -1, true},
		{"codex under a shell wrapper", []string{"codex"}, []Proc{sh, shCodex, {PID: 11, PPID: 10, Comm: "codex", Argv: tui.Argv}}, 2, true},
		{"gemini launcher before its child", []string{"gemini"}, []Proc{gl}, 0, false},
		{"gemini child", []string{"gemini"}, []Proc{gl, gc, gtool}, 1, true},
		{"gemini child, its tool runs gemini", []string{"gemini"}, []Proc{gl, gc, gtool, nested}, 1, true},
		{"gemini relaunching: old child a zombie", []string{"gemini"}, []Proc{gl, gz}, 0, false},
		{"gemini relaunched", []string{"gemini"}, []Proc{gl, gz, gc2}, 2, true},
		{"claude native", []string{"claude"}, []Proc{claude}, 0, true},
		{"claude, its tool runs claude", []string{"claude"}, []Proc{claude, subClaude}, 0, true},
		{"shell wrapper before the agent", []string{"claude"}, []Proc{sh}, -1, true},
		{"nothing", []string{"codex"}, nil, -1, true},
	}
	for _, tc := range tests {
		got, settled := Pick(tc.names, tc.tree)
		if got != tc.want || settled != tc.settled {
			t.Errorf("[%s] expected %d (settled %v), got %d (settled %v)", tc.name, tc.want, tc.settled, got, settled)
		}
	}
	if !IsHelper(daemon) || IsHelper(tui) || !IsLauncher(node) || IsLauncher(tui) {
		t.Error("IsHelper/IsLauncher misclassify the codex tree")
	}
}

// TestPickCapturedTrees reads the process trees captured from the real
// installs (TestRealLauncherTrees with HERD_CAPTURE_FIXTURES=1) and checks
// the agent Pick chooses in each, also before the launcher's child
// started (the launcher alone: not settled).
func TestPickCapturedTrees(t *testing.T) {
	tests := []struct {
		file    string
		kind    string
		wantPID int
		why     string
	}{
		{"trees/claude-2.1.332.json", herd.AgentClaude, 26315, "the native binary node_modules/.bin/claude links to"},
		{"trees/codex-0.171.0.json", herd.AgentCodex, 26865, "the native TUI the node shim spawns (Node < 22.15)"},
		{"trees/gemini-0.61.0.json", herd.AgentGemini, 28790, "the child the launcher relaunched with more memory"},
	}
	for _, tc := range tests {
		data, err := os.ReadFile(filepath.Join("testdata", tc.file))
		if err != nil {
			t.Fatal(err)
		}
		var tree []Proc
		if err := json.Unmarshal(data, &tree); err != nil {
			t.Fatalf("%s: %v", tc.file, err)
		}
		names := Names(tc.kind, "")
		i, settled := Pick(names, tree)
		if i < 0 || tree[i].PID != tc.wantPID || !settled {
			t.Errorf("[%s] expected pid %d (%s), got index %d (settled %v)", tc.file, tc.wantPID, tc.why, i, settled)
		}
		// Before the launcher started its child: the launcher, not settled.
		if IsLauncher(tree[0]) {
			if j, settled := Pick(names, tree[:1]); j != 0 || settled {
				t.Errorf("[%s, launcher alone] expected 0, not settled; got %d (settled %v)", tc.file, j, settled)
			}
		}
	}
}
