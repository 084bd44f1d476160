package agents

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
	if k := Infer([]string{gemini}, Resolve(gemini, e.proj)); k != herd.AgentGemini {
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
		{"rate-limit", mockapi.TriggerRateLimit, nil, herd.ActivityBlocked, ReasonRateLimited, false},
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
		var st State
		for _, l := range bytes.Split(bytes.TrimSpace(out), []byte("\n")) {
			st = Apply(st, ParseLine(herd.AgentGemini, l, time.Now()))
		}
		if st.Activity != r.want || st.Reason != r.reason || st.AgentSessionID == "" {
			t.Errorf("%s: stream ended %q/%q id %q, want %q/%q:\n%s", r.name, st.Activity, st.Reason, st.AgentSessionID, r.want, r.reason, out)
		}
		// The hooks, in order, through the activity table.
		var hst State
		ents, _ := os.ReadDir(hooks)
		var events []string
		for _, d := range ents {
			data, err := os.ReadFile(filepath.Join(hooks, d.Name()))
			if err != nil {
				t.Fatal(err)
			}
			s, err := ParseHook(herd.AgentGemini, data, "", time.Now())
			if err != nil {
				t.Errorf("%s: hook %s: %v", r.name, d.Name(), err)
				continue
			}
			events = append(events, s.Event)
			hst = Apply(hst, s)
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
			pats := TranscriptPatterns(herd.AgentGemini, Where{Home: e.home, Cwd: e.proj, SessionID: hst.AgentSessionID})
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
