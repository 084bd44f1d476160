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

// realTurnsStall is the stall_after of the real-agent turn tests; the
// probe interval is their tick.
const (
	realTurnsStall = 20 * time.Second
	realTurnsTick  = time.Second
)

// TestRealGeminiTurns runs the real Gemini CLI (HERD_REAL_GEMINI) under
// the daemon against internal/mockapi, with herd's hooks and stall_after
// = 20s (see realTurns).
func TestRealGeminiTurns(t *testing.T) {
	gemini := os.Getenv("HERD_REAL_GEMINI")
	if gemini == "" {
		t.Skip("HERD_REAL_GEMINI is not set (scripts/real-agents.sh sets it)")
	}
	hasTmux(t)
	version, _ := exec.Command(gemini, "--version").Output()
	t.Logf("gemini: %s", strings.TrimSpace(string(version)))
	rt := newRealTurns(t)
	if err := os.MkdirAll(filepath.Join(rt.home, ".gemini"), 0o755); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, filepath.Join(rt.home, ".gemini", "settings.json"), `{"security": {"auth": {"selectedType": "gemini-api-key"}}}`)
	rt.e.must("hooks", "install", "--agent", herd.AgentGemini, "--dir", rt.proj)
	// The folder trusted up front: herd's hooks load from a trusted
	// folder's settings only.
	rt.apply(fmt.Sprintf(`[[role]]
name = "gm"
command = [%q, "-m", "gemini-2.5-flash"]
workdir = %q
env = { HOME = %q, GEMINI_API_KEY = "mock", GOOGLE_GEMINI_BASE_URL = %q, GEMINI_CLI_TRUST_WORKSPACE = "true", TERM = "xterm-256color", LANG = "C.UTF-8" }
`, gemini, rt.proj, rt.home, rt.url))
	rt.run("gm-0", herd.AgentGemini)
}

// TestRealCodexTurns is TestRealGeminiTurns with the real Codex
// (HERD_REAL_CODEX); its trust and hooks-review dialogs are answered at
// the pane first.
func TestRealCodexTurns(t *testing.T) {
	codex := os.Getenv("HERD_REAL_CODEX")
	if codex == "" {
		t.Skip("HERD_REAL_CODEX is not set (scripts/real-agents.sh sets it)")
	}
	hasTmux(t)
	version, _ := exec.Command(codex, "--version").Output()
	t.Logf("codex: %s", strings.TrimSpace(string(version)))
	rt := newRealTurns(t)
	if err := os.MkdirAll(filepath.Join(rt.home, ".codex"), 0o755); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, filepath.Join(rt.home, ".codex", "config.toml"), fmt.Sprintf(`model = "gpt-mock"
model_provider = "mock"

[model_providers.mock]
name = "Mock"
base_url = "%s/v1"
env_key = "MOCK_API_KEY"
wire_api = "responses"
`, rt.url))
	rt.e.must("hooks", "install", "--agent", herd.AgentCodex, "--dir", rt.proj)
	rt.apply(fmt.Sprintf(`[[role]]
name = "cx"
command = [%q, "-a", "on-request", "-s", "read-only"]
workdir = %q
env = { HOME = %q, MOCK_API_KEY = "mock", TERM = "xterm-256color", LANG = "C.UTF-8" }
`, codex, rt.proj, rt.home))
	// The trust dialog first (a new home: always asked; the composer may
	// show a moment before it), then each dialog on screen until the
	// prompt shows (the hooks review comes when the hooks load).
	const trustQ = "Trust this folder?"
	rt.e.waitFor("cx-0 at "+trustQ, 60*time.Second, func() bool { return strings.Contains(rt.e.capture("cx-0"), trustQ) })
	rt.e.waitFor("cx-0 past its startup dialogs", 90*time.Second, func() bool {
		sc := rt.e.capture("cx-0")
		for _, d := range [][2]string{{trustQ, "Trust and continue"}, {"Hooks need review", "Trust all and continue"}} {
			if strings.Contains(sc, d[0]) {
				rt.e.chooseOption("cx-0", d[0], d[1])
				return false
			}
		}
		return agents.ClassifyScreen(herd.AgentCodex, sc).Activity == herd.ActivityIdle
	})
	rt.run("cx-0", herd.AgentCodex)
}

// realTurns is one real agent under the daemon, talking to the mock.
type realTurns struct {
	t          *testing.T
	e          *env
	mock       *mockapi.Server
	url        string // the mock's base URL
	home, proj string
}

func newRealTurns(t *testing.T) *realTurns {
	ln, err := mockapi.Listen()
	if err != nil {
		t.Fatal(err)
	}
	rt := &realTurns{t: t, mock: mockapi.New(nil), url: "http://" + ln.Addr().String()}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- rt.mock.Run(ctx, ln) }()
	t.Cleanup(func() {
		rt.mock.Release()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("mock api: %v", err)
		}
	})
	root := t.TempDir()
	rt.home, rt.proj = filepath.Join(root, "home"), filepath.Join(root, "proj")
	for _, d := range []string{rt.home, rt.proj} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	rt.e = newEnv(t, fastRestart+fmt.Sprintf(`
[probe]
interval = %q
timeout = "2s"
[watchdog]
stall_after = %q
stall_repeat = "1h"
liveness_timeout = "1h"
`, realTurnsTick, realTurnsStall))
	rt.e.start()
	t.Cleanup(func() {
		// The agents (and Gemini CLI's relaunched child, Codex's
		// app-server) outlive the daemon: end them, and wait, so nothing
		// writes into root once it is removed.
		_ = exec.Command("tmux", "-L", rt.e.tmuxSock, "kill-server").Run()
		for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); {
			pids := rt.e.agentPIDs()
			if len(pids) == 0 {
				return
			}
			for _, pid := range pids {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
			time.Sleep(100 * time.Millisecond) // polling interval
		}
	})
	return rt
}

func (rt *realTurns) apply(roles string) {
	rt.e.must("apply", "-f", rt.e.writeRoles("roles.toml", roles))
}

// run checks one agent session under the daemon:
//
//   - idle at its prompt for 3 x stall_after, never stalled;
//   - a turn submitted by `herd inject`, five times: each prompt reaches
//     the mock (Gemini CLI once dropped one Enter in three: it reads an
//     Enter within 30 ms of a typed key as a newline);
//   - a hung API call is stalled within stall_after and a tick (plus the
//     slack of one probe and the writer) of the hang's start, never idle
//     on the way (Gemini CLI's "Executing Hooks" line once read as a turn
//     over).
func (rt *realTurns) run(name, kind string) {
	t, e := rt.t, rt.e
	defer func() {
		if t.Failed() {
			t.Logf("screen of %s:\n%s\nmock records: %+v", name, e.capture(name), rt.mock.Records())
		}
		for _, ev := range e.events("--session", name) {
			t.Logf("event %s %s %s %s %v", ev.Time.Format("15:04:05.000"), ev.Kind, ev.Reason, ev.Message, ev.Data)
		}
	}()
	e.waitFor(name+" idle at its prompt", 90*time.Second, func() bool {
		v, _ := e.session(name)
		return v.State == herd.StateRunning && v.Activity == herd.ActivityIdle
	})
	idle := 3 * realTurnsStall
	for end := time.Now().Add(idle); time.Now().Before(end); time.Sleep(realTurnsTick) { // one look per tick
		if v, _ := e.session(name); v.State == herd.StateStalled || v.Activity != herd.ActivityIdle {
			t.Fatalf("[idle] expected idle and not stalled for %v, got %s/%s", idle, v.State, v.Activity)
		}
	}
	t.Logf("%s idle %v at its prompt: never stalled", name, idle)

	for i := range 5 {
		text := fmt.Sprintf("say hello, turn %d", i)
		start := time.Now()
		out := e.must("inject", name, text)
		took := time.Since(start)
		var reached time.Duration
		e.waitFor(fmt.Sprintf("%q at the mock", text), 60*time.Second, func() bool {
			for _, r := range rt.mock.Records() {
				if len(r.Users) > 0 && strings.Contains(r.Users[len(r.Users)-1], text) {
					reached = time.Since(start)
					return true
				}
			}
			return false
		})
		t.Logf("inject %d: %q in %v; at the mock after %v", i, strings.TrimSpace(out), took.Round(time.Millisecond), reached.Round(time.Millisecond))
		// The turn over: an idle activity event after the inject.
		e.waitFor(name+" idle after its turn", 60*time.Second, func() bool {
			for _, ev := range e.events("--session", name, "--kind", herd.EventActivity) {
				if ev.Time.After(start) && strings.Contains(ev.Message, "-> idle") {
					v, _ := e.session(name)
					return v.Activity == herd.ActivityIdle
				}
			}
			return false
		})
	}

	e.must("inject", name, "please "+mockapi.TriggerHang)
	e.waitFor("the mock holding the request", 60*time.Second, func() bool { return rt.mock.Hung() > 0 })
	hung := time.Now()
	var v herd.State
	lastHash := ""
	e.waitFor(name+" stalled", realTurnsStall+30*time.Second, func() bool {
		if sc := e.capture(name); true {
			if h := agents.ClassifyScreen(kind, sc).Hash; h != lastHash {
				t.Logf("screen %v into the hang:\n%s", time.Since(hung).Round(time.Millisecond), agents.Normalize(sc))
				lastHash = h
			}
		}
		s, _ := e.session(name)
		v = s.State
		if s.Activity == herd.ActivityIdle {
			t.Fatalf("[hang] %s read as idle %v into a hung call", name, time.Since(hung).Round(time.Millisecond))
		}
		return v == herd.StateStalled
	})
	took := time.Since(hung)
	var stalled herd.Event
	for _, ev := range e.events("--session", name, "--kind", herd.EventStalled) {
		stalled = ev
	}
	last, _ := time.Parse(time.RFC3339Nano, fmt.Sprint(stalled.Data["last_activity_at"]))
	gap := stalled.Time.Sub(last)
	t.Logf("%s stalled %v after the hang began, %v after its last activity (%v into the hang; stall_after %v, tick %v); transcript last written %v into the hang",
		name, took.Round(time.Millisecond), gap.Round(time.Millisecond), last.Sub(hung).Round(time.Millisecond),
		realTurnsStall, realTurnsTick, rt.newestFile(hung).Round(time.Millisecond))
	if gap > realTurnsStall+2*realTurnsTick {
		t.Errorf("[hang] expected stalled within stall_after + a tick of the last activity, got %v", gap)
	}
	// The agent's own first seconds (hooks, its transcript) are activity.
	if took > realTurnsStall+10*time.Second {
		t.Errorf("[hang] expected stalled within stall_after of the hang and its first seconds, took %v", took)
	}
}

// newestFile returns how long after since the newest file under the
// agent's home was written (its transcripts and logs).
func (rt *realTurns) newestFile(since time.Time) time.Duration {
	var newest time.Time
	filepath.WalkDir(rt.home, func(_ string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if fi, err := d.Info(); err == nil && fi.ModTime().After(newest) {
				newest = fi.ModTime()
			}
		}
		return nil
	})
	return newest.Sub(since)
}

// mustWrite writes a file of the test's, or fails it.
func mustWrite(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestRealGeminiResumeRefused runs the real Gemini CLI under the daemon:
// a turn gives it a conversation, its chats are then lost (as Gemini
// loses them itself, see issue text), and the agent is killed. The crash
// relaunch `gemini -r <id>` is refused (exit 42); herd records `resumed`
// with reason resume_failed and the next launch is the role's command,
// which comes up idle: no loop on the dead id.
func TestRealGeminiResumeRefused(t *testing.T) {
	gemini := os.Getenv("HERD_REAL_GEMINI")
	if gemini == "" {
		t.Skip("HERD_REAL_GEMINI is not set (scripts/real-agents.sh sets it)")
	}
	hasTmux(t)
	rt := newRealTurns(t)
	e := rt.e
	if err := os.MkdirAll(filepath.Join(rt.home, ".gemini"), 0o755); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, filepath.Join(rt.home, ".gemini", "settings.json"), `{"security": {"auth": {"selectedType": "gemini-api-key"}}}`)
	e.must("hooks", "install", "--agent", herd.AgentGemini, "--dir", rt.proj)
	rt.apply(fmt.Sprintf(`[[role]]
name = "gm"
command = [%q, "-m", "gemini-2.5-flash"]
workdir = %q
env = { HOME = %q, GEMINI_API_KEY = "mock", GOOGLE_GEMINI_BASE_URL = %q, GEMINI_CLI_TRUST_WORKSPACE = "true", TERM = "xterm-256color", LANG = "C.UTF-8" }
`, gemini, rt.proj, rt.home, rt.url))
	const name = "gm-0"
	defer func() {
		for _, ev := range e.events("--session", name) {
			t.Logf("event %s %s %s %s", ev.Time.Format("15:04:05.000"), ev.Kind, ev.Reason, ev.Message)
		}
	}()
	e.waitFor(name+" idle at its prompt", 90*time.Second, func() bool {
		v, _ := e.session(name)
		return v.State == herd.StateRunning && v.Activity == herd.ActivityIdle
	})
	e.must("inject", name, "say hello")
	e.eventsOf(name, herd.EventActivity, 3) // working, then idle again
	e.waitFor(name+" idle after its turn", 60*time.Second, func() bool {
		v, _ := e.session(name)
		return v.Activity == herd.ActivityIdle && strings.Contains(e.capture(name), mockapi.ReplyText)
	})
	chats, _ := filepath.Glob(filepath.Join(rt.home, ".gemini", "tmp", "*", "chats", "*"))
	if len(chats) == 0 {
		t.Fatalf("expected Gemini's chat files under %s", rt.home)
	}
	for _, c := range chats {
		if err := os.Remove(c); err != nil {
			t.Fatal(err)
		}
	}
	v, _ := e.session(name)
	if err := syscall.Kill(v.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var refused []herd.Event
	e.waitFor(name+" resume_failed", 90*time.Second, func() bool {
		refused = eventsOf(e.events("--session", name), herd.EventResumed, herd.ReasonResumeFailed)
		return len(refused) > 0
	})
	t.Logf("refused: %s", refused[0].Message)
	e.waitFor(name+" fresh and idle", 90*time.Second, func() bool {
		v, _ := e.session(name)
		return v.State == herd.StateRunning && v.Activity == herd.ActivityIdle
	})
	var launches []string
	for _, ev := range e.events("--session", name) {
		if ev.Kind == herd.EventSpawned || ev.Kind == herd.EventRestarted {
			launches = append(launches, fmt.Sprint(ev.Data["argv"]))
		}
	}
	if n := len(launches); n != 3 || !strings.Contains(launches[1], " -r ") || strings.Contains(launches[2], " -r ") {
		t.Errorf("expected a launch, one resume, then the role's command, got %q", launches)
	}
}
