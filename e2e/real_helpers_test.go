package e2e

import (
	"context"
	"fmt"
	"net"
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
	"herd/internal/mockapi"
)

// startMock runs the loopback mock API for the test; it stops with it.
func startMock(t *testing.T) (*mockapi.Server, net.Listener) {
	t.Helper()
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
	return mock, ln
}

// endAgents ends e's agents, which outlive the daemon by design, and
// waits for them, so nothing writes into the test's directories once they
// are removed.
func (e *env) endAgents() {
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
}

// realAgent is one real agent under the daemon, its console on a private
// loopback port, talking to the mock API: the setup of the real console
// tests.
type realAgent struct {
	e    *env
	mock *mockapi.Server
	kind string // herd.AgentClaude, herd.AgentCodex or herd.AgentGemini
	name string // its session
	proj string // its working directory
	link string // the console's login link (`herd web url`)
	base string // the console's address
}

// startRealAgent runs the agent bin of kind as role kind's one session
// under a daemon with a console, its startup dialogs answered at the
// pane as a person would, and waits for it idle at its prompt. The agent
// is ended with the test; the screen and the mock's records are logged
// if the test failed.
func startRealAgent(t *testing.T, kind, bin string) *realAgent {
	t.Helper()
	hasTmux(t)
	version, _ := exec.Command(bin, "--version").Output()
	t.Logf("%s: %s (%s)", kind, strings.TrimSpace(string(version)), bin)
	mock, ln := startMock(t)
	api := "http://" + ln.Addr().String()

	// Made before the environment, removed after it: the agent writes
	// into it until it is gone.
	root := t.TempDir()
	home, proj := filepath.Join(root, "home"), filepath.Join(root, "proj")
	var files map[string]string // home's files
	var command []string
	env := `HOME = %q, TERM = "xterm-256color", LANG = "C.UTF-8"`
	switch kind {
	case herd.AgentClaude:
		// Onboarding done (it would reach api.anthropic.com); the trust
		// and API-key dialogs are answered below.
		files = map[string]string{".claude.json": `{"hasCompletedOnboarding": true, "theme": "dark"}`}
		command = []string{bin, "--permission-mode", "default"}
		env += fmt.Sprintf(`, ANTHROPIC_BASE_URL = %q, ANTHROPIC_API_KEY = "sk-ant-mock-0123456789abcdefghij", DISABLE_AUTOUPDATER = "1", CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC = "1", DISABLE_TELEMETRY = "1"`, api)
	case herd.AgentCodex:
		files = map[string]string{".codex/config.toml": `model = "gpt-mock"
model_provider = "mock"

[model_providers.mock]
name = "Mock"
base_url = "` + api + `/v1"
env_key = "MOCK_API_KEY"
wire_api = "responses"
`}
		// On-request approvals: the mock's escalated call makes it ask.
		command = []string{bin, "-a", "on-request", "-s", "read-only"}
		env += `, MOCK_API_KEY = "mock"`
	case herd.AgentGemini:
		files = map[string]string{".gemini/settings.json": `{"security": {"auth": {"selectedType": "gemini-api-key"}}}`}
		command = []string{bin, "-m", "gemini-2.5-flash"}
		// The folder trusted up front: herd's hooks load from a trusted
		// folder's settings only.
		env += fmt.Sprintf(`, GEMINI_API_KEY = "mock", GOOGLE_GEMINI_BASE_URL = %q, GEMINI_CLI_TRUST_WORKSPACE = "true"`, api)
	default:
		t.Fatalf("startRealAgent: no setup for agent %q", kind)
	}
	if err := os.MkdirAll(proj, 0o755); err != nil {
		t.Fatal(err)
	}
	for f, body := range files {
		p := filepath.Join(home, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// The console on a port of its own: tests side by side each have one.
	// The probe's default timeout (2 s): it bounds the daemon's tmux calls
	// (an inject four times over), which an agent under load needs.
	e := newEnv(t, fastRestart+"[web]\nlisten = \"127.0.0.1:0\"\n\n[probe]\ninterval = \"200ms\"\ntimeout = \"2s\"\n")
	e.start()
	a := &realAgent{e: e, mock: mock, kind: kind, name: kind + "-0", proj: proj}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("screen of %s:\n%s\nmock records: %+v", a.name, e.capture(a.name), mock.Records())
		}
		e.endAgents()
	})
	if kind == herd.AgentCodex {
		// hooks install sets Codex's notify in the user's config: this home's.
		e.extraEnv = append(e.extraEnv, "CODEX_HOME="+filepath.Join(home, ".codex"))
	}
	e.must("hooks", "install", "--agent", kind, "--dir", proj)
	quoted := make([]string, len(command))
	for i, c := range command {
		quoted[i] = strconv.Quote(c)
	}
	roles := filepath.Join(root, "roles.toml")
	role := fmt.Sprintf("[[role]]\nname = %q\ncommand = [%s]\nworkdir = %q\nenv = { "+env+" }\n", kind, strings.Join(quoted, ", "), proj, home)
	if err := os.WriteFile(roles, []byte(role), 0o600); err != nil {
		t.Fatal(err)
	}
	e.must("apply", "-f", roles)
	// A machine this busy may fail a launch or two (fastRestart
	// relaunches).
	e.waitFor(a.name+" spawned", 3*time.Minute, func() bool {
		return len(e.events("--session", a.name, "--kind", herd.EventSpawned)) > 0
	})
	switch kind {
	case herd.AgentClaude:
		answerStartup(t, e, a.name)
	case herd.AgentCodex:
		// A digit sent by the console selects an option of Codex's trust
		// dialog without confirming it: answered at the pane.
		for _, d := range [][2]string{{"Trust this folder?", "Trust and continue"}, {"Hooks need review", "Trust all and continue"}} {
			e.waitFor(a.name+" at "+d[0], 60*time.Second, func() bool { return strings.Contains(e.capture(a.name), d[0]) })
			e.chooseOption(a.name, d[0], d[1])
		}
	}
	e.waitFor(a.name+" idle at its prompt", 90*time.Second, func() bool {
		v, _ := e.session(a.name)
		return v.State == herd.StateRunning && v.Activity == herd.ActivityIdle
	})
	a.link = strings.TrimSpace(e.must("web", "url"))
	base, _, ok := strings.Cut(a.link, "/login")
	if !ok {
		t.Fatalf("[web url] expected a login link, got %q", a.link)
	}
	a.base = base
	return a
}

// submit types prompt into the agent's input, as a person would, and
// waits for it to reach the mock. herd presses Enter once the pane took
// the text; should the agent not take it (Gemini CLI, with its hooks
// warning on screen), or herd's inject give up on a machine this busy, a
// second Enter, logged.
func (a *realAgent) submit(prompt string) {
	a.e.t.Helper()
	if _, stderr, code := a.e.herd("inject", a.name, prompt); code != 0 {
		a.e.t.Logf("herd inject %s: exit %d: %s", a.name, code, strings.TrimSpace(stderr))
	}
	sent := func() bool {
		return slices.ContainsFunc(a.mock.Records(), func(r mockapi.Record) bool {
			return len(r.Users) > 0 && strings.Contains(r.Users[len(r.Users)-1], prompt)
		})
	}
	for deadline := time.Now().Add(10 * time.Second); !sent(); {
		if time.Now().After(deadline) {
			a.e.t.Logf("the prompt never reached the API: Enter pressed again; screen:\n%s", a.e.capture(a.name))
			a.e.keys(a.name, "Enter")
			a.e.waitFor("the prompt at the API", 30*time.Second, sent)
			return
		}
		time.Sleep(100 * time.Millisecond) // polling interval
	}
}
