package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"herd"
	"herd/internal/agents"
	"herd/internal/mockapi"
)

// The TestRealZeroSetup* tests run a real agent under the herd daemon in
// a git repository with no herd setup at all (no `herd hooks install`):
// herd gives the launch its hooks (Claude --settings, Codex -c overrides
// with their trust, Gemini's user settings), so the agent's activity
// comes from hooks ([hook] events) from its first turn, and `git status`
// stays clean.

// zeroSetup is one such run: the mock API, a daemon, a git repository and
// a home for the agent.
type zeroSetup struct {
	e          *env
	mock       *mockapi.Server
	addr       string
	root       string
	home, proj string
}

func newZeroSetup(t *testing.T) *zeroSetup {
	t.Helper()
	hasTmux(t)
	ln, err := mockapi.Listen()
	if err != nil {
		t.Fatal(err)
	}
	mock := mockapi.New(nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mock.Run(ctx, ln) }()
	t.Cleanup(func() {
		mock.Release()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("mock api: %v", err)
		}
	})
	root := t.TempDir()
	z := &zeroSetup{mock: mock, addr: ln.Addr().String(), root: root,
		home: filepath.Join(root, "home"), proj: filepath.Join(root, "proj")}
	for _, d := range []string{z.home, z.proj} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	z.git(t, "init", "-q")
	if err := os.WriteFile(filepath.Join(z.proj, "README"), []byte("a project\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	z.e = newEnv(t, fastRestart)
	z.e.start()
	t.Cleanup(func() {
		if t.Failed() {
			for _, v := range z.e.sessions() {
				t.Logf("%s: %s/%s; screen:\n%s\nevents:\n%s", v.Name, v.State, v.Activity, z.e.capture(v.Name), z.e.try("events", "--session", v.Name))
			}
		}
		// The agents (and Codex's app-server) outlive the daemon by
		// design: end them, and wait, so nothing writes into root once it
		// is removed.
		_ = exec.Command("tmux", "-L", z.e.tmuxSock, "kill-server").Run()
		for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); {
			pids := z.e.agentPIDs()
			if len(pids) == 0 {
				return
			}
			for _, pid := range pids {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
			time.Sleep(100 * time.Millisecond) // polling interval
		}
	})
	return z
}

func (z *zeroSetup) git(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", z.proj, "-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// commit commits everything in the repository: the clean state `git
// status` is checked against at the end.
func (z *zeroSetup) commit(t *testing.T) {
	t.Helper()
	z.git(t, "add", "-A")
	z.git(t, "commit", "-q", "-m", "start")
}

// run launches role with `herd run` in the repository with env.
func (z *zeroSetup) run(t *testing.T, role string, env []string, argv ...string) {
	t.Helper()
	z.runIn(t, z.proj, role, env, argv...)
}

// runIn launches role with `herd run` in dir with env, and waits for its
// spawned event.
func (z *zeroSetup) runIn(t *testing.T, dir, role string, env []string, argv ...string) {
	t.Helper()
	args := []string{"run", role, "--workdir", dir}
	for _, kv := range env {
		args = append(args, "--env", kv)
	}
	z.e.must(append(append(args, "--"), argv...)...)
	ev := z.e.eventsOf(role+"-0", herd.EventSpawned, 1)[0]
	if ev.Data["hooks"] != "herd" {
		t.Fatalf("[%s] expected herd's hooks at launch (data hooks = herd), got %v", role, ev.Data)
	}
	t.Logf("[%s] launched: %v", role, ev.Data["argv"])
}

// submit injects text into session and checks that it reached the API;
// an inject that stayed typed (an agent that took its Enter as a newline,
// or typed into a redraw: inject is another change's business) gets a
// second Enter, said in the log.
func (z *zeroSetup) submit(t *testing.T, session, text string) {
	t.Helper()
	before := len(z.mock.Records())
	sent := func() bool {
		// A new request carrying the text (its trigger, for the
		// agents whose requests the mock does not read the users of).
		for _, r := range z.mock.Records()[before:] {
			if strings.Contains(strings.Join(r.Users, "\n"), text) || (r.Trigger != "" && strings.Contains(text, r.Trigger)) || len(r.Users) == 0 {
				return true
			}
		}
		return false
	}
	z.e.must("inject", session, text)
	deadline := time.Now().Add(5 * time.Second)
	for !sent() && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond) // polling interval
	}
	if !sent() {
		t.Logf("[%s] the inject of %q stayed typed; Enter", session, text)
		tmuxKeys(t, z.e, session, "Enter")
	}
}

// hookActivity waits for an activity event of session from a hook that
// reaches to, and returns its message.
func (z *zeroSetup) hookActivity(t *testing.T, session string, to herd.Activity, within time.Duration) string {
	t.Helper()
	var msg string
	z.e.waitFor(fmt.Sprintf("%s %s from a hook", session, to), within, func() bool {
		for _, ev := range z.e.events("--session", session, "--kind", herd.EventActivity) {
			if ev.Reason == "hook" && ev.Data["to"] == string(to) {
				msg = ev.Message
				return true
			}
		}
		return false
	})
	t.Logf("[%s] %s [hook]", session, msg)
	return msg
}

// clean checks that the repository has no change: herd wrote nothing
// into it. The file the mock's tool call makes is the agent's work, and
// is removed first.
func (z *zeroSetup) clean(t *testing.T) {
	t.Helper()
	if err := os.Remove(filepath.Join(z.proj, mockapi.ToolMarker)); err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	if st := z.git(t, "status", "--porcelain", "--ignored"); strings.TrimSpace(st) != "" {
		t.Errorf("git status is not clean:\n%s", st)
	}
}

// TestRealZeroSetupClaude: `herd run w -- claude` with no setup; the
// project's own hook (a Stop hook in .claude/settings.json) still runs
// next to herd's.
func TestRealZeroSetupClaude(t *testing.T) {
	claude := os.Getenv("HERD_REAL_CLAUDE")
	if claude == "" {
		t.Skip("HERD_REAL_CLAUDE is not set (scripts/real-agents.sh sets it)")
	}
	version, _ := exec.Command(claude, "--version").Output()
	t.Logf("claude: %s", strings.TrimSpace(string(version)))
	z := newZeroSetup(t)
	userHook := filepath.Join(z.root, "user-stop-hook-ran")
	if err := os.MkdirAll(filepath.Join(z.proj, ".claude"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(z.proj, ".claude", "settings.json"), fmt.Appendf(nil,
		`{"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "touch %s"}]}]}}`, userHook), 0o644); err != nil {
		t.Fatal(err)
	}
	z.commit(t)
	if err := os.WriteFile(filepath.Join(z.home, ".claude.json"), []byte(`{"hasCompletedOnboarding": true, "theme": "dark"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	const name = "w-0"
	claudeEnv := []string{
		"HOME=" + z.home, "ANTHROPIC_BASE_URL=http://" + z.addr, "ANTHROPIC_API_KEY=sk-ant-mock-0123456789abcdefghij",
		"DISABLE_AUTOUPDATER=1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_TELEMETRY=1", "TERM=xterm-256color", "LANG=C.UTF-8",
	}
	z.run(t, "w", claudeEnv, claude, "--permission-mode", "default")
	answerStartup(t, z.e, name)
	z.e.waitFor(name+" idle at its prompt", 60*time.Second, func() bool {
		v, _ := z.e.session(name)
		return v.State == herd.StateRunning && v.Activity == herd.ActivityIdle
	})
	z.e.must("inject", name, "say hello")
	z.hookActivity(t, name, herd.ActivityWorking, 30*time.Second)
	z.e.waitFor("the project's own Stop hook", 30*time.Second, func() bool { _, err := os.Stat(userHook); return err == nil })
	z.e.must("inject", name, "run the "+mockapi.TriggerTool)
	z.hookActivity(t, name, herd.ActivityWaiting, 30*time.Second)
	// The hook comes before the dialog takes keys: an Enter sent while it
	// is drawing is lost, so it is sent once the dialog shows, and again
	// while it still does a few seconds on. "Yes" is the first option.
	z.e.waitFor(name+"'s permission dialog on screen", 30*time.Second, func() bool {
		return strings.Contains(tmuxCapture(t, z.e, name), "Do you want to proceed?")
	})
	sent := time.Time{}
	z.e.waitFor(name+" idle after the tool", 30*time.Second, func() bool {
		if v, _ := z.e.session(name); v.Activity == herd.ActivityIdle {
			return true
		}
		if time.Since(sent) > 3*time.Second && strings.Contains(tmuxCapture(t, z.e, name), "Do you want to proceed?") {
			tmuxKeys(t, z.e, name, "Enter")
			sent = time.Now()
		}
		return false
	})
	if !hasEvent(z.e, name, herd.EventActivity, func(ev herd.Event) bool {
		return ev.Reason == "hook" && ev.Data["event"] == agents.HookStop && ev.Data["to"] == string(herd.ActivityIdle)
	}) {
		t.Errorf("[%s] no idle from its Stop hook", name)
	}
	z.clean(t)

	// The project's own permissions apply too: with the tool's command
	// allowed there, the same turn runs it without asking.
	allowed := filepath.Join(z.root, "allowed")
	if err := os.MkdirAll(filepath.Join(allowed, ".claude"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(allowed, ".claude", "settings.json"), []byte(`{"permissions": {"allow": ["Bash(touch:*)"]}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	z.runIn(t, allowed, "a", claudeEnv, claude, "--permission-mode", "default")
	answerStartup(t, z.e, "a-0")
	z.e.waitFor("a-0 idle at its prompt", 60*time.Second, func() bool {
		v, _ := z.e.session("a-0")
		return v.State == herd.StateRunning && v.Activity == herd.ActivityIdle
	})
	z.e.must("inject", "a-0", "run the "+mockapi.TriggerTool)
	z.e.waitFor("the allowed tool run", 30*time.Second, func() bool {
		_, err := os.Stat(filepath.Join(allowed, mockapi.ToolMarker))
		return err == nil
	})
	z.e.waitFor("a-0 idle after the tool (Stop hook)", 30*time.Second, func() bool {
		return hasEvent(z.e, "a-0", herd.EventActivity, func(ev herd.Event) bool { return ev.Reason == "hook" && ev.Data["event"] == agents.HookStop })
	})
	if hasEvent(z.e, "a-0", herd.EventActivity, func(ev herd.Event) bool { return ev.Data["to"] == string(herd.ActivityWaiting) && ev.Reason == "hook" }) {
		t.Errorf("[a-0] asked for a permission its project allows")
	}
}

// codexConfig is the user's Codex config: the mock as its provider.
func (z *zeroSetup) codexConfig(t *testing.T) string {
	t.Helper()
	path := filepath.Join(z.home, ".codex", "config.toml")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, fmt.Appendf(nil, `model = "gpt-mock"
model_provider = "mock"

[model_providers.mock]
name = "Mock"
base_url = "http://%s/v1"
env_key = "MOCK_API_KEY"
wire_api = "responses"
`, z.addr), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestRealZeroSetupCodex: `herd run` of a real Codex with no setup never
// stops at "Hooks need review" (herd passes its hooks' trust with them),
// its hooks and notify report, and a second launch starts straight to its
// prompt. Only the folder's trust is a person's answer, once.
func TestRealZeroSetupCodex(t *testing.T) {
	codex := os.Getenv("HERD_REAL_CODEX")
	if codex == "" {
		t.Skip("HERD_REAL_CODEX is not set (scripts/real-agents.sh sets it)")
	}
	version, _ := exec.Command(codex, "--version").Output()
	t.Logf("codex: %s", strings.TrimSpace(string(version)))
	z := newZeroSetup(t)
	cfg := z.codexConfig(t)
	z.commit(t)
	env := []string{"HOME=" + z.home, "MOCK_API_KEY=mock", "TERM=xterm-256color", "LANG=C.UTF-8"}
	argv := []string{codex, "-a", "on-request", "-s", "read-only"}
	z.run(t, "cx", env, argv...)
	const name = "cx-0"
	sawReview := false
	z.e.waitFor(name+" at its folder trust dialog or prompt", 60*time.Second, func() bool {
		s := z.e.capture(name)
		sawReview = sawReview || strings.Contains(s, "Hooks need review")
		v, _ := z.e.session(name)
		return strings.Contains(s, "Trust this folder?") || v.Activity == herd.ActivityIdle
	})
	if strings.Contains(z.e.capture(name), "Trust this folder?") {
		z.e.chooseOption(name, "Trust this folder?", "Trust and continue")
	}
	z.e.waitFor(name+" idle at its prompt", 60*time.Second, func() bool {
		s := z.e.capture(name)
		sawReview = sawReview || strings.Contains(s, "Hooks need review")
		v, _ := z.e.session(name)
		return v.State == herd.StateRunning && v.Activity == herd.ActivityIdle && !strings.Contains(s, "Trust this folder?")
	})
	if sawReview {
		t.Fatalf("[%s] stopped at Codex's hooks review:\n%s", name, z.e.capture(name))
	}
	z.submit(t, name, "say hello")
	z.hookActivity(t, name, herd.ActivityWorking, 30*time.Second)
	z.e.waitFor(name+" idle after its turn", 30*time.Second, func() bool {
		for _, ev := range z.e.events("--session", name, "--kind", herd.EventActivity) {
			if ev.Reason == "hook" && ev.Data["to"] == string(herd.ActivityIdle) {
				return true
			}
		}
		return false
	})
	// Esc in a hung turn: Codex sends Interrupt (no Stop) -> idle.
	z.submit(t, name, "please "+mockapi.TriggerHang+" now")
	waitHung(t, z.e, z.mock, 1)
	tmuxKeys(t, z.e, name, "Escape")
	z.e.waitFor(name+" idle from its Interrupt hook", 30*time.Second, func() bool {
		return hasEvent(z.e, name, herd.EventActivity, func(ev herd.Event) bool {
			return ev.Reason == "hook" && ev.Data["event"] == agents.HookInterrupt && ev.Data["to"] == string(herd.ActivityIdle)
		})
	})
	z.submit(t, name, "run the "+mockapi.TriggerTool+" "+mockapi.TriggerEscalate)
	z.hookActivity(t, name, herd.ActivityWaiting, 30*time.Second)

	// A second launch, same home and project: straight to its prompt.
	z.run(t, "cx2", env, argv...)
	const second = "cx2-0"
	// A second Codex on the same home has been seen to stay at its banner
	// (no prompt, no dialog): should it, the failure says what both
	// Codex processes wait on and what Codex itself last logged.
	t.Cleanup(func() {
		if t.Failed() {
			codexHome := filepath.Join(z.home, ".codex")
			for _, s := range []string{name, second} {
				t.Logf("[%s] its processes:\n%s", s, procDiag(s, codexHome))
			}
			t.Logf("Codex's log (%s, last rows):\n%s", codexHome, codexLogTail(codexHome, 60))
		}
	})
	z.e.waitFor(second+" idle at its prompt", 60*time.Second, func() bool {
		s := z.e.capture(second)
		if strings.Contains(s, "Hooks need review") || strings.Contains(s, "Trust this folder?") {
			t.Fatalf("[%s] the second launch stopped at a dialog:\n%s", second, s)
		}
		v, _ := z.e.session(second)
		return v.State == herd.StateRunning && v.Activity == herd.ActivityIdle
	})
	z.submit(t, second, "say hello")
	z.hookActivity(t, second, herd.ActivityWorking, 30*time.Second)

	// Nothing of herd's in the user's config: the trust went with the
	// launch, not into config.toml.
	data, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(data), "hooks.state") || strings.Contains(string(data), " hook ") {
		t.Errorf("herd's hooks or their trust were written into %s:\n%s", cfg, data)
	}
	z.clean(t)
}

// TestRealZeroSetupGemini: `herd run` of a real Gemini CLI with no setup
// reports from hooks merged into the user's Gemini settings (Gemini reads
// a system settings file only when root owns it and its directories).
func TestRealZeroSetupGemini(t *testing.T) {
	gemini := os.Getenv("HERD_REAL_GEMINI")
	if gemini == "" {
		t.Skip("HERD_REAL_GEMINI is not set (scripts/real-agents.sh sets it)")
	}
	version, _ := exec.Command(gemini, "--version").Output()
	t.Logf("gemini: %s", strings.TrimSpace(string(version)))
	z := newZeroSetup(t)
	if err := os.MkdirAll(filepath.Join(z.home, ".gemini"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(z.home, ".gemini", "settings.json"), []byte(`{"security": {"auth": {"selectedType": "gemini-api-key"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	z.commit(t)
	const name = "gm-0"
	// The folder trusted up front: Gemini runs no hooks in an untrusted
	// folder, and its trust dialog is not what this is about.
	z.run(t, "gm", []string{"HOME=" + z.home, "GEMINI_API_KEY=mock", "GOOGLE_GEMINI_BASE_URL=http://" + z.addr,
		"GEMINI_CLI_TRUST_WORKSPACE=true", "TERM=xterm-256color", "LANG=C.UTF-8"}, gemini, "-m", "gemini-2.5-flash")
	z.e.waitFor(name+" idle at its prompt", 90*time.Second, func() bool {
		v, _ := z.e.session(name)
		return v.State == herd.StateRunning && v.Activity == herd.ActivityIdle
	})
	z.submit(t, name, "say hello")
	z.hookActivity(t, name, herd.ActivityWorking, 30*time.Second)
	z.e.waitFor(name+" idle after its turn (AfterAgent)", 30*time.Second, func() bool {
		return hasEvent(z.e, name, herd.EventActivity, func(ev herd.Event) bool { return ev.Reason == "hook" && ev.Data["event"] == agents.GeminiAfterAgent })
	})
	z.submit(t, name, "run the "+mockapi.TriggerTool)
	z.hookActivity(t, name, herd.ActivityWaiting, 30*time.Second)
	// herd's entries went into the user's settings, next to theirs.
	data, err := os.ReadFile(filepath.Join(z.home, ".gemini", "settings.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `"selectedType": "gemini-api-key"`) || !strings.Contains(string(data), " hook --agent gemini BeforeAgent") {
		t.Errorf("the user's Gemini settings:\n%s", data)
	}
	z.clean(t)
}
