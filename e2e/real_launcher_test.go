package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"herd"
	"herd/internal/api"
	"herd/internal/mockapi"
)

// TestRealLauncherAgents runs the real Codex (HERD_REAL_CODEX) and Gemini
// CLI (HERD_REAL_GEMINI), installed with npm (node shims), under the herd
// daemon against the loopback mock API, and checks that the agent herd
// records is the real process, not its launcher:
//
//   - Codex: the native TUI under its node shim (Node < 22.15); Gemini CLI:
//     the child its launcher relaunched with more memory;
//   - SIGSEGV and SIGKILL of the real agent are crashed with that signal
//     (not the launcher's "exited with code 1"), and the relaunch resumes
//     the conversation (the mock sees the earlier messages);
//   - herd signal NAME TERM reaches the agent and ends it (Gemini CLI's
//     launcher ignores TERM).
func TestRealLauncherAgents(t *testing.T) {
	hasTmux(t)
	ran := false
	for _, kind := range []string{herd.AgentCodex, herd.AgentGemini} {
		cmd := os.Getenv("HERD_REAL_" + strings.ToUpper(kind))
		if cmd == "" {
			continue
		}
		ran = true
		t.Run(kind, func(t *testing.T) { realLauncherAgent(t, kind, cmd) })
	}
	if !ran {
		t.Skip("neither HERD_REAL_CODEX nor HERD_REAL_GEMINI is set (scripts/real-agents.sh sets them)")
	}
}

// realLauncherAgent is TestRealLauncherAgents for one agent.
func realLauncherAgent(t *testing.T, kind, cmd string) {
	version, _ := exec.Command(cmd, "--version").Output()
	t.Logf("%s: %s (%s)", kind, strings.TrimSpace(string(version)), cmd)
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
	home, proj := filepath.Join(root, "home"), filepath.Join(root, "proj")
	e := newEnv(t, `
[restart]
initial_backoff = "200ms"
max_backoff = "1s"
max_restarts = 10
`)
	e.start()
	name := kind + "-0"
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("screen of %s:\n%s", name, e.capture(name))
			for _, ev := range e.events("--session", name) {
				if ev.Kind != herd.EventActivity {
					t.Logf("%s %s %s: %s", ev.Time.Format("15:04:05.000"), ev.Kind, ev.Reason, ev.Message)
				}
			}
		}
		// The agents (and Codex's app-server) outlive the daemon: end
		// them, and wait, so nothing writes into root once it is removed.
		_ = exec.Command("tmux", "-L", e.tmuxSock, "kill-server").Run()
		for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); {
			pids := e.agentPIDs()
			if len(pids) == 0 {
				return
			}
			for _, pid := range pids {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
			time.Sleep(100 * time.Millisecond) // polling interval
		}
	})
	var role string
	switch kind {
	case herd.AgentCodex:
		writeConfig(t, filepath.Join(home, ".codex", "config.toml"), fmt.Sprintf(`model = "gpt-mock"
model_provider = "mock"

[model_providers.mock]
name = "Mock"
base_url = "http://%s/v1"
env_key = "MOCK_API_KEY"
wire_api = "responses"
`, ln.Addr().String()))
		role = fmt.Sprintf(`command = [%q, "-a", "on-request", "-s", "read-only"]
env = { HOME = %q, MOCK_API_KEY = "mock", TERM = "xterm-256color", LANG = "C.UTF-8" }`, cmd, home)
	case herd.AgentGemini:
		writeConfig(t, filepath.Join(home, ".gemini", "settings.json"), `{"security": {"auth": {"selectedType": "gemini-api-key"}}}`)
		role = fmt.Sprintf(`command = [%q, "-m", "gemini-2.5-flash"]
env = { HOME = %q, GEMINI_API_KEY = "mock", GOOGLE_GEMINI_BASE_URL = %q, GEMINI_CLI_TRUST_WORKSPACE = "true", TERM = "xterm-256color", LANG = "C.UTF-8" }`,
			cmd, home, "http://"+ln.Addr().String())
	}
	if err := os.MkdirAll(proj, 0o755); err != nil {
		t.Fatal(err)
	}
	e.must("hooks", "install", "--agent", kind, "--dir", proj)
	roles := filepath.Join(root, "roles.toml")
	writeConfig(t, roles, fmt.Sprintf("[[role]]\nname = %q\nworkdir = %q\n%s\n", kind, proj, role))
	e.must("apply", "-f", roles)
	e.eventsOf(name, herd.EventSpawned, 1)

	v := e.realAgentIdle(kind, name, 0)
	e.typeSlowly(name, "say hello")
	e.waitFor("the first turn answered", 60*time.Second, func() bool { return mockSaw(mock, "say hello") })
	v = e.realAgentIdle(kind, name, 0)

	// SIGSEGV, then SIGKILL, of the real agent: crashed with that signal,
	// relaunched resuming the conversation.
	for i, sig := range []syscall.Signal{syscall.SIGSEGV, syscall.SIGKILL} {
		e.killAgent(v.PID, sig)
		crashed := e.eventsOf(name, herd.EventCrashed, i+1)[i]
		t.Logf("[%s] %s: %s %s: %s", kind, sig, crashed.Kind, crashed.Reason, crashed.Message)
		if got := crashSignal(crashed); got != int(sig) {
			t.Errorf("[%s %s] expected crashed by signal %d, got %+v", kind, sig, sig, crashed)
		}
		restarted := e.eventsOf(name, herd.EventRestarted, i+1)[i]
		t.Logf("[%s] relaunch: %s", kind, restarted.Message)
		if restarted.Data["resumed_conversation"] != true {
			t.Errorf("[%s %s] expected the relaunch to resume the conversation, got %+v", kind, sig, restarted)
		}
		v = e.realAgentIdle(kind, name, v.PID)
	}
	again := "say hello again"
	e.typeSlowly(name, again)
	e.waitFor("the resumed turn", 60*time.Second, func() bool { return mockSaw(mock, again) })
	for _, r := range mock.Records() {
		if slices.ContainsFunc(r.Users, func(u string) bool { return strings.Contains(u, again) }) {
			if !slices.ContainsFunc(r.Users, func(u string) bool { return strings.Contains(u, "say hello") && !strings.Contains(u, "again") }) {
				t.Errorf("[%s] expected the resumed conversation to carry the earlier messages, got %q", kind, r.Users)
			}
			t.Logf("[%s] after two crashes, the agent sent %d user messages: %q", kind, len(r.Users), r.Users)
			break
		}
	}
	e.realAgentIdle(kind, name, 0)

	// herd signal TERM ends the agent.
	v, _ = e.session(name)
	deaths := len(e.events("--session", name, "--kind", herd.EventExited))
	out := e.must("signal", name, "TERM")
	if !strings.Contains(out, "pid "+strconv.Itoa(v.PID)) {
		t.Errorf("[%s signal] expected TERM sent to the agent, pid %d, got %q", kind, v.PID, out)
	}
	ended := e.eventsOf(name, herd.EventExited, deaths+1)[deaths]
	t.Logf("[%s] herd signal TERM: %s %s: %s", kind, ended.Kind, ended.Reason, ended.Message)
	for _, ev := range e.events("--session", name) {
		if ev.Kind != herd.EventActivity {
			t.Logf("[%s] %s %s %s: %s", kind, ev.Time.Format("15:04:05.000"), ev.Kind, ev.Reason, ev.Message)
		}
	}
	e.must("stop", name)
}

// realAgentIdle waits until session name runs a real agent other than pid
// not (0: any) idle at its prompt, answering the startup dialogs, and
// checks that the recorded agent is the real process under the launcher.
func (e *env) realAgentIdle(kind, name string, not int) api.SessionView {
	e.t.Helper()
	var v api.SessionView
	deadline := time.Now().Add(120 * time.Second)
	dialogs := [][2]string{{"Trust this folder?", "Trust and continue"}, {"Hooks need review", "Trust all and continue"}}
	for {
		if time.Now().After(deadline) {
			e.t.Fatalf("%s never ran idle with an agent other than %d: %+v", name, not, v)
		}
		s := e.capture(name)
		dialog := false
		for _, d := range dialogs {
			if strings.Contains(s, d[0]) {
				e.chooseOption(name, d[0], d[1])
				dialog = true
			}
		}
		var ok bool
		v, ok = e.session(name)
		if !dialog && ok && v.State == herd.StateRunning && v.PID != 0 && v.PID != not && v.Activity == herd.ActivityIdle {
			break
		}
		time.Sleep(200 * time.Millisecond) // polling interval
	}
	parent := ppidOf(e.t, v.PID)
	comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", v.PID))
	switch kind {
	case herd.AgentCodex:
		if strings.TrimSpace(string(comm)) != "codex" || !strings.Contains(cmdline(parent), "codex") {
			e.t.Errorf("[%s] expected the native codex under its node shim, got pid %d %q under %q", kind, v.PID, cmdline(v.PID), cmdline(parent))
		}
	case herd.AgentGemini:
		if !strings.Contains(cmdline(v.PID), "--max-old-space-size=") || !strings.Contains(cmdline(parent), "gemini") {
			e.t.Errorf("[%s] expected the relaunched child under the launcher, got pid %d %q under %q", kind, v.PID, cmdline(v.PID), cmdline(parent))
		}
	}
	e.t.Logf("[%s] agent pid %d: %q, under pid %d: %q", kind, v.PID, cmdline(v.PID), parent, cmdline(parent))
	return v
}

// killAgent sends sig to pid until it is gone: Codex survives a first
// SIGSEGV (its stack-overflow handler takes it, then the next one ends it).
func (e *env) killAgent(pid int, sig syscall.Signal) {
	e.t.Helper()
	start := startTicks(pid)
	for i := 0; i < 5 && start != "" && startTicks(pid) == start; i++ {
		if i > 0 {
			e.t.Logf("pid %d outlived %s #%d; again", pid, sig, i)
		}
		_ = syscall.Kill(pid, sig)
		for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline) && startTicks(pid) == start; {
			time.Sleep(20 * time.Millisecond) // polling interval
		}
	}
}

// startTicks is the start time of pid ("" when gone or a zombie).
func startTicks(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b)[strings.LastIndexByte(string(b), ')')+1:])
	if len(f) < 20 || f[0] == "Z" {
		return ""
	}
	return f[19]
}

// typeSlowly types text into the pane, waits for the pane to show it,
// then presses Enter apart from it (an Enter right after typed keys is a
// newline to Gemini CLI).
func (e *env) typeSlowly(name, text string) {
	e.t.Helper()
	// Keys typed while a just resumed agent still loads its conversation
	// are lost: typed again until the input line shows them.
	before := strings.Count(e.capture(name), text)
	for try := 0; ; try++ {
		e.keys(name, "-l", text)
		deadline := time.Now().Add(5 * time.Second)
		for time.Now().Before(deadline) && strings.Count(e.capture(name), text) <= before {
			time.Sleep(50 * time.Millisecond) // polling interval
		}
		if strings.Count(e.capture(name), text) > before {
			break
		}
		if try == 3 {
			e.t.Fatalf("%q never showed in the input line:\n%s", text, e.capture(name))
		}
	}
	time.Sleep(300 * time.Millisecond) // past the agent's fast-return window
	e.keys(name, "Enter")
}

// mockSaw reports whether a request to the mock carried a user message
// holding text (Gemini CLI sends context of its own after the prompt).
func mockSaw(mock *mockapi.Server, text string) bool {
	for _, r := range mock.Records() {
		if slices.ContainsFunc(r.Users, func(u string) bool { return strings.Contains(u, text) }) {
			return true
		}
	}
	return false
}

func writeConfig(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}
