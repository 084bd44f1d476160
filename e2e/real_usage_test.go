package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"herd"
	"herd/internal/api"
	"herd/internal/mockapi"
	"herd/internal/usage"
)

// TestRealClaudeUsage runs the real Claude Code (HERD_REAL_CLAUDE) under
// the daemon against internal/mockapi, headless with stream-json output
// (exec runtime): `herd usage` equals what Claude Code itself reports —
// its stream's result (tokens per model, total_cost_usd) — and the
// transcript it wrote holds the same tokens.
func TestRealClaudeUsage(t *testing.T) {
	claude := os.Getenv("HERD_REAL_CLAUDE")
	if claude == "" {
		t.Skip("HERD_REAL_CLAUDE is not set (scripts/real-agents.sh sets it)")
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
		mock.Release()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("mock api: %v", err)
		}
	})
	root := t.TempDir()
	home, proj := filepath.Join(root, "home"), filepath.Join(root, "proj")
	for _, d := range []string{home, proj} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(home, ".claude.json"), []byte(`{"hasCompletedOnboarding": true, "theme": "dark"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, fastRestart)
	e.extraEnv = append(e.extraEnv, "HERD_USAGE_INTERVAL=200ms")
	e.start()
	args := []string{"run", "u", "--runtime", "exec", "--restart", "never", "--workdir", proj}
	for _, kv := range []string{
		"HOME=" + home, "ANTHROPIC_BASE_URL=http://" + ln.Addr().String(), "ANTHROPIC_API_KEY=sk-ant-mock-0123456789abcdefghij",
		"DISABLE_AUTOUPDATER=1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_TELEMETRY=1", "LANG=C.UTF-8",
	} {
		args = append(args, "--env", kv)
	}
	e.must(append(args, "--", claude, "-p", "say hello", "--output-format", "stream-json", "--verbose")...)
	e.waitState("u-0", herd.StateSucceeded, 90*time.Second)

	// What Claude Code reported on its stdout.
	v, _ := e.session("u-0")
	stdout := filepath.Join(e.dir, "logs", "u-0", v.Incarnation+".stdout")
	reported := map[string]api.Usage{}
	var reportedCost float64
	eachJSON(t, stdout, func(m map[string]any) {
		if m["type"] != "result" {
			return
		}
		reportedCost += num(m["total_cost_usd"])
		mu, _ := m["modelUsage"].(map[string]any)
		for model, raw := range mu {
			u, _ := raw.(map[string]any)
			reported[usage.NormalModel(model)] = sum(reported[usage.NormalModel(model)], api.Usage{
				InputTokens: int64(num(u["inputTokens"])), OutputTokens: int64(num(u["outputTokens"])),
				CacheReadTokens: int64(num(u["cacheReadInputTokens"])), CacheWriteTokens: int64(num(u["cacheCreationInputTokens"])),
				CostUSD: num(u["costUSD"]),
			})
		}
	})
	if len(reported) == 0 {
		t.Fatalf("expected a result with modelUsage on Claude Code's stdout %s", stdout)
	}
	var all api.Usage
	for _, u := range reported {
		all = sum(all, u)
	}
	if !sameUsage(api.Usage{CostUSD: all.CostUSD}, api.Usage{CostUSD: reportedCost}) {
		t.Errorf("expected modelUsage's costs to add up to total_cost_usd %v, got %v", reportedCost, all.CostUSD)
	}
	e.waitUsage("u-0", all)
	checkLines(t, e.usageReport("--by", "model"), reported)
	t.Logf("claude reported %+v (total_cost_usd %v); herd usage agrees", reported, reportedCost)

	// The transcript Claude Code wrote for the same run, read as the
	// ledger reads it.
	var transcript string
	filepath.WalkDir(filepath.Join(home, ".claude", "projects"), func(p string, d os.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(p, ".jsonl") {
			transcript = p
		}
		return nil
	})
	if transcript == "" {
		t.Fatalf("expected Claude Code's transcript under %s", home)
	}
	var st usage.State
	fromTranscript := map[string]usage.Tokens{}
	eachLine(t, transcript, func(line []byte) {
		recs, err := usage.ParseLine(usage.ClaudeTranscript, line, &st)
		if err != nil {
			t.Errorf("transcript line unreadable: %v", err)
		}
		for _, r := range recs {
			fromTranscript[r.Model] = fromTranscript[r.Model].Add(r.Tokens)
		}
	})
	t.Logf("transcript %s: %+v", filepath.Base(transcript), fromTranscript)
	for model, u := range reported {
		tr := fromTranscript[model]
		if tr.Input != u.InputTokens || tr.CacheRead != u.CacheReadTokens || tr.CacheWrite != u.CacheWriteTokens {
			t.Errorf("[%s] expected the transcript's input and cache tokens to equal the stream's %+v, got %+v", model, u, tr)
		}
	}
}

func num(v any) float64 {
	f, _ := v.(float64)
	return f
}

func eachLine(t *testing.T, path string, fn func([]byte)) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		if len(strings.TrimSpace(sc.Text())) > 0 {
			fn(sc.Bytes())
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
}

func eachJSON(t *testing.T, path string, fn func(map[string]any)) {
	t.Helper()
	eachLine(t, path, func(b []byte) {
		var m map[string]any
		if json.Unmarshal(b, &m) == nil {
			fn(m)
		}
	})
}
