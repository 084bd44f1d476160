package usage

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
)

// FuzzParseLine: any file an agent writes (a transcript, a rollout, a
// stream, a chat file: lines it may write as it likes) is read line by
// line without a panic; a line that is not JSON is ErrGarbled and leaves
// the state as it was; no line counts fewer than zero tokens or a
// negative or infinite cost (an agent cannot lower what it spent); the
// state stays bounded; and a line read again right after adds nothing
// (running totals, and messages counted by their id).
func FuzzParseLine(f *testing.F) {
	for _, s := range []struct {
		format uint8
		file   string
	}{
		{0, `{"type":"assistant","timestamp":"2026-01-01T00:00:00Z","message":{"id":"m1","model":"claude-sonnet-4-5","usage":{"input_tokens":10,"output_tokens":5,"cache_read_input_tokens":100,"cache_creation_input_tokens":20}}}` + "\n" +
			`{"type":"assistant","message":{"id":"m1","model":"claude-sonnet-4-5","usage":{"input_tokens":10,"output_tokens":9}}}`},
		{0, `{"type":"assistant","message":{"model":"<synthetic>","usage":{"input_tokens":1}}}` + "\nnot json\n{}"},
		{1, `{"type":"turn_context","payload":{"model":"gpt-5-codex"}}` + "\n" +
			`{"type":"event_msg","payload":{"type":"token_count","info":{"total_token_usage":{"input_tokens":100,"cached_input_tokens":40,"output_tokens":7}}}}`},
		{2, `{"type":"system","subtype":"init","model":"claude-opus-4-1"}` + "\n" +
			`{"type":"result","usage":{"input_tokens":3,"output_tokens":4},"total_cost_usd":0.25}` + "\n" +
			`{"type":"result","modelUsage":{"a":{"inputTokens":1,"costUSD":0.5},"b":{"outputTokens":2}}}`},
		{2, `{"type":"init","model":"gemini-2.5-pro"}` + "\n" + `{"type":"result","stats":{"input_tokens":50,"cached":10,"models":{"gemini-2.5-pro":{"input_tokens":50,"output_tokens":5}}}}` + "\n" +
			`{"type":"turn.completed","usage":{"input_tokens":9,"cached_input_tokens":1,"output_tokens":2}}`},
		{3, `{"sessionId":"x","projectHash":"y"}` + "\n" + `{"id":"g1","type":"gemini","model":"gemini-2.5-flash","tokens":{"input":30,"output":4,"cached":10}}` + "\n" +
			`{"id":"g1","type":"gemini","tokens":{"input":30,"output":40}}`},
		{0, `{"type":"assistant","message":{"id":"m2","usage":{"input_tokens":-1000000,"output_tokens":-5}}}`},
		{2, `{"type":"result","usage":{"input_tokens":9},"total_cost_usd":-1e308}`},
	} {
		f.Add(s.format, s.file)
	}
	formats := []Format{ClaudeTranscript, CodexRollout, Stream, GeminiChat}
	f.Fuzz(func(t *testing.T, format uint8, file string) {
		fm := formats[int(format)%len(formats)]
		st := &State{}
		for _, line := range strings.Split(file, "\n") {
			before := marshalState(t, st)
			recs, err := ParseLine(fm, []byte(line), st)
			if err != nil {
				if !errors.Is(err, ErrGarbled) {
					t.Fatalf("%s %q: an error that is not ErrGarbled: %v", fm, line, err)
				}
				if after := marshalState(t, st); after != before {
					t.Fatalf("%s %q: a garbled line changed the state: %s -> %s", fm, line, before, after)
				}
				continue
			}
			for _, r := range recs {
				checkRecord(t, fm, line, r)
			}
			if len(st.Recent) > maxRecent || len(st.Messages) > maxGeminiIDs {
				t.Fatalf("%s: state unbounded: %d recent, %d messages", fm, len(st.Recent), len(st.Messages))
			}
			for _, v := range st.Seen {
				if v.Input < 0 || v.Output < 0 || v.CacheRead < 0 || v.CacheWrite < 0 {
					t.Fatalf("%s %q: a negative running total kept: %+v", fm, line, v)
				}
			}
			var l rawLine
			json.Unmarshal([]byte(line), &l)
			if fm == ClaudeTranscript && (l.Message == nil || l.Message.ID == "") {
				continue // a message without its id is counted each time
			}
			if again, _ := ParseLine(fm, []byte(line), st); len(again) > 0 {
				t.Fatalf("%s %q: read again right after, it added %+v", fm, line, again)
			}
		}
	})
}

func marshalState(t *testing.T, st *State) string {
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func checkRecord(t *testing.T, fm Format, line string, r Record) {
	t.Helper()
	tk := r.Tokens
	if tk.Input < 0 || tk.Output < 0 || tk.CacheRead < 0 || tk.CacheWrite < 0 {
		t.Fatalf("%s %q: a record of negative tokens: %+v", fm, line, r)
	}
	if r.Cost < 0 || math.IsNaN(r.Cost) || math.IsInf(r.Cost, 0) || !r.HasCost && r.Cost != 0 {
		t.Fatalf("%s %q: a record of cost %v (has cost %v)", fm, line, r.Cost, r.HasCost)
	}
	if tk.Zero() && r.Cost == 0 {
		t.Fatalf("%s %q: a record of nothing: %+v", fm, line, r)
	}
}
