package e2e

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"herd"
	"herd/internal/agents"
	"herd/internal/api"
)

// claudeLine is an assistant line of a Claude Code transcript.
func claudeLine(id, model string, in, out, cacheRead, cacheWrite int) string {
	return fmt.Sprintf(`{"parentUuid":null,"isSidechain":false,"type":"assistant","timestamp":"%s","message":{"id":%q,"type":"message","role":"assistant","model":%q,"content":[{"type":"text","text":"ok"}],"usage":{"input_tokens":%d,"cache_creation_input_tokens":%d,"cache_read_input_tokens":%d,"output_tokens":%d,"service_tier":"standard"}},"uuid":"u-%s"}`,
		time.Now().UTC().Format(time.RFC3339Nano), id, model, in, cacheWrite, cacheRead, out, id) + "\n"
}

// TestUsageLedger: an agent launched as Claude Code writes a transcript
// with known usage where Claude Code keeps it (CLAUDE_CONFIG_DIR, the
// session id herd gave it): `herd usage` and `get sessions -o json` show
// exactly its tokens, and its cost as the price table figures it; a
// message written over several lines counts once, a garbled line is
// skipped, and a daemon restarted in between recounts nothing.
func TestUsageLedger(t *testing.T) {
	t.Parallel()
	fakes, work, cfgDir, data := t.TempDir(), t.TempDir(), t.TempDir(), t.TempDir()
	batch1 := filepath.Join(data, "batch1")
	batch2 := filepath.Join(data, "batch2")
	flag := filepath.Join(data, "go-on")
	b1 := claudeLine("msg_1", "claude-sonnet-4-5-20250929", 10, 1, 1000, 100) +
		claudeLine("msg_1", "claude-sonnet-4-5-20250929", 10, 25, 1000, 100) + // the same message, its last line
		`{"type":"user","message":{"role":"user","content":"go on"}}` + "\n" +
		claudeLine("msg_2", "claude-opus-4-8", 42, 7, 0, 0) +
		`{"type":"assistant","message":{"usage":{"input_tokens":` + "\n" // garbled
	b2 := claudeLine("msg_3", "claude-sonnet-4-5-20250929", 1000, 500, 0, 0)
	for p, s := range map[string]string{batch1: b1, batch2: b2} {
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	dir := filepath.Join(cfgDir, "projects", agents.ClaudeProjectDir(work))
	script(t, filepath.Join(fakes, "claude"), fmt.Sprintf(`id=
while [ $# -gt 0 ]; do [ "$1" = --session-id ] && id=$2; shift; done
mkdir -p %[1]q
cat %[2]q >> %[1]q/"$id".jsonl
while [ ! -e %[3]q ]; do sleep 0.1; done
cat %[4]q >> %[1]q/"$id".jsonl
exec sleep 300`, dir, batch1, flag, batch2))

	e := newEnv(t, fastRestart+fmt.Sprintf(`
[[role]]
name = "w"
command = [%q]
workdir = %q
runtime = "exec"
env = { CLAUDE_CONFIG_DIR = %q }
`, filepath.Join(fakes, "claude"), work, cfgDir))
	e.extraEnv = append(e.extraEnv, "HERD_USAGE_INTERVAL=100ms")
	e.start()
	e.waitState("w-0", herd.StateRunning, 10*time.Second)

	sonnet := api.Usage{InputTokens: 10, OutputTokens: 25, CacheReadTokens: 1000, CacheWriteTokens: 100}
	sonnet.CostUSD = (10*3 + 25*15 + 1000*0.30 + 100*3.75) / 1e6
	opus := api.Usage{InputTokens: 42, OutputTokens: 7, CostUSD: (42*5 + 7*25) / 1e6}
	e.waitUsage("w-0", sum(sonnet, opus))
	rep := e.usageReport("--by", "model")
	checkLines(t, rep, map[string]api.Usage{"claude-sonnet-4-5-20250929": sonnet, "claude-opus-4-8": opus})
	if !strings.Contains(logText(t, e), "usage: line skipped") {
		t.Errorf("expected the garbled line logged as skipped")
	}

	// A daemon restarted reads on from where the last stopped.
	e.kill(syscall.SIGTERM)
	e.start()
	if err := os.WriteFile(flag, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	more := api.Usage{InputTokens: 1000, OutputTokens: 500, CostUSD: (1000*3 + 500*15) / 1e6}
	sonnet2 := sum(sonnet, more)
	e.waitUsage("w-0", sum(sonnet2, opus))
	checkLines(t, e.usageReport("--by", "model"), map[string]api.Usage{"claude-sonnet-4-5-20250929": sonnet2, "claude-opus-4-8": opus})
	checkLines(t, e.usageReport("--by", "role", "--since", "1h"), map[string]api.Usage{"w": sum(sonnet2, opus)})
	// The account is the agent's config dir (accounts.Of: no account key).
	checkLines(t, e.usageReport("--by", "account"), map[string]api.Usage{cfgDir: sum(sonnet2, opus)})
	checkLines(t, e.usageReport("--by", "day"), map[string]api.Usage{time.Now().UTC().Format(time.DateOnly): sum(sonnet2, opus)})
	checkLines(t, e.usageReport("--role", "nobody"), map[string]api.Usage{})

	table := e.must("usage")
	if !strings.Contains(table, "w-0") || !strings.Contains(table, "SESSION") {
		t.Errorf("expected a table row for w-0, got:\n%s", table)
	}
	wide := e.must("get", "sessions", "-o", "wide")
	if !strings.Contains(wide, "COST") || !strings.Contains(wide, sum(sonnet2, opus).Cost()) {
		t.Errorf("expected a COST column with %s, got:\n%s", sum(sonnet2, opus).Cost(), wide)
	}
	if d := e.must("describe", "session", "w-0"); !strings.Contains(d, "Usage:") || !strings.Contains(d, "input 1052") {
		t.Errorf("expected usage in describe, got:\n%s", d)
	}
}

// waitUsage waits until get sessions -o json shows want as name's usage
// (tokens exactly, cost within 0.1 %).
func (e *env) waitUsage(name string, want api.Usage) {
	e.t.Helper()
	var got api.Usage
	defer func() {
		if e.t.Failed() {
			e.t.Logf("%s: last usage seen %+v", name, got)
		}
	}()
	e.waitFor(fmt.Sprintf("%s's usage to be %+v", name, want), 20*time.Second, func() bool {
		v, ok := e.session(name)
		got = v.Usage
		return ok && sameUsage(got, want)
	})
}

func (e *env) usageReport(args ...string) api.UsageReport {
	e.t.Helper()
	var rep api.UsageReport
	out := e.must(append([]string{"usage", "-o", "json"}, args...)...)
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		e.t.Fatalf("usage -o json: %v: %s", err, out)
	}
	return rep
}

func sum(us ...api.Usage) api.Usage {
	var t api.Usage
	for _, u := range us {
		t.InputTokens += u.InputTokens
		t.OutputTokens += u.OutputTokens
		t.CacheReadTokens += u.CacheReadTokens
		t.CacheWriteTokens += u.CacheWriteTokens
		t.CostUSD += u.CostUSD
	}
	return t
}

// sameUsage: tokens equal, cost within 0.1 %.
func sameUsage(got, want api.Usage) bool {
	g, w := got, want
	g.CostUSD, w.CostUSD = 0, 0
	return g == w && math.Abs(got.CostUSD-want.CostUSD) <= 0.001*want.CostUSD
}

func checkLines(t *testing.T, rep api.UsageReport, want map[string]api.Usage) {
	t.Helper()
	if len(rep.Lines) != len(want) {
		t.Errorf("[by %s] expected %d lines, got %+v", rep.By, len(want), rep.Lines)
	}
	var total api.Usage
	for _, l := range rep.Lines {
		if w, ok := want[l.Key]; !ok || !sameUsage(l.Usage, w) {
			t.Errorf("[by %s] %s: expected %+v, got %+v", rep.By, l.Key, want[l.Key], l.Usage)
		}
		total = sum(total, l.Usage)
	}
	if !sameUsage(rep.Total, total) {
		t.Errorf("[by %s] expected the total %+v, got %+v", rep.By, total, rep.Total)
	}
	if rep.PricesDated == "" {
		t.Errorf("expected the price table's date")
	}
}

func logText(t *testing.T, e *env) string {
	t.Helper()
	b, err := os.ReadFile(e.logPath)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
