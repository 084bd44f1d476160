package usage

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"herd/internal/config"
)

// parseAll feeds lines to one State and sums what they add per model.
func parseAll(t *testing.T, f Format, st *State, lines ...string) (map[string]Tokens, map[string]float64) {
	t.Helper()
	tok, cost := map[string]Tokens{}, map[string]float64{}
	for _, l := range lines {
		recs, err := ParseLine(f, []byte(l), st)
		if err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		for _, r := range recs {
			tok[r.Model] = tok[r.Model].Add(r.Tokens)
			if r.HasCost {
				cost[r.Model] += r.Cost
			}
		}
	}
	return tok, cost
}

const (
	claudeA1 = `{"type":"assistant","timestamp":"2026-11-20T10:00:00.000Z","message":{"id":"msg_a","model":"claude-sonnet-4-5-20250929","usage":{"input_tokens":10,"cache_creation_input_tokens":100,"cache_read_input_tokens":1000,"output_tokens":1}}}`
	claudeA2 = `{"type":"assistant","timestamp":"2026-11-20T10:00:01.000Z","message":{"id":"msg_a","model":"claude-sonnet-4-5-20250929","usage":{"input_tokens":10,"cache_creation_input_tokens":100,"cache_read_input_tokens":1000,"output_tokens":1}}}`
	claudeA3 = `{"type":"assistant","timestamp":"2026-11-20T10:00:02.000Z","message":{"id":"msg_a","model":"claude-sonnet-4-5-20250929","usage":{"input_tokens":10,"cache_creation_input_tokens":100,"cache_read_input_tokens":1000,"output_tokens":50}}}`
	claudeB  = `{"type":"assistant","message":{"id":"msg_b","model":"claude-opus-4-8","usage":{"input_tokens":5,"output_tokens":7}}}`
	claudeU  = `{"type":"user","message":{"role":"user","content":"hi"}}`
	claudeS  = `{"type":"assistant","message":{"id":"msg_s","model":"<synthetic>","usage":{"input_tokens":0,"output_tokens":0}}}`
)

func TestClaudeTranscript(t *testing.T) {
	sonnet := "claude-sonnet-4-5-20250929"
	for _, tc := range []struct {
		name  string
		lines []string
		want  map[string]Tokens
	}{
		{"one line", []string{claudeA1}, map[string]Tokens{sonnet: {10, 1, 1000, 100}}},
		{"a message over several lines counts once", []string{claudeA1, claudeA2}, map[string]Tokens{sonnet: {10, 1, 1000, 100}}},
		{"a later line with more output adds the rest", []string{claudeA1, claudeA2, claudeA3}, map[string]Tokens{sonnet: {10, 50, 1000, 100}}},
		{"two models", []string{claudeA1, claudeU, claudeB}, map[string]Tokens{sonnet: {10, 1, 1000, 100}, "claude-opus-4-8": {5, 7, 0, 0}}},
		{"user and synthetic lines add nothing", []string{claudeU, claudeS}, map[string]Tokens{}},
		{"a message interleaved with another still counts once", []string{claudeA1, claudeB, claudeA2}, map[string]Tokens{sonnet: {10, 1, 1000, 100}, "claude-opus-4-8": {5, 7, 0, 0}}},
	} {
		got, _ := parseAll(t, ClaudeTranscript, &State{}, tc.lines...)
		if d := cmp.Diff(tc.want, got); d != "" {
			t.Errorf("[%s] tokens (-expected +got):\n%s", tc.name, d)
		}
	}
}

func TestClaudeTranscriptStateCarriesOver(t *testing.T) {
	// A daemon that stopped between two lines of one message resumes with
	// the state it kept: the message is not counted twice.
	var st State
	parseAll(t, ClaudeTranscript, &st, claudeA1)
	got, _ := parseAll(t, ClaudeTranscript, &st, claudeA2, claudeA3)
	if want := (map[string]Tokens{"claude-sonnet-4-5-20250929": {0, 49, 0, 0}}); !cmp.Equal(want, got) {
		t.Errorf("expected only the further output %v, got %v", want, got)
	}
}

func TestRecentIsBounded(t *testing.T) {
	var st State
	for i := range 3 * maxRecent {
		l := strings.Replace(claudeB, "msg_b", "msg_"+strings.Repeat("x", i+1), 1)
		parseAll(t, ClaudeTranscript, &st, l)
	}
	if len(st.Recent) != maxRecent {
		t.Errorf("expected %d recent ids kept, got %d", maxRecent, len(st.Recent))
	}
}

func TestCodexRollout(t *testing.T) {
	ctx := `{"timestamp":"2026-11-20T10:00:00Z","type":"turn_context","payload":{"cwd":"/x","model":"gpt-5-codex"}}`
	tc1 := `{"timestamp":"2026-11-20T10:00:01Z","type":"event_msg","payload":{"type":"token_count","info":{"total_token_usage":{"input_tokens":1000,"cached_input_tokens":400,"output_tokens":50,"reasoning_output_tokens":20,"total_tokens":1050},"last_token_usage":{"input_tokens":1000,"cached_input_tokens":400,"output_tokens":50}}}}`
	tc2 := `{"timestamp":"2026-11-20T10:00:02Z","type":"event_msg","payload":{"type":"token_count","info":{"total_token_usage":{"input_tokens":2500,"cached_input_tokens":1400,"output_tokens":80,"reasoning_output_tokens":20,"total_tokens":2580}}}}`
	null := `{"timestamp":"2026-11-20T10:00:00Z","type":"event_msg","payload":{"type":"token_count","info":null,"rate_limits":{}}}`
	got, _ := parseAll(t, CodexRollout, &State{}, null, ctx, tc1, tc1, tc2)
	want := map[string]Tokens{"gpt-5-codex": {Input: 1100, Output: 80, CacheRead: 1400}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("codex rollout (-expected +got):\n%s", d)
	}
}

func TestStream(t *testing.T) {
	claudeInit := `{"type":"system","subtype":"init","model":"claude-opus-4-8[1m]"}`
	claudeAssistant := `{"type":"assistant","message":{"id":"m","model":"claude-opus-4-8","usage":{"input_tokens":42,"output_tokens":1}}}`
	claudeRes := `{"type":"result","subtype":"success","total_cost_usd":0.000385,"usage":{"input_tokens":42,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":7},"modelUsage":{"claude-opus-4-8[1m]":{"inputTokens":42,"outputTokens":7,"cacheReadInputTokens":0,"cacheCreationInputTokens":0,"costUSD":0.000385}}}`
	claudeRes2 := `{"type":"result","total_cost_usd":0.001,"modelUsage":{"claude-opus-4-8[1m]":{"inputTokens":100,"outputTokens":20,"costUSD":0.001}}}`
	claudeNoModel := `{"type":"result","total_cost_usd":0.5,"usage":{"input_tokens":3,"output_tokens":4,"cache_read_input_tokens":5,"cache_creation_input_tokens":6}}`
	codexRes := `{"type":"turn.completed","usage":{"input_tokens":42,"cached_input_tokens":2,"cache_write_input_tokens":0,"output_tokens":7,"reasoning_output_tokens":0}}`
	geminiInit := `{"type":"init","timestamp":"2026-11-22T16:30:08.690Z","session_id":"a","model":"gemini-2.5-flash"}`
	geminiRes := `{"type":"result","timestamp":"2026-11-22T16:30:08.797Z","status":"success","stats":{"total_tokens":49,"input_tokens":42,"output_tokens":7,"cached":0,"input":42,"models":{"gemini-mock":{"total_tokens":49,"input_tokens":42,"output_tokens":7,"cached":2,"input":40}}}}`
	geminiNoModels := `{"type":"result","stats":{"input_tokens":42,"output_tokens":7,"cached":0}}`
	for _, tc := range []struct {
		name     string
		model    string // State.Model from the command line
		lines    []string
		want     map[string]Tokens
		wantCost map[string]float64
	}{
		{"claude result wins over its assistant lines", "", []string{claudeInit, claudeAssistant, claudeRes},
			map[string]Tokens{"claude-opus-4-8": {42, 7, 0, 0}}, map[string]float64{"claude-opus-4-8": 0.000385}},
		{"claude running totals add their growth", "", []string{claudeRes, claudeRes2},
			map[string]Tokens{"claude-opus-4-8": {100, 20, 0, 0}}, map[string]float64{"claude-opus-4-8": 0.001}},
		{"claude result without modelUsage takes the init model", "", []string{claudeInit, claudeNoModel},
			map[string]Tokens{"claude-opus-4-8": {3, 4, 5, 6}}, map[string]float64{"claude-opus-4-8": 0.5}},
		{"codex turn.completed under the command line's model", "gpt-5", []string{codexRes},
			map[string]Tokens{"gpt-5": {40, 7, 2, 0}}, map[string]float64{}},
		{"codex without a model", "", []string{codexRes},
			map[string]Tokens{UnknownModel: {40, 7, 2, 0}}, map[string]float64{}},
		{"gemini result per model", "", []string{geminiInit, geminiRes},
			map[string]Tokens{"gemini-mock": {40, 7, 2, 0}}, map[string]float64{}},
		{"gemini result without models takes the init model", "", []string{geminiInit, geminiNoModels},
			map[string]Tokens{"gemini-2.5-flash": {42, 7, 0, 0}}, map[string]float64{}},
	} {
		got, cost := parseAll(t, Stream, &State{Model: tc.model}, tc.lines...)
		if d := cmp.Diff(tc.want, got); d != "" {
			t.Errorf("[%s] tokens (-expected +got):\n%s", tc.name, d)
		}
		if d := cmp.Diff(tc.wantCost, cost, cmp.Comparer(func(a, b float64) bool { return math.Abs(a-b) < 1e-12 })); d != "" {
			t.Errorf("[%s] cost (-expected +got):\n%s", tc.name, d)
		}
	}
}

func TestGarbled(t *testing.T) {
	for _, f := range []Format{ClaudeTranscript, CodexRollout, Stream} {
		st := State{Model: "m"}
		for _, l := range []string{`{"type":"assistant","message":`, `not json`, ``, `[1,2]`} {
			_, err := ParseLine(f, []byte(l), &st)
			if !errors.Is(err, ErrGarbled) {
				t.Errorf("[%s %q] expected ErrGarbled, got %v", f, l, err)
			}
		}
		if st.Model != "m" || st.Seen != nil || st.Recent != nil {
			t.Errorf("[%s] a garbled line changed the state: %+v", f, st)
		}
	}
	// Wrong types inside an object are garbled too, not a crash.
	if _, err := ParseLine(ClaudeTranscript, []byte(`{"type":"assistant","message":{"usage":{"input_tokens":"many"}}}`), &State{}); !errors.Is(err, ErrGarbled) {
		t.Errorf("expected ErrGarbled for a string count, got %v", err)
	}
}

func TestTimestamps(t *testing.T) {
	recs, err := ParseLine(ClaudeTranscript, []byte(claudeA1), &State{})
	if err != nil || len(recs) != 1 {
		t.Fatalf("expected one record, got %v %v", recs, err)
	}
	if want := time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC); !recs[0].At.Equal(want) {
		t.Errorf("expected at %v, got %v", want, recs[0].At)
	}
}

// TestCapturedFixtures reads the stream outputs captured from the real
// agents against the mock APIs when every response carried 42 input and
// 7 output tokens.
func TestCapturedFixtures(t *testing.T) {
	for _, tc := range []struct {
		file string
		want map[string]Tokens
		cost map[string]float64
	}{
		{"claude/2.1.197/stream-ok.jsonl", map[string]Tokens{"claude-opus-4-8": {42, 7, 0, 0}}, map[string]float64{"claude-opus-4-8": 0.000385}},
		{"codex/0.169.0/exec-ok.jsonl", map[string]Tokens{UnknownModel: {42, 7, 0, 0}}, map[string]float64{}},
		{"gemini/0.61.0/stream-ok.jsonl", map[string]Tokens{"gemini-mock": {42, 7, 0, 0}}, map[string]float64{}},
	} {
		data, err := os.ReadFile(filepath.Join("..", "agents", "testdata", tc.file))
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(string(data)), "\n")
		got, cost := parseAll(t, Stream, &State{}, lines...)
		if d := cmp.Diff(tc.want, got); d != "" {
			t.Errorf("[%s] tokens (-expected +got):\n%s", tc.file, d)
		}
		if d := cmp.Diff(tc.cost, cost); d != "" {
			t.Errorf("[%s] cost (-expected +got):\n%s", tc.file, d)
		}
	}
}

func TestPrices(t *testing.T) {
	p := NewPrices(map[string]Price{"claude-sonnet-4-5": {1, 2, 3, 4}, "My-Model": {10, 0, 0, 0}})
	for _, tc := range []struct {
		model   string
		wantKey string
		ok      bool
	}{
		{"claude-opus-4-8", "claude-opus", true},
		{"claude-opus-4-8[1m]", "claude-opus", true},
		{"claude-opus-5-5", "claude-opus-5-5", true},
		{"claude-opus-4-1-20250805", "claude-opus-4-1", true},
		{"claude-opus-4-20250514", "claude-opus-4-2025", true},
		{"claude-sonnet-4-5-20250929", "claude-sonnet-4-5", true}, // the override, longer than the default
		{"claude-sonnet-4-20250514", "claude-sonnet", true},
		{"gpt-5-codex", "gpt-5", true},
		{"gpt-5-mini-2025-08-07", "gpt-5-mini", true},
		{"models/gemini-2.5-flash-lite", "gemini-2.5-flash-lite", true},
		{"my-model-7", "my-model", true},
		{"llama-3", "", false},
		{"", "", false},
	} {
		_, key, ok := p.Lookup(tc.model)
		if key != tc.wantKey || ok != tc.ok {
			t.Errorf("[%s] expected %q %v, got %q %v", tc.model, tc.wantKey, tc.ok, key, ok)
		}
	}
	// The captured Claude run reported 0.000385 USD for 42 in, 7 out of
	// claude-opus-4-8: the table agrees.
	if c := p.Cost(Record{Model: "claude-opus-4-8", Tokens: Tokens{Input: 42, Output: 7}}); math.Abs(c-0.000385) > 1e-12 {
		t.Errorf("expected 0.000385, got %v", c)
	}
	// The real Claude Code 2.1.332 reported 0.000308 USD for the same
	// tokens of claude-opus-5-5.
	if c := p.Cost(Record{Model: "claude-opus-5-5", Tokens: Tokens{Input: 42, Output: 7}}); math.Abs(c-0.000308) > 1e-12 {
		t.Errorf("expected 0.000308, got %v", c)
	}
	if c := p.Cost(Record{Model: "claude-opus-4-8", Tokens: Tokens{Input: 42}, Cost: 9, HasCost: true}); c != 9 {
		t.Errorf("expected the agent's own cost 9 to win, got %v", c)
	}
	if c := p.Cost(Record{Model: "llama", Tokens: Tokens{Input: 1e6}}); c != 0 {
		t.Errorf("expected 0 for an unknown model, got %v", c)
	}
}

func TestRunningTotalsNeverCountTwice(t *testing.T) {
	// A stream read again from its start (the file replaced by a copy, or
	// cut short) adds only what passes the highest total seen.
	r1 := `{"type":"turn.completed","usage":{"input_tokens":100,"output_tokens":10}}`
	r2 := `{"type":"turn.completed","usage":{"input_tokens":300,"output_tokens":30}}`
	st := State{Model: "gpt-5"}
	parseAll(t, Stream, &st, r1, r2)
	got, _ := parseAll(t, Stream, &st, r1, r2)
	if len(got) != 0 {
		t.Errorf("expected nothing added by a second read, got %v", got)
	}
	r3 := `{"type":"turn.completed","usage":{"input_tokens":350,"output_tokens":35}}`
	got, _ = parseAll(t, Stream, &st, r1, r3)
	if want := (map[string]Tokens{"gpt-5": {Input: 50, Output: 5}}); !cmp.Equal(want, got) {
		t.Errorf("expected the growth %v, got %v", want, got)
	}
}

func TestRelevant(t *testing.T) {
	for _, tc := range []struct {
		f    Format
		line string
		want bool
	}{
		{ClaudeTranscript, claudeA1, true},
		{ClaudeTranscript, claudeU, false},
		{CodexRollout, `{"type":"event_msg","payload":{"type":"token_count"}}`, true},
		{CodexRollout, `{"type":"response_item","payload":{}}`, false},
		{Stream, `{"type":"result","stats":{}}`, true},
		{Stream, `{"type":"turn.completed"}`, true},
		{Stream, `{"type":"item.completed"}`, false},
	} {
		if got := Relevant(tc.f, []byte(tc.line)); got != tc.want {
			t.Errorf("[%s %s] expected %v, got %v", tc.f, tc.line, tc.want, got)
		}
	}
}

func TestPricesFrom(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	p := PricesFrom(map[string]config.Price{"claude-opus-4-8": {Output: f(30)}, "local-llm": {Input: f(1)}})
	if got, key, _ := p.Lookup("claude-opus-4-8"); key != "claude-opus-4-8" || got != (Price{5, 30, 0.5, 6.25}) {
		t.Errorf("expected the default opus price with output 30, got %+v under %q", got, key)
	}
	if got, _, ok := p.Lookup("local-llm-7b"); !ok || got != (Price{Input: 1}) {
		t.Errorf("expected input 1 alone for a model the defaults lack, got %+v %v", got, ok)
	}
}

// TestNegativeCounts: a count below zero in an agent's file is read as
// zero, in every format: a line cannot take from what was spent (found by
// FuzzParseLine).
func TestNegativeCounts(t *testing.T) {
	tests := []struct {
		f    Format
		line string
	}{
		{ClaudeTranscript, `{"type":"assistant","message":{"id":"m","model":"claude-sonnet-4-5","usage":{"input_tokens":-100,"output_tokens":5,"cache_read_input_tokens":-1}}}`},
		{CodexRollout, `{"type":"event_msg","payload":{"type":"token_count","info":{"total_token_usage":{"input_tokens":-100,"cached_input_tokens":-50,"output_tokens":5}}}}`},
		{Stream, `{"type":"result","modelUsage":{"m":{"inputTokens":-100,"outputTokens":5}}}`},
		{Stream, `{"type":"result","stats":{"input_tokens":-100,"cached":-50,"output_tokens":5}}`},
		{GeminiChat, `{"id":"g","type":"gemini","tokens":{"input":-100,"output":5,"cached":-3}}`},
	}
	for _, tt := range tests {
		recs, err := ParseLine(tt.f, []byte(tt.line), &State{})
		if err != nil || len(recs) != 1 || recs[0].Tokens != (Tokens{Output: 5}) {
			t.Errorf("[%s] expected 5 output tokens and nothing else … got %+v, %v", tt.f, recs, err)
		}
	}
}

// TestResultWithoutUsage: a stream's result line with an empty modelUsage
// and no usage is read as nothing (or its cost alone), not a nil
// dereference that ended every ledger round at that line (found by
// FuzzParseLine).
func TestResultWithoutUsage(t *testing.T) {
	st := &State{}
	if recs, err := ParseLine(Stream, []byte(`{"type":"result","modelUsage":{}}`), st); err != nil || len(recs) != 0 {
		t.Errorf("[no usage] expected nothing … got %+v, %v", recs, err)
	}
	recs, err := ParseLine(Stream, []byte(`{"type":"result","modelUsage":{},"total_cost_usd":0.5}`), st)
	if err != nil || len(recs) != 1 || !recs[0].HasCost || recs[0].Cost != 0.5 || !recs[0].Tokens.Zero() {
		t.Errorf("[cost alone] expected a record of $0.50 … got %+v, %v", recs, err)
	}
}
