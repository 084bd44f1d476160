package agents_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"herd"
	"herd/internal/agents"
)

// TestRealLauncherTrees starts each real agent named by HERD_REAL_CLAUDE,
// HERD_REAL_CODEX and HERD_REAL_GEMINI the way a user does (the npm
// command) in a tmux pane against the mock, reads the pane's process tree
// and checks that agents.Pick chooses the agent itself, never its
// launcher: Claude Code's native binary, Codex's native TUI under its
// node shim (Node < 22.15), Gemini CLI's child relaunched with more
// memory. With HERD_CAPTURE_FIXTURES=1 the trees are written to
// testdata/trees/<agent>-<version>.json, where
// TestPickCapturedTrees reads them.
func TestRealLauncherTrees(t *testing.T) {
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("tmux is not installed")
	}
	ran := false
	for _, kind := range []string{herd.AgentClaude, herd.AgentCodex, herd.AgentGemini} {
		cmd := os.Getenv("HERD_REAL_" + strings.ToUpper(kind))
		if cmd == "" {
			continue
		}
		ran = true
		t.Run(kind, func(t *testing.T) { realTree(t, kind, cmd) })
	}
	if !ran {
		t.Skip("no HERD_REAL_CLAUDE, HERD_REAL_CODEX or HERD_REAL_GEMINI (scripts/real-agents.sh sets them)")
	}
}

// realTree runs one agent and checks (and captures) its trees.
func realTree(t *testing.T, kind, cmd string) {
	e := newRealEnv(t, kind, cmd)
	switch kind {
	case herd.AgentClaude:
		e.version = claudeVersion(t, cmd)
	case herd.AgentCodex:
		e.version = codexVersion(t, cmd, e.env())
		t.Cleanup(func() { killCodexDaemons(t, e.home) })
	case herd.AgentGemini:
		e.version = geminiVersion(t, cmd, e.env())
	}
	if install, err := filepath.EvalSymlinks(filepath.Join(filepath.Dir(cmd), "..")); err == nil {
		e.scrub = append(e.scrub, [2]string{install, "/usr/lib/node_modules"})
	}
	names := agents.Names(kind, "")
	const pane = "agent"
	e.start(pane, []string{cmd})
	panePID := strings.TrimSpace(e.mustTmux("display-message", "-p", "-t", "="+pane+":", "#{pane_pid}"))
	settled := func() []agents.Proc {
		var tree []agents.Proc
		deadline := time.Now().Add(30 * time.Second)
		for {
			tree = paneTree(t, panePID)
			if _, ok := agents.Pick(names, tree); ok {
				return tree
			}
			if time.Now().After(deadline) {
				t.Fatalf("no settled agent in %+v", tree)
			}
			time.Sleep(50 * time.Millisecond) // polling interval
		}
	}
	first := settled()
	i, _ := agents.Pick(names, first)
	logTree(t, "started", first, i)
	checkPick(t, kind, first, i)
	e.keepTree(first)

	e.writeFixtures()
}

// checkPick checks the process Pick chose in a real tree.
func checkPick(t *testing.T, kind string, tree []agents.Proc, i int) {
	t.Helper()
	if i < 0 {
		t.Fatalf("Pick found no %s in %+v", kind, tree)
	}
	p := tree[i]
	switch kind {
	case herd.AgentClaude, herd.AgentCodex:
		// The native binary, under the node shim when there is one.
		if agents.IsLauncher(p) || agents.IsHelper(p) || p.Comm == "node" {
			t.Errorf("Pick chose %+v, not the native %s", p, kind)
		}
	case herd.AgentGemini:
		// The child the launcher relaunched with more memory.
		if i == 0 || !strings.Contains(strings.Join(p.Argv, " "), "--max-old-space-size=") {
			t.Errorf("Pick chose %+v, not the relaunched child", p)
		}
	}
}

func logTree(t *testing.T, what string, tree []agents.Proc, pick int) {
	t.Helper()
	for k, p := range tree {
		mark := " "
		if k == pick {
			mark = "*"
		}
		t.Logf("%s %s pid %d ppid %d comm %q argv %q", what, mark, p.PID, p.PPID, p.Comm, p.Argv)
	}
}

// keepTree writes a tree to testdata/trees/<agent>-<version>.json, its
// machine paths scrubbed, with HERD_CAPTURE_FIXTURES=1.
func (e *realEnv) keepTree(tree []agents.Proc) {
	if os.Getenv("HERD_CAPTURE_FIXTURES") != "1" {
		return
	}
	data, err := json.MarshalIndent(tree, "", "  ")
	if err != nil {
		e.t.Fatal(err)
	}
	name := e.kind + "-" + e.version + ".json"
	e.keep(name, append(data, '\n'))
	file := filepath.Join("testdata", "trees", name)
	if err := os.WriteFile(file, e.files[name], 0o644); err != nil {
		e.t.Fatal(err)
	}
	e.t.Logf("wrote %s", file)
}
