package agents_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"herd"
	"herd/internal/agents"
	"herd/internal/hookinstall"
	"herd/internal/mockapi"
)

// The real-agent test drives the real Claude Code against the mock API in
// a private tmux server. It runs only when HERD_REAL_CLAUDE names a claude
// command (scripts/real-agents.sh installs one); with
// HERD_CAPTURE_FIXTURES=1 it rewrites testdata/claude from what it saw.

// hookDumpEnv names the directory the test binary, run as a hook program,
// writes each payload to.
const hookDumpEnv = "HERD_AGENTS_HOOKDUMP"

func TestMain(m *testing.M) {
	// Run as "herd hook EVENT" by a real agent: dump the payload and exit.
	if dir := os.Getenv(hookDumpEnv); dir != "" && len(os.Args) >= 3 && os.Args[1] == "hook" {
		n := len(os.Args)
		if n >= 4 && os.Args[n-2] == "notify" { // Codex: the JSON is the last argument
			os.Exit(dumpHook(dir, "notify", strings.NewReader(os.Args[n-1])))
		}
		os.Exit(dumpHook(dir, os.Args[n-1], os.Stdin))
	}
	os.Exit(m.Run())
}

func dumpHook(dir, event string, in io.Reader) int {
	data, err := io.ReadAll(io.LimitReader(in, agents.MaxPayload+1))
	if err != nil {
		return 0
	}
	name := fmt.Sprintf("%d-%s.json", time.Now().UnixNano(), event)
	tmp := filepath.Join(dir, "."+name)
	if os.WriteFile(tmp, data, 0o644) == nil {
		_ = os.Rename(tmp, filepath.Join(dir, name))
	}
	return 0
}

// realEnv is one run of the real agent.
type realEnv struct {
	t       *testing.T
	kind    string
	agent   string // the agent's command
	home    string
	proj    string
	hooks   string
	bin     string // the hook program, named herd
	socket  string
	baseURL string
	mock    *mockapi.Server
	// scrub maps machine-specific strings to neutral ones for fixtures.
	scrub [][2]string
	// captured fixtures, by file name under testdata/claude/<version>.
	files   map[string][]byte
	version string   // the agent's version
	env1    []string // the agent's own environment variables
}

func newRealEnv(t *testing.T, kind, agent string) *realEnv {
	t.Helper()
	root := t.TempDir()
	e := &realEnv{t: t, kind: kind, agent: agent, files: map[string][]byte{},
		home: filepath.Join(root, "home"), proj: filepath.Join(root, "proj"),
		hooks: filepath.Join(root, "hooks"), socket: fmt.Sprintf("herd-agents-%s-%d", kind, os.Getpid())}
	for _, d := range []string{e.home, e.proj, e.hooks, filepath.Join(root, "bin")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	e.bin = filepath.Join(root, "bin", "herd")
	copyFile(t, self, e.bin)
	if _, err := hookinstall.Install(kind, e.proj, e.bin); err != nil {
		t.Fatal(err)
	}
	ln, err := mockapi.Listen()
	if err != nil {
		t.Fatal(err)
	}
	e.mock = mockapi.New(nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.mock.Run(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("mock api: %v", err)
		}
	})
	e.baseURL = "http://" + ln.Addr().String()
	switch kind {
	case herd.AgentClaude:
		// Onboarding done (it would check api.anthropic.com); trust and
		// the API key are left for the dialogs to ask.
		writeFile(t, filepath.Join(e.home, ".claude.json"), `{"hasCompletedOnboarding": true, "theme": "dark"}`)
		e.env1 = []string{
			"ANTHROPIC_BASE_URL=" + e.baseURL, "ANTHROPIC_API_KEY=sk-ant-mock-0123456789abcdefghij",
			"DISABLE_AUTOUPDATER=1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_TELEMETRY=1",
		}
	case herd.AgentCodex:
		cfg := filepath.Join(e.home, ".codex", "config.toml")
		if err := os.MkdirAll(filepath.Dir(cfg), 0o755); err != nil {
			t.Fatal(err)
		}
		writeFile(t, cfg, fmt.Sprintf(`model = "gpt-mock"
model_provider = "mock"

[model_providers.mock]
name = "Mock"
base_url = "%s/v1"
env_key = "MOCK_API_KEY"
wire_api = "responses"
`, e.baseURL))
		if _, err := hookinstall.InstallCodexNotify(cfg, e.bin); err != nil {
			t.Fatal(err)
		}
		e.env1 = []string{"MOCK_API_KEY=mock"}
	case herd.AgentGemini:
		cfg := filepath.Join(e.home, ".gemini", "settings.json")
		if err := os.MkdirAll(filepath.Dir(cfg), 0o755); err != nil {
			t.Fatal(err)
		}
		writeFile(t, cfg, `{"security": {"auth": {"selectedType": "gemini-api-key"}}}`)
		e.env1 = []string{"GEMINI_API_KEY=mock", "GOOGLE_GEMINI_BASE_URL=" + e.baseURL, "GEMINI_CLI_TRUST_WORKSPACE=true"}
	}
	e.scrub = [][2]string{
		{e.bin, "/usr/local/bin/herd"},
		{filepath.Join(e.home, ".claude", "projects", agents.ClaudeProjectDir(e.proj)), "/home/user/.claude/projects/" + agents.ClaudeProjectDir("/home/user/proj")},
		{e.proj, "/home/user/proj"},
		{e.home, "/home/user"},
		{ln.Addr().String(), "127.0.0.1:8787"},
	}
	t.Cleanup(e.stopAll)
	return e
}

// stopAll kills the private tmux server and ends what the agents left
// behind (Gemini CLI relaunches itself as a child that outlives the
// pane's hangup), so nothing writes into the temporary directories after.
// Only processes of the panes' trees are signalled, each checked to be
// the same process (pid and start time) as when it was listed.
func (e *realEnv) stopAll() {
	out, _ := e.tmux("list-panes", "-a", "-F", "#{pane_pid}")
	type ident struct{ pid, start string }
	var procs []ident
	for _, pid := range strings.Fields(out) {
		queue := []string{pid}
		for len(queue) > 0 {
			p := queue[0]
			queue = queue[1:]
			if st := startTime(p); st != "" {
				procs = append(procs, ident{p, st})
			}
			children, _ := os.ReadFile("/proc/" + p + "/task/" + p + "/children")
			queue = append(queue, strings.Fields(string(children))...)
		}
	}
	_, _ = e.tmux("kill-server")
	deadline := time.Now().Add(10 * time.Second)
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		for _, p := range procs {
			if startTime(p.pid) != p.start {
				continue // gone, or the pid is another process now
			}
			if n, err := strconv.Atoi(p.pid); err == nil {
				_ = syscall.Kill(n, sig)
			}
		}
		for _, p := range procs {
			for time.Now().Before(deadline) && startTime(p.pid) == p.start {
				time.Sleep(50 * time.Millisecond) // polling interval
			}
		}
		deadline = time.Now().Add(5 * time.Second)
	}
}

// startTime is field 22 of /proc/PID/stat (start time in clock ticks),
// or "" when the process is gone.
func startTime(pid string) string {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return ""
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return ""
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return ""
	}
	return f[19]
}

func (e *realEnv) env() []string {
	return append([]string{
		"HOME=" + e.home, "PATH=" + os.Getenv("PATH"), "TERM=xterm-256color", "LANG=C.UTF-8",
		hookDumpEnv + "=" + e.hooks,
	}, e.env1...)
}

// tmux runs one command on the private server, bounded by a timeout.
func (e *realEnv) tmux(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "tmux", append([]string{"-L", e.socket, "-f", "/dev/null"}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("tmux %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}

func (e *realEnv) mustTmux(args ...string) string {
	e.t.Helper()
	out, err := e.tmux(args...)
	if err != nil {
		e.t.Fatal(err)
	}
	return out
}

// start runs argv in a new pane (session name), with the agent's env.
func (e *realEnv) start(name string, argv []string) {
	e.t.Helper()
	args := []string{"new-session", "-d", "-s", name, "-x", "120", "-y", "40", "-c", e.proj, "--", "env", "-i"}
	args = append(args, e.env()...)
	e.mustTmux(append(args, argv...)...)
	e.mustTmux("set-option", "-t", name, "remain-on-exit", "on")
}

func (e *realEnv) capture(name string) string {
	e.t.Helper()
	return e.mustTmux("capture-pane", "-p", "-t", "="+name+":")
}

func (e *realEnv) keys(name string, keys ...string) {
	e.t.Helper()
	e.mustTmux(append([]string{"send-keys", "-t", "=" + name + ":"}, keys...)...)
}

// typeLine types text literally, then Enter.
func (e *realEnv) typeLine(name, text string) {
	e.t.Helper()
	e.mustTmux("send-keys", "-t", "="+name+":", "-l", text)
	e.waitScreen(name, "typed text", func(s string) bool { return strings.Contains(s, text) })
	e.keys(name, "Enter")
}

// chooseYes moves the selection of the dialog on screen (the one showing
// marker) to the first option starting with "Yes" and confirms it.
// Versions differ in the order of the options and in which one is
// preselected, and a key sent while the dialog is still starting is lost:
// a key is sent again when the screen has not moved after a while.
func (e *realEnv) chooseYes(name, marker string) { e.choose(name, marker, "Yes") }

// choose is chooseYes for the option starting with option.
func (e *realEnv) choose(name, marker, option string) {
	e.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var lastKey time.Time
	var s string
	for time.Now().Before(deadline) {
		s = e.capture(name)
		if !strings.Contains(s, marker) {
			return
		}
		sel, yes := selectedLine(s), optionLine(s, option)
		if sel >= 0 && yes >= 0 && time.Since(lastKey) > 1500*time.Millisecond {
			switch {
			case sel == yes:
				e.keys(name, "Enter")
			case sel < yes:
				e.keys(name, "Down")
			default:
				e.keys(name, "Up")
			}
			lastKey = time.Now()
		}
		time.Sleep(100 * time.Millisecond) // polling interval
	}
	e.t.Fatalf("could not answer %s to the dialog:\n%s", option, s)
}

// selectionMarks mark the selected option of a dialog (Claude, Codex,
// Gemini).
var selectionMarks = []string{"❯", "›", "●"}

// optionText returns a screen line without selection mark and number.
func optionText(l string) (text string, selected bool) {
	t := strings.Trim(strings.ReplaceAll(l, "\u00a0", " "), " │")
	for _, m := range selectionMarks {
		if r, ok := strings.CutPrefix(t, m); ok {
			t, selected = r, true
			break
		}
	}
	t = strings.TrimSpace(strings.TrimLeft(strings.TrimSpace(t), "0123456789."))
	return t, selected && t != ""
}

// optionLine is the index of the first option starting with option.
func optionLine(screen, option string) int {
	for i, l := range strings.Split(screen, "\n") {
		if t, _ := optionText(l); strings.HasPrefix(t, option) {
			return i
		}
	}
	return -1
}

// selectedLine is the index of the line holding the selection mark.
func selectedLine(screen string) int {
	for i, l := range strings.Split(screen, "\n") {
		if _, sel := optionText(l); sel {
			return i
		}
	}
	return -1
}

// waitScreen polls the pane until ok holds, or fails after a deadline.
func (e *realEnv) waitScreen(name, what string, ok func(string) bool) string {
	e.t.Helper()
	deadline := time.Now().Add(45 * time.Second)
	var s string
	for time.Now().Before(deadline) {
		s = e.capture(name)
		if ok(s) {
			return s
		}
		time.Sleep(100 * time.Millisecond) // polling interval, not a wait for a condition
	}
	e.t.Fatalf("%s: timed out; screen:\n%s", what, s)
	return ""
}

// hookFiles lists the dumped payloads, oldest first.
func (e *realEnv) hookFiles() []string {
	ents, _ := os.ReadDir(e.hooks)
	var out []string
	for _, d := range ents {
		if !strings.HasPrefix(d.Name(), ".") {
			out = append(out, d.Name())
		}
	}
	sort.Strings(out)
	return out
}

// waitHookWith waits for a payload of event holding text.
func (e *realEnv) waitHookWith(event, text string, within time.Duration) []byte {
	e.t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		for _, f := range e.hookFiles() {
			if strings.HasSuffix(f, "-"+event+".json") {
				b, err := os.ReadFile(filepath.Join(e.hooks, f))
				if err == nil && bytes.Contains(b, []byte(text)) {
					return b
				}
			}
		}
		time.Sleep(50 * time.Millisecond) // polling interval
	}
	e.t.Fatalf("hook %s with %q: not seen within %v; seen: %v", event, text, within, e.hookFiles())
	return nil
}

// waitHook waits for the n-th payload of event (1-based, counting all
// payloads so far) and returns it.
func (e *realEnv) waitHook(event string, n int, within time.Duration) []byte {
	e.t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		seen := 0
		for _, f := range e.hookFiles() {
			if strings.HasSuffix(f, "-"+event+".json") {
				if seen++; seen == n {
					b, err := os.ReadFile(filepath.Join(e.hooks, f))
					if err != nil {
						e.t.Fatal(err)
					}
					return b
				}
			}
		}
		time.Sleep(50 * time.Millisecond) // polling interval
	}
	e.t.Fatalf("hook %s #%d: not seen within %v; seen: %v", event, n, within, e.hookFiles())
	return nil
}

func (e *realEnv) keep(name string, data []byte) {
	s := string(data)
	for _, r := range e.scrub {
		s = strings.ReplaceAll(s, r[0], r[1])
	}
	s = sockRE.ReplaceAllString(s, "/tmp/cc-socks/1000.sock")
	// A path cut by the screen's edge escapes the replacements above.
	s = testDirRE.ReplaceAllString(s, "/home/user")
	e.files[name] = []byte(s)
}

// testDirRE is what is left of a test's temporary directory at a screen's
// edge.
var testDirRE = regexp.MustCompile(`/tmp/TestReal[A-Za-z0-9/_.-]*`)

// sockRE is Claude's per-process messaging socket, named by its pid.
var sockRE = regexp.MustCompile(`/tmp/cc-socks/\d+\.sock`)

func (e *realEnv) expectScreen(file, screen string, want herd.Activity, reason string) agents.Screen {
	e.t.Helper()
	e.keep(file, []byte(screen))
	got := agents.ClassifyScreen(e.kind, screen)
	if got.Activity != want || got.Reason != reason {
		e.t.Errorf("%s: screen classified %q/%q, want %q/%q:\n%s", file, got.Activity, got.Reason, want, reason, screen)
	}
	return got
}

func (e *realEnv) expectHook(file string, data []byte, want herd.Activity) agents.Signal {
	e.t.Helper()
	e.keep(file, data)
	s, err := agents.ParseHook(e.kind, data, "", time.Now())
	if err != nil {
		e.t.Fatalf("%s: %v", file, err)
	}
	if s.Activity != want {
		e.t.Errorf("%s: activity %q, want %q: %s", file, s.Activity, want, data)
	}
	return s
}

var timerOnScreen = regexp.MustCompile(`… \(\d+s`)

// emptyInputRE is Claude's input box with nothing typed in it.
var emptyInputRE = regexp.MustCompile(`(?m)^─{8,}\n❯[ \x{00a0}]*\n─{8,}`)

func TestRealClaude(t *testing.T) {
	claude := os.Getenv("HERD_REAL_CLAUDE")
	if claude == "" {
		t.Skip("HERD_REAL_CLAUDE is not set (scripts/real-agents.sh sets it)")
	}
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("tmux is not installed")
	}
	e := newRealEnv(t, herd.AgentClaude, claude)
	e.version = claudeVersion(t, claude)
	t.Logf("claude %s", e.version)

	// Kind inference and process matching on what the real install is.
	resolved := agents.Resolve(claude, e.proj)
	if k := agents.Infer([]string{claude}, resolved); k != herd.AgentClaude {
		t.Errorf("Infer(%s -> %s) = %q, want claude", claude, resolved, k)
	}
	if k := agents.Infer([]string{resolved}, ""); k != herd.AgentClaude {
		t.Errorf("Infer(%s) = %q, want claude", resolved, k)
	}

	// Newer versions default to auto mode, which answers permission
	// prompts itself; a role asking for the default mode gets them.
	argv, id := agents.LaunchArgv(herd.AgentClaude, []string{claude, "--permission-mode", "default"}, resolved, nil)
	if id == "" {
		t.Fatalf("LaunchArgv chose no session id: %q", argv)
	}
	const pane = "claude"
	e.start(pane, argv)

	trust := e.waitScreen(pane, "trust dialog", func(s string) bool { return strings.Contains(s, "trust this folder") })
	e.expectScreen("screen-trust.txt", trust, herd.ActivityWaiting, agents.ReasonStartupPrompt)
	// The process in the pane is the agent, by comm, argv[0] and exe.
	pid := strings.TrimSpace(e.mustTmux("display-message", "-p", "-t", "="+pane+":", "#{pane_pid}"))
	p := readProc(t, pid)
	if !agents.Matches([]string{"claude"}, p) {
		t.Errorf("Matches(claude, %+v) = false", p)
	}
	t.Logf("agent process: comm %q argv[0] %q exe %q", p.Comm, p.Argv[0], p.Exe)

	e.chooseYes(pane, "trust this folder")
	apiKey := e.waitScreen(pane, "api key dialog", func(s string) bool { return strings.Contains(s, "custom API key") })
	e.expectScreen("screen-api-key.txt", apiKey, herd.ActivityWaiting, agents.ReasonStartupPrompt)
	e.chooseYes(pane, "custom API key")

	start := e.waitHook(agents.HookSessionStart, 1, 30*time.Second)
	sig := e.expectHook("hook-session-start-startup.json", start, herd.ActivityIdle)
	if sig.AgentSessionID != id {
		t.Errorf("SessionStart session id %q, want the one herd chose %q", sig.AgentSessionID, id)
	}
	idle := e.waitScreen(pane, "idle prompt", func(s string) bool { return agents.ClassifyScreen(herd.AgentClaude, s).Activity == herd.ActivityIdle })
	e.expectScreen("screen-idle.txt", idle, herd.ActivityIdle, "")

	// A plain turn.
	e.typeLine(pane, "say hello")
	e.expectHook("hook-user-prompt-submit.json", e.waitHook(agents.HookUserPromptSubmit, 1, 30*time.Second), herd.ActivityWorking)
	e.expectHook("hook-stop.json", e.waitHook(agents.HookStop, 1, 30*time.Second), herd.ActivityIdle)
	after := e.waitScreen(pane, "answer", func(s string) bool {
		return strings.Contains(s, mockapi.ReplyText) && agents.ClassifyScreen(herd.AgentClaude, s).Activity == herd.ActivityIdle
	})
	e.expectScreen("screen-after-turn.txt", after, herd.ActivityIdle, "")

	// A hung API call: the spinner turns, the normalised screen does not.
	e.typeLine(pane, "please "+mockapi.TriggerHang+" now")
	deadline := time.Now().Add(30 * time.Second)
	for e.mock.Hung() == 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond) // polling interval
	}
	if e.mock.Hung() == 0 {
		t.Fatal("the mock never held a request")
	}
	sp1 := e.waitScreen(pane, "spinner", func(s string) bool { return agents.ClassifyScreen(herd.AgentClaude, s).Running })
	e.expectScreen("screen-spinner-start.txt", sp1, herd.ActivityWorking, "")
	spA := e.waitScreen(pane, "spinner timer", func(s string) bool { return timerOnScreen.MatchString(s) })
	spB := e.waitScreen(pane, "spinner redraw", func(s string) bool { return timerOnScreen.MatchString(s) && s != spA })
	a := e.expectScreen("screen-spinner-timer-a.txt", spA, herd.ActivityWorking, "")
	b := e.expectScreen("screen-spinner-timer-b.txt", spB, herd.ActivityWorking, "")
	if a.Hash != b.Hash {
		t.Errorf("spinner redraw changed the normalised screen:\n%s\n---\n%s", agents.Normalize(spA), agents.Normalize(spB))
	}
	hooksBefore := len(e.hookFiles())

	// Esc: no hook, the prompt comes back without a spinner.
	e.keys(pane, "Escape")
	esc := e.waitScreen(pane, "after esc", func(s string) bool { return agents.ClassifyScreen(herd.AgentClaude, s).Activity == herd.ActivityIdle })
	e.expectScreen("screen-after-esc.txt", esc, herd.ActivityIdle, "")
	if n := len(e.hookFiles()); n != hooksBefore {
		t.Logf("Esc sent %d hooks: %v", n-hooksBefore, e.hookFiles()[hooksBefore:])
	}
	// The interrupted prompt is put back in the input line: what herd
	// inject presses first empties it.
	if !strings.Contains(esc, "herd-hang now") {
		t.Errorf("after Esc: expected the interrupted prompt back in the input line:\n%s", esc)
	}
	e.keys(pane, agents.ClearKeys(herd.AgentClaude)...)
	e.waitScreen(pane, "input line emptied", func(s string) bool { return emptyInputRE.MatchString(s) })

	// A tool that needs permission.
	e.typeLine(pane, "run the "+mockapi.TriggerTool)
	e.expectHook("hook-pre-tool-use.json", e.waitHook(agents.HookPreToolUse, 1, 30*time.Second), herd.ActivityWorking)
	e.expectHook("hook-permission-request.json", e.waitHook(agents.HookPermissionRequest, 1, 30*time.Second), herd.ActivityWaiting)
	perm := e.waitScreen(pane, "permission dialog", func(s string) bool { return strings.Contains(s, "Do you want to proceed?") })
	screenAt := time.Now()
	e.logPermissionLatency(agents.HookPermissionRequest, screenAt)
	e.expectScreen("screen-permission.txt", perm, herd.ActivityWaiting, agents.ReasonPermission)
	e.expectHook("hook-notification-permission.json", e.waitHookWith(agents.HookNotification, `"permission_prompt"`, 30*time.Second), herd.ActivityWaiting)
	e.keys(pane, "Enter")
	e.expectHook("hook-post-tool-use.json", e.waitHook(agents.HookPostToolUse, 1, 30*time.Second), herd.ActivityWorking)
	e.waitHook(agents.HookStop, 2, 30*time.Second)
	if _, err := os.Stat(filepath.Join(e.proj, mockapi.ToolMarker)); err != nil {
		t.Errorf("the approved tool did not run: %v", err)
	}

	// A rate limit ends the turn: blocked.
	e.typeLine(pane, "trigger "+mockapi.TriggerRateLimit+" now")
	fail := e.expectHook("hook-stop-failure.json", e.waitHook(agents.HookStopFailure, 1, 60*time.Second), herd.ActivityBlocked)
	if fail.Reason != agents.ReasonRateLimited || fail.Error == "" {
		t.Errorf("StopFailure: reason %q error %q, want rate_limited with the error", fail.Reason, fail.Error)
	}
	rl := e.waitScreen(pane, "rate limit shown", func(s string) bool {
		return strings.Contains(s, "429") && agents.ClassifyScreen(herd.AgentClaude, s).Activity == herd.ActivityIdle
	})
	e.expectScreen("screen-rate-limited.txt", rl, herd.ActivityIdle, "")

	// About a minute after a finished turn Claude reminds: idle_prompt.
	// It must not turn idle into waiting.
	n := e.waitHookWith(agents.HookNotification, `"idle_prompt"`, 90*time.Second)
	s := e.expectHook("hook-notification-idle.json", n, "")
	if s.Progress {
		t.Errorf("idle_prompt counted as progress")
	}

	// Exit, then resume with the role's flags.
	e.typeLine(pane, "/exit")
	e.expectHook("hook-session-end.json", e.waitHook(agents.HookSessionEnd, 1, 30*time.Second), herd.ActivityIdle)
	rargv, ok := agents.ResumeCommand(herd.AgentClaude, argv, resolved, id)
	if !ok || !slices.Contains(rargv, "--resume") || slices.Contains(rargv, "--session-id") || !slices.Contains(rargv, "--permission-mode") {
		t.Fatalf("ResumeCommand(%q) = %q, %v", argv, rargv, ok)
	}
	e.start("resumed", rargv)
	// A second launch with the same --session-id is refused: herd falls
	// back to --resume.
	e.checkIDInUse(id)
	res := e.expectHook("hook-session-start-resume.json", e.waitHook(agents.HookSessionStart, 2, 30*time.Second), herd.ActivityIdle)
	if res.AgentSessionID != id {
		t.Errorf("resumed session id %q, want %q", res.AgentSessionID, id)
	}
	resumed := e.waitScreen("resumed", "resumed prompt", func(s string) bool {
		return strings.Contains(s, "say hello") && agents.ClassifyScreen(herd.AgentClaude, s).Activity == herd.ActivityIdle
	})
	e.expectScreen("screen-resumed.txt", resumed, herd.ActivityIdle, "")

	// The transcript is where TranscriptPatterns says.
	pats := agents.TranscriptPatterns(herd.AgentClaude, agents.Where{Home: e.home, Cwd: e.proj, SessionID: id})
	if m, _ := filepath.Glob(pats[0]); len(m) != 1 {
		t.Errorf("transcript %s: found %v", pats[0], m)
	}

	e.streamRuns()
	e.writeFixtures()
}

// logPermissionLatency logs how long after the mock answered with a tool
// call the agent's permission hook ran, and the dialog was seen on screen
// (polled every 100ms).
func (e *realEnv) logPermissionLatency(event string, screenAt time.Time) {
	var answered time.Time
	for _, r := range e.mock.Records() {
		if r.Tool {
			answered = r.Time
		}
	}
	for _, f := range e.hookFiles() {
		if !strings.HasSuffix(f, "-"+event+".json") {
			continue
		}
		ns, err := strconv.ParseInt(strings.SplitN(f, "-", 2)[0], 10, 64)
		if err != nil || answered.IsZero() {
			return
		}
		e.t.Logf("latency: tool call answered -> %s hook ran: %v; -> dialog seen on screen: %v",
			event, time.Unix(0, ns).Sub(answered).Round(time.Millisecond), screenAt.Sub(answered).Round(time.Millisecond))
		return
	}
}

// checkIDInUse launches the agent headless with a session id already
// taken and checks that IDInUse recognises the refusal.
func (e *realEnv) checkIDInUse(id string) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, e.agent, "-p", "--session-id", id, "hi")
	cmd.Dir, cmd.Env = e.proj, e.env()
	out, err := cmd.CombinedOutput()
	if err == nil || !agents.IDInUse(string(out)) {
		e.t.Errorf("a taken --session-id: expected a refusal IDInUse knows, got %v: %s", err, out)
	}
}

// streamRuns captures headless stream-json runs.
func (e *realEnv) streamRuns() {
	t := e.t
	runs := []struct {
		file, prompt string
		extra        []string
		env          []string
		want         herd.Activity
	}{
		{"stream-ok.jsonl", "say hello", nil, nil, herd.ActivityIdle},
		{"stream-tool.jsonl", "run the " + mockapi.TriggerTool, []string{"--allowedTools", "Bash"}, nil, herd.ActivityIdle},
		{"stream-rate-limit.jsonl", mockapi.TriggerRateLimit, nil, nil, herd.ActivityBlocked},
		{"stream-overloaded.jsonl", mockapi.TriggerOverloaded, nil, []string{"CLAUDE_CODE_MAX_RETRIES=2"}, herd.ActivityBlocked},
	}
	for _, r := range runs {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		args := append([]string{"-p", r.prompt, "--output-format", "stream-json", "--verbose"}, r.extra...)
		cmd := exec.CommandContext(ctx, e.agent, args...)
		cmd.Dir = e.proj
		cmd.Env = append(e.env(), r.env...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		cancel()
		if len(out) == 0 {
			t.Errorf("%s: no output (%v): %s", r.file, err, stderr.String())
			continue
		}
		e.keep(r.file, out)
		var last agents.Signal
		retries := 0
		for _, l := range bytes.Split(bytes.TrimSpace(out), []byte("\n")) {
			s := agents.ParseLine(herd.AgentClaude, l, time.Now())
			if s.Event == "system/api_retry" {
				retries++
				if s.Progress {
					t.Errorf("%s: api_retry counted as progress", r.file)
				}
			}
			last = s
		}
		if !last.Final || last.Activity != r.want {
			t.Errorf("%s: last line %+v, want final %q", r.file, last, r.want)
		}
		if r.file == "stream-overloaded.jsonl" && retries == 0 {
			t.Errorf("%s: no api_retry line", r.file)
		}
	}
}

func (e *realEnv) writeFixtures() {
	if os.Getenv("HERD_CAPTURE_FIXTURES") != "1" {
		return
	}
	dir := filepath.Join("testdata", e.kind, e.version)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		e.t.Fatal(err)
	}
	for name, data := range e.files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			e.t.Fatal(err)
		}
	}
	e.t.Logf("wrote %d fixtures to %s", len(e.files), dir)
}

// claudeVersion is the version claude --version prints ("2.1.197").
func claudeVersion(t *testing.T, claude string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, claude, "--version").Output()
	if err != nil {
		t.Fatalf("%s --version: %v", claude, err)
	}
	v, _, _ := strings.Cut(strings.TrimSpace(string(out)), " ")
	if !regexp.MustCompile(`^\d+\.\d+\.\d+$`).MatchString(v) {
		t.Fatalf("%s --version: unexpected %q", claude, out)
	}
	return v
}

func readProc(t *testing.T, pid string) agents.Proc {
	t.Helper()
	comm, err := os.ReadFile("/proc/" + pid + "/comm")
	if err != nil {
		t.Fatal(err)
	}
	cmdline, err := os.ReadFile("/proc/" + pid + "/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	exe, _ := os.Readlink("/proc/" + pid + "/exe")
	n, _ := strconv.Atoi(pid)
	ppid := 0
	if st, err := os.ReadFile("/proc/" + pid + "/stat"); err == nil {
		if i := strings.LastIndexByte(string(st), ')'); i >= 0 {
			if f := strings.Fields(string(st)[i+1:]); len(f) > 1 {
				ppid, _ = strconv.Atoi(f[1])
			}
		}
	}
	return agents.Proc{PID: n, PPID: ppid, Comm: strings.TrimSpace(string(comm)), Argv: strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00"), Exe: exe}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, data, 0o755); err != nil {
		t.Fatal(err)
	}
}

// frames captures the pane every 30 ms for d and returns each distinct
// screen once, in order: the short-lived status lines of a turn's first
// seconds (Gemini's "Executing Hooks") show in some of them. With
// HERD_FRAMES_DIR set, they are written there too, for a person to read.
func (e *realEnv) frames(name string, d time.Duration) []string {
	e.t.Helper()
	var out []string
	seen := map[string]bool{}
	for end := time.Now().Add(d); time.Now().Before(end); {
		if s := e.capture(name); !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
		time.Sleep(30 * time.Millisecond) // capture interval, not a wait for a condition
	}
	if dir := os.Getenv("HERD_FRAMES_DIR"); dir != "" {
		for i, s := range out {
			writeFile(e.t, filepath.Join(dir, fmt.Sprintf("%s-%s-%03d.txt", e.kind, name, i)), s)
		}
	}
	return out
}
