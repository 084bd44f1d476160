package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"herd"
	"herd/internal/api"
	"herd/internal/mockapi"
	"herd/internal/usage"
)

// TestRealCodexUsage runs the real interactive Codex (HERD_REAL_CODEX) in
// tmux under the daemon, with no setup (herd's hooks at launch), against
// internal/mockapi: two turns submitted with `herd inject`, then `herd
// usage --session` equals the running total Codex itself wrote last to
// its rollout (found through the session id its hooks reported), and
// the mock's known figures times the requests it answered.
func TestRealCodexUsage(t *testing.T) {
	codex := os.Getenv("HERD_REAL_CODEX")
	if codex == "" {
		t.Skip("HERD_REAL_CODEX is not set (scripts/real-agents.sh sets it)")
	}
	version, _ := exec.Command(codex, "--version").Output()
	t.Logf("codex: %s", strings.TrimSpace(string(version)))
	z := newZeroSetup(t)
	z.codexConfig(t)
	z.run(t, "cx", []string{"HOME=" + z.home, "MOCK_API_KEY=mock", "TERM=xterm-256color", "LANG=C.UTF-8"},
		codex, "-a", "on-request", "-s", "read-only")
	const name = "cx-0"
	// Its folder trust dialog (a new home: asked) answered whenever it
	// shows, until the prompt.
	z.e.waitFor(name+" idle at its prompt", 90*time.Second, func() bool {
		sc := z.e.capture(name)
		if strings.Contains(sc, "Trust this folder?") {
			z.e.chooseOption(name, "Trust this folder?", "Trust and continue")
			return false
		}
		v, _ := z.e.session(name)
		return v.State == herd.StateRunning && v.Activity == herd.ActivityIdle
	})
	z.turns(t, name, 2)

	// What Codex recorded: the last running total of its rollout.
	rollouts, _ := filepath.Glob(filepath.Join(z.home, ".codex", "sessions", "*", "*", "*", "rollout-*.jsonl"))
	if len(rollouts) != 1 {
		t.Fatalf("expected one rollout under %s, got %v", z.home, rollouts)
	}
	var last map[string]any
	eachJSON(t, rollouts[0], func(m map[string]any) {
		if p, _ := m["payload"].(map[string]any); m["type"] == "event_msg" && p["type"] == "token_count" {
			if info, _ := p["info"].(map[string]any); info != nil && info["total_token_usage"] != nil {
				last, _ = info["total_token_usage"].(map[string]any)
			}
		}
	})
	if last == nil {
		t.Fatalf("expected a token_count with total_token_usage in %s", rollouts[0])
	}
	cached := int64(num(last["cached_input_tokens"]))
	recorded := api.Usage{InputTokens: int64(num(last["input_tokens"])) - cached, CacheReadTokens: cached, OutputTokens: int64(num(last["output_tokens"]))}
	t.Logf("codex recorded in %s: %v -> %+v", filepath.Base(rollouts[0]), last, recorded)
	n := z.answered(t, func(last string) bool { return strings.Contains(last, "Do not answer the request") })
	known := api.Usage{InputTokens: n * (mockapi.OpenAIInputTokens - mockapi.OpenAICachedTokens), CacheReadTokens: n * mockapi.OpenAICachedTokens,
		OutputTokens: n * mockapi.OpenAIOutputTokens}
	if recorded != known {
		t.Errorf("expected Codex to record the mock's figures for its %d answered requests %+v, got %+v", n, known, recorded)
	}
	z.checkUsage(t, name, "gpt-mock", recorded)
}

// TestRealGeminiUsage runs the real interactive Gemini CLI
// (HERD_REAL_GEMINI) in tmux under the daemon, with no setup, against
// internal/mockapi: two turns submitted with `herd inject`, then `herd
// usage --session` equals the tokens Gemini CLI recorded per message in
// its chat file (each message once, however often it was written), and
// the mock's known figures times the requests it answered.
// HERD_CAPTURE_FIXTURES=1 copies the chat file, its paths scrubbed, to
// internal/usage/testdata.
func TestRealGeminiUsage(t *testing.T) {
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
	mustWrite(t, filepath.Join(z.home, ".gemini", "settings.json"), `{"security": {"auth": {"selectedType": "gemini-api-key"}}}`)
	const name, model = "gm-0", "gemini-2.5-flash"
	z.run(t, "gm", []string{"HOME=" + z.home, "GEMINI_API_KEY=mock", "GOOGLE_GEMINI_BASE_URL=http://" + z.addr,
		"GEMINI_CLI_TRUST_WORKSPACE=true", "TERM=xterm-256color", "LANG=C.UTF-8"}, gemini, "-m", model)
	z.e.waitFor(name+" idle at its prompt", 90*time.Second, func() bool {
		v, _ := z.e.session(name)
		return v.State == herd.StateRunning && v.Activity == herd.ActivityIdle
	})
	z.turns(t, name, 2)

	chats, _ := filepath.Glob(filepath.Join(z.home, ".gemini", "tmp", "*", "chats", "session-*.jsonl"))
	if len(chats) != 1 {
		t.Fatalf("expected one chat file under %s, got %v", z.home, chats)
	}
	// What Gemini CLI recorded: each gemini message's tokens, by id (the
	// file repeats a message each time it changes).
	byID := map[string]map[string]any{}
	lines := 0
	eachJSON(t, chats[0], func(m map[string]any) {
		lines++
		if tok, _ := m["tokens"].(map[string]any); m["type"] == "gemini" && tok != nil {
			byID[fmt.Sprint(m["id"])] = tok
		}
	})
	var recorded api.Usage
	for _, tok := range byID {
		cached := int64(num(tok["cached"]))
		recorded = sum(recorded, api.Usage{InputTokens: int64(num(tok["input"])) - cached, CacheReadTokens: cached, OutputTokens: int64(num(tok["output"]))})
	}
	t.Logf("gemini recorded in %s (%d lines, %d messages with tokens): %+v", filepath.Base(chats[0]), lines, len(byID), recorded)
	n := z.answered(t, nil)
	known := api.Usage{InputTokens: n * (mockapi.GeminiPromptTokens - mockapi.GeminiCachedTokens), CacheReadTokens: n * mockapi.GeminiCachedTokens,
		OutputTokens: n * mockapi.GeminiOutputTokens}
	if recorded != known {
		t.Errorf("expected Gemini CLI to record the mock's figures for its %d answered requests %+v, got %+v", n, known, recorded)
	}
	z.checkUsage(t, name, model, recorded)
	if os.Getenv("HERD_CAPTURE_FIXTURES") == "1" {
		data, err := os.ReadFile(chats[0])
		if err != nil {
			t.Fatal(err)
		}
		data = bytes.ReplaceAll(data, []byte(z.root), []byte("/home/user"))
		dst := filepath.Join("..", "internal", "usage", "testdata", "gemini-"+strings.TrimSpace(string(version))+"-chat.jsonl")
		if err := os.WriteFile(dst, data, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("captured %s", dst)
	}
}

// turns submits n prompts with `herd inject`, each waited for to its end
// (an idle hook after it).
func (z *zeroSetup) turns(t *testing.T, name string, n int) {
	t.Helper()
	for i := range n {
		start := time.Now()
		z.submit(t, name, fmt.Sprintf("say hello, turn %d", i))
		z.e.waitFor(fmt.Sprintf("%s idle after turn %d", name, i), 60*time.Second, func() bool {
			return hasEvent(z.e, name, herd.EventActivity, func(ev herd.Event) bool {
				return ev.Time.After(start) && ev.Reason == "hook" && ev.Data["to"] == string(herd.ActivityIdle)
			})
		})
	}
}

// answered counts the requests the mock answered (each with its known
// usage) but those side says are an agent's side requests (Codex 0.171
// asks for a title for the session, quoting the first prompt, and
// records that request's usage nowhere): logged, not counted.
func (z *zeroSetup) answered(t *testing.T, side func(last string) bool) int64 {
	t.Helper()
	var n int64
	for _, r := range z.mock.Records() {
		last := ""
		if len(r.Users) > 0 {
			last = r.Users[len(r.Users)-1]
		}
		aside := side != nil && side(last)
		t.Logf("mock request %s %s status %d, %d users, side %v, last user %q", r.Path, r.Model, r.Status, len(r.Users), aside, clipText(last, 80))
		if r.Status == 200 && !aside {
			n++
		}
	}
	return n
}

func clipText(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// checkUsage checks that herd's usage of session, in its view and in
// `herd usage --session S -o json` (total and by model), equals what the
// agent recorded, priced by the default table.
func (z *zeroSetup) checkUsage(t *testing.T, session, model string, recorded api.Usage) {
	t.Helper()
	if recorded.InputTokens+recorded.OutputTokens == 0 {
		t.Fatalf("expected the agent to record some usage, got %+v", recorded)
	}
	recorded.CostUSD = usage.Prices(usage.DefaultPrices).Cost(usage.Record{Model: model, Tokens: usage.Tokens{
		Input: recorded.InputTokens, Output: recorded.OutputTokens, CacheRead: recorded.CacheReadTokens, CacheWrite: recorded.CacheWriteTokens}})
	z.e.waitUsage(session, recorded)
	rep := z.e.usageReport("--session", session)
	if !sameUsage(rep.Total, recorded) {
		t.Errorf("expected herd usage --session %s to total %+v, got %+v", session, recorded, rep.Total)
	}
	checkLines(t, z.e.usageReport("--session", session, "--by", "model"), map[string]api.Usage{model: recorded})
	out, _ := json.Marshal(rep)
	t.Logf("herd usage --session %s -o json: %s", session, out)
}
