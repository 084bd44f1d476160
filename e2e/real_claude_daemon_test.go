package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"herd"
	"herd/internal/api"
	"herd/internal/mockapi"
)

// TestRealClaudeDaemon runs the real herd daemon supervising the real
// Claude Code (HERD_REAL_CLAUDE names its command; scripts/real-agents.sh
// installs one) against internal/mockapi, with stall_after = 20s:
//
//   - the trust dialog is waiting (startup_prompt) until answered;
//   - an agent idle at its prompt stays idle, never stalled, for 3 x
//     stall_after;
//   - Esc in the middle of a turn ends idle (no hook is sent), never stalled;
//   - inject empties the input line the Esc left the prompt in;
//   - a hung API call (the spinner redrawing every second) is stalled
//     within stall_after and a tick of its last progress;
//   - a command naming .../claude and one naming the claude.exe it links to
//     are both the claude agent: found, read through hooks, resumed with
//     --resume.
func TestRealClaudeDaemon(t *testing.T) {
	claude := os.Getenv("HERD_REAL_CLAUDE")
	if claude == "" {
		t.Skip("HERD_REAL_CLAUDE is not set (scripts/real-agents.sh sets it)")
	}
	hasTmux(t)
	exe, err := filepath.EvalSymlinks(claude)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("claude: %s -> %s", claude, exe)
	const stallAfter = 20 * time.Second
	const tick = time.Second

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

	// Made before the environment, removed after it: the agents write
	// into it until they are gone.
	root := t.TempDir()
	e := newEnv(t, fastRestart+`
[probe]
interval = "1s"
timeout = "2s"
[watchdog]
stall_after = "20s"
stall_repeat = "1h"
liveness_timeout = "1h"
`)
	e.start()
	t.Cleanup(func() {
		// The agents outlive the daemon by design: end them, and wait, so
		// nothing writes into root once it is removed.
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
		t.Errorf("agents still alive after the test: %v", e.agentPIDs())
	})
	launch := func(role, command string) {
		home, proj := filepath.Join(root, role, "home"), filepath.Join(root, role, "proj")
		for _, d := range []string{home, proj} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		// Onboarding done (it would reach api.anthropic.com); the trust
		// and API-key dialogs are left to answer.
		if err := os.WriteFile(filepath.Join(home, ".claude.json"), []byte(`{"hasCompletedOnboarding": true, "theme": "dark"}`), 0o644); err != nil {
			t.Fatal(err)
		}
		e.must("hooks", "install", "--dir", proj)
		args := []string{"run", role, "--workdir", proj}
		for _, kv := range []string{
			"HOME=" + home, "ANTHROPIC_BASE_URL=http://" + ln.Addr().String(), "ANTHROPIC_API_KEY=sk-ant-mock-0123456789abcdefghij",
			"DISABLE_AUTOUPDATER=1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_TELEMETRY=1", "TERM=xterm-256color", "LANG=C.UTF-8",
		} {
			args = append(args, "--env", kv)
		}
		// Newer versions answer permission prompts themselves by default.
		e.must(append(args, "--", command, "--permission-mode", "default")...)
	}
	launch("cc", claude)
	launch("exe", exe)
	for _, r := range roleViews(t, e) {
		if r.Agent != herd.AgentClaude {
			t.Errorf("[%s] command %q: expected agent claude, got %q", r.Name, r.Command[0], r.Agent)
		}
	}

	// Startup: the trust dialog is a person's business, not a stall.
	for _, s := range []string{"cc-0", "exe-0"} {
		e.waitFor(s+" waiting on its trust dialog", 60*time.Second, func() bool {
			v, _ := e.session(s)
			return v.Activity == herd.ActivityWaiting
		})
		if !hasEvent(e, s, herd.EventActivity, func(ev herd.Event) bool { return ev.Reason == "startup_prompt" }) {
			t.Errorf("[%s] expected an activity event with reason startup_prompt", s)
		}
		answerStartup(t, e, s)
	}
	idleSince := map[string]time.Time{}
	for _, s := range []string{"cc-0", "exe-0"} {
		deadline := time.Now().Add(60 * time.Second)
		for {
			v, _ := e.session(s)
			if v.Activity == herd.ActivityIdle && v.State == herd.StateRunning && v.PID != 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("[%s] expected idle at its prompt, got %+v; events:\n%v\nscreen:\n%s", s, v, e.try("events", "--session", s), tmuxCapture(t, e, s))
			}
			time.Sleep(250 * time.Millisecond) // polling interval
		}
		idleSince[s] = time.Now()
	}
	// exe-0 stays at its prompt for the rest of the test.
	checkIdle := func() {
		if v, _ := e.session("exe-0"); v.State != herd.StateRunning || v.Activity != herd.ActivityIdle {
			t.Fatalf("[exe-0] expected to stay running/idle at its prompt, got %s/%s after %s", v.State, v.Activity, time.Since(idleSince["exe-0"]).Round(time.Second))
		}
	}

	// Esc in the middle of a turn: no hook; the screen shows the prompt.
	e.must("inject", "cc-0", "please "+mockapi.TriggerHang+" now")
	waitHung(t, e, mock, 1)
	e.waitFor("cc-0 working", 30*time.Second, func() bool { v, _ := e.session("cc-0"); return v.Activity == herd.ActivityWorking })
	time.Sleep(5 * time.Second) // mid-turn: a quarter of stall_after into the hung call
	escAt := time.Now()
	tmuxKeys(t, e, "cc-0", "Escape")
	e.waitFor("cc-0 idle after Esc", stallAfter, func() bool { v, _ := e.session("cc-0"); return v.Activity == herd.ActivityIdle })
	t.Logf("Esc -> idle: %s", time.Since(escAt).Round(10*time.Millisecond))
	screen := tmuxCapture(t, e, "cc-0")
	leftover := strings.Contains(strings.ReplaceAll(screen, "\u00a0", " "), "please "+mockapi.TriggerHang+" now")
	t.Logf("after Esc the prompt is back in the input line: %v", leftover)

	// Inject empties that input line first.
	before := len(mock.Records())
	e.must("inject", "cc-0", "say hello")
	var prompt string
	e.waitFor("the injected prompt at the API", 30*time.Second, func() bool {
		for _, r := range mock.Records()[before:] {
			if p := typed(r); strings.Contains(p, "say hello") {
				prompt = p
				return true
			}
		}
		return false
	})
	if prompt != "say hello" {
		t.Errorf("[inject] expected the prompt %q alone, got %q", "say hello", prompt)
	}
	e.waitFor("cc-0 idle after the answer", 30*time.Second, func() bool { v, _ := e.session("cc-0"); return v.Activity == herd.ActivityIdle })
	// Idle after Esc and after the answer: never stalled since.
	for end := escAt.Add(stallAfter + 5*time.Second); time.Now().Before(end); {
		checkIdle()
		if v, _ := e.session("cc-0"); v.State != herd.StateRunning || v.Activity != herd.ActivityIdle {
			t.Fatalf("[cc-0] expected running/idle after Esc, got %s/%s", v.State, v.Activity)
		}
		time.Sleep(tick) // sampling the state for a while, not waiting for a condition
	}
	if hasEvent(e, "cc-0", herd.EventStalled, nil) {
		t.Fatalf("[cc-0] stalled although its turn was interrupted")
	}

	// A hung API call: the spinner redraws every second, nothing else.
	e.must("inject", "cc-0", "please "+mockapi.TriggerHang+" again")
	waitHung(t, e, mock, 1)
	hungAt := time.Now()
	v := e.waitState("cc-0", herd.StateStalled, stallAfter+30*time.Second)
	took := time.Since(hungAt)
	var stalled herd.Event
	for _, ev := range e.events("--session", "cc-0", "--kind", herd.EventStalled) {
		stalled = ev
	}
	last, _ := time.Parse(time.RFC3339Nano, fmt.Sprint(stalled.Data["last_activity_at"]))
	gap := stalled.Time.Sub(last)
	t.Logf("hung call -> stalled: %s after the request hung; %s after the last progress (stall_after %s, tick %s); activity %s",
		took.Round(10*time.Millisecond), gap.Round(10*time.Millisecond), stallAfter, tick, v.Activity)
	if gap > stallAfter+2*tick {
		t.Errorf("[hung] expected stalled within stall_after + a tick of the last progress, got %s", gap)
	}
	if took > stallAfter+10*time.Second {
		t.Errorf("[hung] expected stalled within stall_after of the hang (and the spinner's first frames), got %s", took)
	}
	tmuxKeys(t, e, "cc-0", "Escape")
	e.waitFor("cc-0 unstalled by Esc", stallAfter, func() bool { v, _ := e.session("cc-0"); return v.State == herd.StateRunning })

	// exe-0 idle for at least 3 x stall_after in all.
	for time.Since(idleSince["exe-0"]) < 3*stallAfter+tick {
		checkIdle()
		time.Sleep(tick) // sampling the state for a while, not waiting for a condition
	}
	checkIdle()
	if hasEvent(e, "exe-0", herd.EventStalled, nil) {
		t.Errorf("[exe-0] stalled while idle at its prompt")
	}
	t.Logf("exe-0 idle at its prompt for %s, never stalled", time.Since(idleSince["exe-0"]).Round(time.Second))

	t.Logf("screen captures: exe-0 (idle) %d in %s; cc-0 (turns, a hung call, Esc) %d",
		screenCaptures(t, e, "exe-0"), time.Since(idleSince["exe-0"]).Round(time.Second), screenCaptures(t, e, "cc-0"))

	// claude.exe resumes like claude. Claude refuses to resume a session
	// that never had a turn (it exits 1): give it one first.
	before = len(mock.Records())
	e.must("inject", "exe-0", "say hello")
	e.waitFor("exe-0 answered", 30*time.Second, func() bool {
		for _, r := range mock.Records()[before:] {
			if typed(r) == "say hello" && r.Status == 200 {
				return true
			}
		}
		return false
	})
	e.waitFor("exe-0 idle after its turn", 30*time.Second, func() bool { v, _ := e.session("exe-0"); return v.Activity == herd.ActivityIdle })
	e.must("stop", "exe-0")
	e.must("resume", "exe-0")
	var resumed herd.Event
	e.waitFor("exe-0 resumed", 30*time.Second, func() bool {
		evs := e.events("--session", "exe-0", "--kind", herd.EventResumed)
		if len(evs) > 0 {
			resumed = evs[len(evs)-1]
		}
		return len(evs) > 0
	})
	if !strings.Contains(resumed.Message, `"--resume"`) {
		t.Errorf("[exe-0] expected claude.exe resumed with --resume, got %q", resumed.Message)
	}
	e.waitFor("exe-0 resumed and idle", 60*time.Second, func() bool {
		v, _ := e.session("exe-0")
		return v.State == herd.StateRunning && v.Activity == herd.ActivityIdle
	})
	if n := len(e.events("--session", "exe-0", "--kind", herd.EventCrashed)); n != 0 {
		t.Errorf("[exe-0] expected the resumed conversation to run, got %d crash(es):\n%s", n, e.try("events", "--session", "exe-0"))
	}
}

func roleViews(t *testing.T, e *env) []api.RoleView {
	t.Helper()
	var out []api.RoleView
	if err := json.Unmarshal([]byte(e.must("get", "roles", "-o", "json")), &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// typed is what was typed last into the agent: the last line of the last
// user message the mock was sent (the agent's reminders come before it).
func typed(r mockapi.Record) string {
	if len(r.Users) == 0 {
		return ""
	}
	last := strings.TrimRight(r.Users[len(r.Users)-1], "\n")
	return last[strings.LastIndexByte(last, '\n')+1:]
}

func hasEvent(e *env, session, kind string, match func(herd.Event) bool) bool {
	for _, ev := range e.events("--session", session, "--kind", kind) {
		if match == nil || match(ev) {
			return true
		}
	}
	return false
}

func waitHung(t *testing.T, e *env, mock *mockapi.Server, n int) {
	t.Helper()
	e.waitFor("the mock holding a request", 60*time.Second, func() bool { return mock.Hung() >= n })
}

// tmuxRun runs one tmux command on the daemon's private server.
func tmuxRun(t *testing.T, e *env, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "tmux", append([]string{"-u", "-L", e.tmuxSock}, args...)...).Output()
	if err != nil {
		t.Fatalf("tmux %s: %v", strings.Join(args, " "), err)
	}
	return string(out)
}

func tmuxKeys(t *testing.T, e *env, session string, keys ...string) {
	t.Helper()
	tmuxRun(t, e, append([]string{"send-keys", "-t", "=" + session + ":"}, keys...)...)
}

func tmuxCapture(t *testing.T, e *env, session string) string {
	t.Helper()
	return tmuxRun(t, e, "capture-pane", "-p", "-t", "="+session+":")
}

// inputBoxRE is Claude's input box: a rule line, then the prompt mark.
var inputBoxRE = regexp.MustCompile(`(?m)^─{8,}\n❯`)

// answerStartup answers Yes to each startup dialog Claude shows (trust,
// API key), whatever option is preselected, until the input box shows.
// A key sent while a dialog is still drawing is lost: it is sent again
// when the screen has not moved after a while.
func answerStartup(t *testing.T, e *env, session string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	var lastKey time.Time
	var s string
	for time.Now().Before(deadline) {
		s = tmuxCapture(t, e, session)
		dialog := strings.Contains(s, "trust this folder") || strings.Contains(s, "custom API key")
		if !dialog && inputBoxRE.MatchString(s) {
			return
		}
		sel, yes := -1, -1
		for i, l := range strings.Split(s, "\n") {
			text := strings.TrimSpace(strings.ReplaceAll(l, "\u00a0", " "))
			selected := strings.HasPrefix(text, "❯")
			text = strings.TrimSpace(strings.TrimLeft(strings.TrimSpace(strings.TrimPrefix(text, "❯")), "0123456789."))
			if selected && text != "" {
				sel = i
			}
			if yes < 0 && strings.HasPrefix(text, "Yes") {
				yes = i
			}
		}
		if sel >= 0 && yes >= 0 && time.Since(lastKey) > 1500*time.Millisecond {
			switch {
			case sel == yes:
				tmuxKeys(t, e, session, "Enter")
			case sel < yes:
				tmuxKeys(t, e, session, "Down")
			default:
				tmuxKeys(t, e, session, "Up")
			}
			lastKey = time.Now()
		}
		time.Sleep(100 * time.Millisecond) // polling interval
	}
	t.Fatalf("%s: could not answer the startup dialogs:\n%s", session, s)
}
