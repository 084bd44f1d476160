package agents_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"herd"
	"herd/internal/agents"
	"herd/internal/mockapi"
)

// TestRealCodex runs the real Codex CLI (`codex exec --json`) against the
// mock's Responses API. It runs only when HERD_REAL_CODEX names a codex
// command; with HERD_CAPTURE_FIXTURES=1 it rewrites
// testdata/codex/<version>/exec-*.jsonl.
func TestRealCodex(t *testing.T) {
	codex := os.Getenv("HERD_REAL_CODEX")
	if codex == "" {
		t.Skip("HERD_REAL_CODEX is not set (scripts/real-agents.sh sets it)")
	}
	root := t.TempDir()
	home, proj := filepath.Join(root, "home"), filepath.Join(root, "proj")
	for _, d := range []string{filepath.Join(home, ".codex"), proj} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	ln, err := mockapi.Listen()
	if err != nil {
		t.Fatal(err)
	}
	mock := mockapi.New(nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mock.Run(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("mock api: %v", err)
		}
	})
	writeFile(t, filepath.Join(home, ".codex", "config.toml"), fmt.Sprintf(`model = "gpt-mock"
model_provider = "mock"

[model_providers.mock]
name = "Mock"
base_url = "http://%s/v1"
env_key = "MOCK_API_KEY"
wire_api = "responses"
`, ln.Addr()))
	env := []string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "MOCK_API_KEY=mock", "LANG=C.UTF-8"}
	version := codexVersion(t, codex, env)
	t.Logf("codex %s", version)

	resolved := agents.Resolve(codex, proj)
	if k := agents.Infer([]string{codex}, resolved); k != herd.AgentCodex {
		t.Errorf("Infer(%s -> %s) = %q, want codex", codex, resolved, k)
	}
	scrub := strings.NewReplacer(home, "/home/user", proj, "/home/user/proj", ln.Addr().String(), "127.0.0.1:8787")
	files := map[string][]byte{}
	runs := []struct {
		file, prompt string
		extra        []string
		want         herd.Activity
		reason       string
	}{
		{"exec-ok.jsonl", "say hello", nil, herd.ActivityIdle, ""},
		{"exec-tool.jsonl", "run the " + mockapi.TriggerTool, []string{"-s", "workspace-write"}, herd.ActivityIdle, ""},
		{"exec-rate-limit.jsonl", mockapi.TriggerRateLimit, nil, herd.ActivityBlocked, agents.ReasonRateLimited},
		{"exec-overloaded.jsonl", mockapi.TriggerOverloaded, nil, herd.ActivityBlocked, agents.ReasonAPIError},
	}
	for _, r := range runs {
		rctx, rcancel := context.WithTimeout(context.Background(), 120*time.Second)
		args := append([]string{"exec", "--json", "--skip-git-repo-check"}, r.extra...)
		cmd := exec.CommandContext(rctx, codex, append(args, r.prompt)...)
		cmd.Dir, cmd.Env = proj, env
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, _ := cmd.Output()
		rcancel()
		if len(out) == 0 {
			t.Errorf("%s: no output: %s", r.file, stderr.String())
			continue
		}
		files[r.file] = []byte(scrub.Replace(string(out)))
		var st agents.State
		reconnects := 0
		for _, l := range bytes.Split(bytes.TrimSpace(out), []byte("\n")) {
			s := agents.ParseLine(herd.AgentCodex, l, time.Now())
			if s.Event == "error" {
				reconnects++
				if s.Progress {
					t.Errorf("%s: an error line counted as progress: %s", r.file, l)
				}
			}
			st = agents.Apply(st, s)
		}
		if st.Activity != r.want || st.Reason != r.reason || st.AgentSessionID == "" {
			t.Errorf("%s: ended %q/%q id %q, want %q/%q:\n%s", r.file, st.Activity, st.Reason, st.AgentSessionID, r.want, r.reason, out)
		}
		if r.reason == agents.ReasonRateLimited && st.ResetAt.IsZero() {
			t.Errorf("%s: no reset time read from %q", r.file, st.Error)
		}
		if r.file == "exec-overloaded.jsonl" && reconnects == 0 {
			t.Errorf("%s: no reconnect line", r.file)
		}
		if r.file == "exec-tool.jsonl" {
			if _, err := os.Stat(filepath.Join(proj, mockapi.ToolMarker)); err != nil {
				t.Errorf("the tool did not run: %v", err)
			}
		}
	}
	if os.Getenv("HERD_CAPTURE_FIXTURES") == "1" {
		dir := filepath.Join("testdata", "codex", version)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, data := range files {
			if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		t.Logf("wrote %d fixtures to %s", len(files), dir)
	}
}

// codexVersion is the version `codex --version` prints ("0.169.0").
func codexVersion(t *testing.T, codex string, env []string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, codex, "--version")
	cmd.Env = env
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s --version: %v", codex, err)
	}
	f := strings.Fields(string(out))
	if len(f) == 0 {
		t.Fatalf("%s --version: empty", codex)
	}
	return f[len(f)-1]
}

// TestRealCodexTUI drives the interactive Codex in a private tmux server
// against the mock, with herd's hooks (project) and notify (user config)
// installed: trust dialog, hooks review, idle prompt, a turn, a hung
// request, Esc, an approval, quit and resume. It runs when HERD_REAL_CODEX
// names a codex command; with HERD_CAPTURE_FIXTURES=1 it rewrites the
// screens and hook payloads of testdata/codex/<version>.
func TestRealCodexTUI(t *testing.T) {
	codex := os.Getenv("HERD_REAL_CODEX")
	if codex == "" {
		t.Skip("HERD_REAL_CODEX is not set (scripts/real-agents.sh sets it)")
	}
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("tmux is not installed")
	}
	e := newRealEnv(t, herd.AgentCodex, codex)
	e.version = codexVersion(t, codex, e.env())
	t.Cleanup(func() { killCodexDaemons(t, e.home) })
	resolved := agents.Resolve(codex, e.proj)
	// on-request approvals; the mock's escalated tool call makes Codex ask.
	argv, _ := agents.LaunchArgv(herd.AgentCodex, []string{codex, "-a", "on-request", "-s", "read-only"}, resolved, nil)
	const pane = "codex"
	e.start(pane, argv)

	trust := e.waitScreen(pane, "trust dialog", func(s string) bool { return strings.Contains(s, "Trust this folder?") })
	e.expectScreen("screen-trust.txt", trust, herd.ActivityWaiting, agents.ReasonStartupPrompt)
	e.choose(pane, "Trust this folder?", "Trust and continue")
	review := e.waitScreen(pane, "hooks review", func(s string) bool { return strings.Contains(s, "Hooks need review") })
	e.expectScreen("screen-hooks-review.txt", review, herd.ActivityWaiting, agents.ReasonStartupPrompt)
	e.choose(pane, "Hooks need review", "Trust all and continue")
	idle := e.waitScreen(pane, "idle prompt", func(s string) bool { return agents.ClassifyScreen(herd.AgentCodex, s).Activity == herd.ActivityIdle })
	e.expectScreen("screen-idle.txt", idle, herd.ActivityIdle, "")

	// The agent process: the native codex under the node launcher, not
	// the app-server daemon it starts.
	tree := paneTree(t, strings.TrimSpace(e.mustTmux("display-message", "-p", "-t", "="+pane+":", "#{pane_pid}")))
	i, _ := agents.Pick([]string{"codex"}, tree)
	if i < 0 || agents.IsLauncher(tree[i]) || agents.IsHelper(tree[i]) {
		t.Errorf("Pick chose %d in %+v", i, tree)
	}
	for _, p := range tree {
		t.Logf("tree: comm %q argv %q", p.Comm, p.Argv)
	}

	e.typeLine(pane, "say hello")
	start := e.expectHook("hook-session-start.json", e.waitHook(agents.HookSessionStart, 1, 30*time.Second), herd.ActivityIdle)
	id := start.AgentSessionID
	e.expectHook("hook-user-prompt-submit.json", e.waitHook(agents.HookUserPromptSubmit, 1, 30*time.Second), herd.ActivityWorking)
	e.expectHook("hook-stop.json", e.waitHook(agents.HookStop, 1, 30*time.Second), herd.ActivityIdle)
	after := e.waitScreen(pane, "answer", func(s string) bool {
		return strings.Contains(s, mockapi.ReplyText) && agents.ClassifyScreen(herd.AgentCodex, s).Activity == herd.ActivityIdle
	})
	e.expectScreen("screen-after-turn.txt", after, herd.ActivityIdle, "")
	// Codex notifies every thread's turn: the session's own, and the side
	// thread that titles the session, under its own id.
	if n, ok := e.findHookWith("notify", `"thread-id":"`+id+`"`, 30*time.Second); ok {
		s, err := agents.ParseCodexNotify(n)
		if err != nil || s.Activity != herd.ActivityIdle || s.AgentSessionID != id {
			t.Errorf("notify %s: %+v, %v", n, s, err)
		}
		if st := agents.Apply(agents.State{AgentSessionID: id}, s); st.AgentSessionID != id {
			t.Errorf("notify changed the session id: %+v", st)
		}
		e.keep("notify-turn-complete.json", n)
	} else {
		t.Logf("no notify call for the session's thread after the turn (seen: %v)", e.hookFiles())
	}

	e.typeLine(pane, "please "+mockapi.TriggerHang)
	// The turn's first seconds, every frame: once the turn's indicator
	// is drawn, none may read as over. (The frame or two between Enter
	// and the first "Working" show the prompt echoed and no indicator:
	// too short-lived for the watchdog's confirmation of an idle screen.)
	running := false
	for i, f := range e.frames(pane, 4*time.Second) {
		sc := agents.ClassifyScreen(herd.AgentCodex, f)
		if sc.Running && !running {
			e.keep("screen-turn-start.txt", []byte(f))
			running = true
		}
		if running && sc.Activity == herd.ActivityIdle {
			t.Errorf("frame %d of the hung turn classified idle:\n%s", i, f)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for e.mock.Hung() == 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond) // polling interval
	}
	if e.mock.Hung() == 0 {
		t.Fatal("the mock never held a request")
	}
	wa := e.waitScreen(pane, "working", func(s string) bool { return agents.ClassifyScreen(herd.AgentCodex, s).Running })
	wb := e.waitScreen(pane, "working redraw", func(s string) bool { return s != wa && agents.ClassifyScreen(herd.AgentCodex, s).Running })
	a := e.expectScreen("screen-working-a.txt", wa, herd.ActivityWorking, "")
	b := e.expectScreen("screen-working-b.txt", wb, herd.ActivityWorking, "")
	if a.Hash != b.Hash {
		t.Errorf("a redraw of the hung turn changed the normalised screen:\n%s\n---\n%s", agents.Normalize(wa), agents.Normalize(wb))
	}
	e.keys(pane, "Escape")
	esc := e.waitScreen(pane, "after esc", func(s string) bool { return agents.ClassifyScreen(herd.AgentCodex, s).Activity == herd.ActivityIdle })
	e.expectScreen("screen-after-esc.txt", esc, herd.ActivityIdle, "")

	e.typeLine(pane, "run the "+mockapi.TriggerTool+" "+mockapi.TriggerEscalate)
	e.expectHook("hook-pre-tool-use.json", e.waitHook(agents.HookPreToolUse, 1, 30*time.Second), herd.ActivityWorking)
	e.expectHook("hook-permission-request.json", e.waitHook(agents.HookPermissionRequest, 1, 30*time.Second), herd.ActivityWaiting)
	perm := e.waitScreen(pane, "approval", func(s string) bool { return strings.Contains(s, "Would you like to run") })
	e.expectScreen("screen-permission.txt", perm, herd.ActivityWaiting, agents.ReasonPermission)
	e.keys(pane, "Enter")
	e.expectHook("hook-post-tool-use.json", e.waitHook(agents.HookPostToolUse, 1, 30*time.Second), herd.ActivityWorking)
	e.waitHook(agents.HookStop, 2, 30*time.Second)

	e.typeLine(pane, "/quit")
	e.waitScreen(pane, "quit", func(s string) bool { return strings.Contains(s, "codex resume "+id) })
	rargv, ok := agents.ResumeCommand(herd.AgentCodex, argv, resolved, id)
	if !ok {
		t.Fatalf("ResumeCommand(%q) refused", argv)
	}
	e.start("resumed", rargv)
	resumed := e.waitScreen("resumed", "resumed", func(s string) bool {
		return strings.Contains(s, "say hello") && agents.ClassifyScreen(herd.AgentCodex, s).Activity == herd.ActivityIdle
	})
	e.expectScreen("screen-resumed.txt", resumed, herd.ActivityIdle, "")
	pats := agents.TranscriptPatterns(herd.AgentCodex, agents.Where{Home: e.home, SessionID: id})
	if m, _ := filepath.Glob(pats[0]); len(m) != 1 {
		t.Errorf("transcript %s: found %v", pats[0], m)
	}
	e.writeFixtures()
}

// paneTree lists pid and its descendants, parents first.
func paneTree(t *testing.T, pid string) []agents.Proc {
	t.Helper()
	var out []agents.Proc
	queue := []string{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		out = append(out, readProc(t, p))
		children, _ := os.ReadFile("/proc/" + p + "/task/" + p + "/children")
		queue = append(queue, strings.Fields(string(children))...)
	}
	return out
}

// killCodexDaemons ends the app-server daemons Codex started from this
// test's home (they outlive the TUI): only processes whose executable lies
// under home, so nothing else is ever signalled.
func killCodexDaemons(t *testing.T, home string) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return
	}
	prefix := filepath.Join(home, ".codex") + string(filepath.Separator)
	for _, d := range ents {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		exe, err := os.Readlink("/proc/" + d.Name() + "/exe")
		if err != nil || !strings.HasPrefix(exe, prefix) {
			continue
		}
		if p, err := os.FindProcess(pid); err == nil {
			t.Logf("stopping codex helper %d (%s)", pid, exe)
			_ = p.Signal(syscall.SIGTERM)
		}
	}
}
