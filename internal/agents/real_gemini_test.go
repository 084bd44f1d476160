package agents_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"herd"
	"herd/internal/agents"
	"herd/internal/mockapi"
)

// TestRealGemini runs the real Gemini CLI headless (`gemini -p … -o
// stream-json`) against the mock's Gemini API, with herd's hooks
// installed in the project. It runs only when HERD_REAL_GEMINI names a
// gemini command; with HERD_CAPTURE_FIXTURES=1 it rewrites
// testdata/gemini/<version>.
func TestRealGemini(t *testing.T) {
	gemini := os.Getenv("HERD_REAL_GEMINI")
	if gemini == "" {
		t.Skip("HERD_REAL_GEMINI is not set (scripts/real-agents.sh sets it)")
	}
	e := newRealEnv(t, herd.AgentGemini, gemini)
	e.version = geminiVersion(t, gemini, e.env())
	t.Logf("gemini %s", e.version)
	if k := agents.Infer([]string{gemini}, agents.Resolve(gemini, e.proj)); k != herd.AgentGemini {
		t.Errorf("Infer(%s) = %q, want gemini", gemini, k)
	}
	runs := []struct {
		name, prompt string
		extra        []string
		want         herd.Activity
		reason       string
		hooks        bool // keep its hook payloads as fixtures
	}{
		{"ok", "say hello", nil, herd.ActivityIdle, "", true},
		{"tool", "run the " + mockapi.TriggerTool, []string{"--yolo"}, herd.ActivityIdle, "", true},
		{"rate-limit", mockapi.TriggerRateLimit, nil, herd.ActivityBlocked, agents.ReasonRateLimited, false},
		// Not run: a 503 is retried ten times over about 3.5 minutes
		// (0.61.0), a BeforeModel hook each time, before the error result.
	}
	for _, r := range runs {
		hooks := filepath.Join(e.hooks, r.name)
		if err := os.MkdirAll(hooks, 0o755); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
		// A model named: "auto" would first ask a router model for JSON.
		args := append([]string{"-m", "gemini-2.5-flash", "-p", r.prompt, "-o", "stream-json"}, r.extra...)
		cmd := exec.CommandContext(ctx, gemini, args...)
		cmd.Dir = e.proj
		cmd.Env = append(e.env(), hookDumpEnv+"="+hooks)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		start := time.Now()
		out, _ := cmd.Output()
		cancel()
		t.Logf("%s: %d bytes in %v", r.name, len(out), time.Since(start).Round(time.Millisecond))
		if len(out) == 0 {
			t.Errorf("%s: no output: %s", r.name, stderr.String())
			continue
		}
		e.keep("stream-"+r.name+".jsonl", out)
		var st agents.State
		for _, l := range bytes.Split(bytes.TrimSpace(out), []byte("\n")) {
			st = agents.Apply(st, agents.ParseLine(herd.AgentGemini, l, time.Now()))
		}
		if st.Activity != r.want || st.Reason != r.reason || st.AgentSessionID == "" {
			t.Errorf("%s: stream ended %q/%q id %q, want %q/%q:\n%s", r.name, st.Activity, st.Reason, st.AgentSessionID, r.want, r.reason, out)
		}
		// The hooks, in order, through the activity table.
		var hst agents.State
		ents, _ := os.ReadDir(hooks)
		var events []string
		for _, d := range ents {
			data, err := os.ReadFile(filepath.Join(hooks, d.Name()))
			if err != nil {
				t.Fatal(err)
			}
			s, err := agents.ParseHook(herd.AgentGemini, data, "", time.Now())
			if err != nil {
				t.Errorf("%s: hook %s: %v", r.name, d.Name(), err)
				continue
			}
			events = append(events, s.Event)
			hst = agents.Apply(hst, s)
			name := "hook-" + strings.ToLower(s.Event) + ".json"
			if _, seen := e.files[name]; r.hooks && !seen {
				e.keep(name, data)
			}
		}
		t.Logf("%s: hooks %v", r.name, events)
		if r.hooks && (hst.Activity != herd.ActivityIdle || !hst.Ended || hst.AgentSessionID != st.AgentSessionID) {
			t.Errorf("%s: hooks ended in %+v, want idle, ended, id %s", r.name, hst, st.AgentSessionID)
		}
		if r.hooks && hst.TranscriptPath != "" {
			pats := agents.TranscriptPatterns(herd.AgentGemini, agents.Where{Home: e.home, Cwd: e.proj, SessionID: hst.AgentSessionID})
			if m, _ := filepath.Match(pats[0], hst.TranscriptPath); !m {
				t.Errorf("%s: transcript %s not matched by %s", r.name, hst.TranscriptPath, pats[0])
			}
		}
	}
	if _, err := os.Stat(filepath.Join(e.proj, mockapi.ToolMarker)); err != nil {
		t.Errorf("the tool did not run: %v", err)
	}
	e.writeFixtures()
}

// geminiVersion is the version `gemini --version` prints ("0.61.0").
func geminiVersion(t *testing.T, gemini string, env []string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, gemini, "--version")
	cmd.Env = env
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s --version: %v", gemini, err)
	}
	f := strings.Fields(string(out))
	if len(f) == 0 {
		t.Fatalf("%s --version: empty", gemini)
	}
	return f[len(f)-1]
}

// TestRealGeminiTUI drives the interactive Gemini CLI in a private tmux
// server against the mock, with herd's hooks installed: trust dialog,
// idle prompt, a turn, a hung request, Esc, a permission dialog, quit and
// resume. It runs when HERD_REAL_GEMINI names a gemini command; with
// HERD_CAPTURE_FIXTURES=1 it writes the screens and hook payloads to
// testdata/gemini/<version>.
func TestRealGeminiTUI(t *testing.T) {
	gemini := os.Getenv("HERD_REAL_GEMINI")
	if gemini == "" {
		t.Skip("HERD_REAL_GEMINI is not set (scripts/real-agents.sh sets it)")
	}
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("tmux is not installed")
	}
	e := newRealEnv(t, herd.AgentGemini, gemini)
	// The trust dialog is what this run is after.
	e.env1 = slicesDelete(e.env1, "GEMINI_CLI_TRUST_WORKSPACE=true")
	e.version = geminiVersion(t, gemini, e.env())
	resolved := agents.Resolve(gemini, e.proj)
	argv, _ := agents.LaunchArgv(herd.AgentGemini, []string{gemini, "-m", "gemini-2.5-flash"}, resolved, nil)
	pane := "gemini"
	e.start(pane, argv)

	const trustQ = "Do you trust the files in this folder?"
	trust := e.waitScreen(pane, "trust dialog", func(s string) bool { return strings.Contains(s, trustQ) })
	e.expectScreen("screen-trust.txt", trust, herd.ActivityWaiting, agents.ReasonStartupPrompt)
	tree := paneTree(t, strings.TrimSpace(e.mustTmux("display-message", "-p", "-t", "="+pane+":", "#{pane_pid}")))
	if i, _ := agents.Pick([]string{"gemini"}, tree); i < 0 {
		t.Errorf("Pick found no gemini in %+v", tree)
	}
	e.choose(pane, trustQ, "Trust folder")
	e.waitScreen(pane, "idle prompt", func(s string) bool { return agents.ClassifyScreen(herd.AgentGemini, s).Activity == herd.ActivityIdle })
	// The project's settings (herd's hooks) load at start: go on in a
	// second session, started in the now trusted folder.
	e.command(pane, "/quit", "To resume this session")
	pane = "gemini2"
	e.start(pane, argv)
	idle := e.waitScreen(pane, "idle prompt", func(s string) bool { return agents.ClassifyScreen(herd.AgentGemini, s).Activity == herd.ActivityIdle })
	e.expectScreen("screen-idle.txt", idle, herd.ActivityIdle, "")

	e.typeLine(pane, "say hello")
	stop := e.expectHook("hook-tui-afteragent.json", e.waitHook(agents.GeminiAfterAgent, 1, 30*time.Second), herd.ActivityIdle)
	id := stop.AgentSessionID
	after := e.waitScreen(pane, "answer", func(s string) bool {
		return strings.Contains(s, mockapi.ReplyText) && agents.ClassifyScreen(herd.AgentGemini, s).Activity == herd.ActivityIdle
	})
	e.expectScreen("screen-after-turn.txt", after, herd.ActivityIdle, "")

	e.typeLine(pane, "please "+mockapi.TriggerHang)
	// The turn's first seconds: hooks run ("Executing Hooks") above a
	// visible input prompt; the turn runs all the same.
	hooksShown, running := false, false
	for i, f := range e.frames(pane, 6*time.Second) {
		sc := agents.ClassifyScreen(herd.AgentGemini, f)
		running = running || sc.Running && strings.Contains(f, "please "+mockapi.TriggerHang+"\n")
		if running && sc.Activity == herd.ActivityIdle && strings.Contains(f, "Executing Hook") {
			t.Errorf("frame %d of the hung turn classified idle while hooks run:\n%s", i, f)
		}
		if !hooksShown && strings.Contains(f, "Executing Hook") && strings.Contains(f, "please "+mockapi.TriggerHang+"\n") &&
			strings.Contains(f, "Type your message") {
			// The prompt is in the history, the input line empty again.
			e.expectScreen("screen-hooks-running.txt", f, herd.ActivityWorking, "")
			hooksShown = true
		}
	}
	if !hooksShown {
		t.Logf("no frame of the hung turn's first seconds showed Executing Hooks")
	}
	deadline := time.Now().Add(30 * time.Second)
	for e.mock.Hung() == 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond) // polling interval
	}
	if e.mock.Hung() == 0 {
		t.Fatal("the mock never held a request")
	}
	wa := e.waitScreen(pane, "working", func(s string) bool { return agents.ClassifyScreen(herd.AgentGemini, s).Running })
	wb := e.waitScreen(pane, "working redraw", func(s string) bool { return s != wa && agents.ClassifyScreen(herd.AgentGemini, s).Running })
	a := e.expectScreen("screen-working-a.txt", wa, herd.ActivityWorking, "")
	b := e.expectScreen("screen-working-b.txt", wb, herd.ActivityWorking, "")
	if a.Hash != b.Hash {
		t.Errorf("a redraw of the hung turn changed the normalised screen:\n%s\n---\n%s", agents.Normalize(wa), agents.Normalize(wb))
	}
	e.keys(pane, "Escape")
	esc := e.waitScreen(pane, "after esc", func(s string) bool {
		return strings.Contains(s, "cancelled") && agents.ClassifyScreen(herd.AgentGemini, s).Activity == herd.ActivityIdle
	})
	e.expectScreen("screen-after-esc.txt", esc, herd.ActivityIdle, "")

	e.typeLine(pane, "run the "+mockapi.TriggerTool)
	perm := e.waitScreen(pane, "permission dialog", func(s string) bool { return strings.Contains(s, "Allow execution") })
	e.expectScreen("screen-permission.txt", perm, herd.ActivityWaiting, agents.ReasonPermission)
	if n, ok := e.findHookWith(agents.HookNotification, "ToolPermission", 10*time.Second); ok {
		e.expectHook("hook-notification-permission.json", n, herd.ActivityWaiting)
	} else {
		t.Logf("no Notification hook for the permission dialog (seen: %v)", e.hookFiles())
	}
	e.keys(pane, "Enter")
	e.waitScreen(pane, "tool ran", func(s string) bool {
		_, err := os.Stat(filepath.Join(e.proj, mockapi.ToolMarker))
		return err == nil && agents.ClassifyScreen(herd.AgentGemini, s).Activity == herd.ActivityIdle
	})

	e.command(pane, "/quit", "--resume "+id)
	rargv, ok := agents.ResumeCommand(herd.AgentGemini, argv, resolved, id)
	if !ok {
		t.Fatalf("ResumeCommand(%q) refused", argv)
	}
	e.start("resumed", rargv)
	resumed := e.waitScreen("resumed", "resumed", func(s string) bool {
		return strings.Contains(s, "say hello") && agents.ClassifyScreen(herd.AgentGemini, s).Activity == herd.ActivityIdle
	})
	e.expectScreen("screen-resumed.txt", resumed, herd.ActivityIdle, "")
	e.writeFixtures()
}

// command types a slash command and Enter until the screen shows marker:
// keys typed while the interface is busy are sometimes lost.
func (e *realEnv) command(pane, cmd, marker string) {
	e.t.Helper()
	deadline := time.Now().Add(45 * time.Second)
	var s string
	for time.Now().Before(deadline) {
		e.mustTmux("send-keys", "-t", "="+pane+":", "-l", cmd)
		typed := time.Now().Add(3 * time.Second)
		for time.Now().Before(typed) && !strings.Contains(s, cmd) {
			s = e.capture(pane)
			time.Sleep(100 * time.Millisecond) // polling interval
		}
		// Gemini CLI reads keys that follow each other closely as a
		// paste, where Enter is a new line; nothing on screen tells when
		// that window closes.
		time.Sleep(time.Second)
		e.keys(pane, "Enter")
		done := time.Now().Add(5 * time.Second)
		for time.Now().Before(done) {
			if s = e.capture(pane); strings.Contains(s, marker) {
				return
			}
			time.Sleep(100 * time.Millisecond) // polling interval
		}
		for range 8 {
			e.keys(pane, "BSpace")
		}
	}
	e.t.Fatalf("%s: %q never shown; screen:\n%s", cmd, marker, s)
}

// findHookWith waits up to within for a payload of event holding text.
func (e *realEnv) findHookWith(event, text string, within time.Duration) ([]byte, bool) {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		for _, f := range e.hookFiles() {
			if strings.HasSuffix(f, "-"+event+".json") {
				b, err := os.ReadFile(filepath.Join(e.hooks, f))
				if err == nil && bytes.Contains(b, []byte(text)) {
					return b, true
				}
			}
		}
		time.Sleep(50 * time.Millisecond) // polling interval
	}
	return nil, false
}

func slicesDelete(s []string, v string) []string {
	var out []string
	for _, x := range s {
		if x != v {
			out = append(out, x)
		}
	}
	return out
}
