package mockapi

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

func start(t *testing.T) (*Server, string) {
	t.Helper()
	ln, err := Listen()
	if err != nil {
		t.Fatal(err)
	}
	s := New(nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return s, "http://" + ln.Addr().String()
}

func post(t *testing.T, url, body string) *http.Response {
	t.Helper()
	resp, err := http.Post(url+"/v1/messages", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// events reads the SSE event names and data of a streamed answer.
func events(t *testing.T, resp *http.Response) (names []string, data []map[string]any) {
	t.Helper()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		l := sc.Text()
		if n, ok := strings.CutPrefix(l, "event: "); ok {
			names = append(names, n)
		}
		if d, ok := strings.CutPrefix(l, "data: "); ok {
			var m map[string]any
			if err := json.Unmarshal([]byte(d), &m); err != nil {
				t.Fatalf("bad data line %q: %v", d, err)
			}
			data = append(data, m)
		}
	}
	return names, data
}

const bash = `"tools":[{"name":"Bash"}]`

func TestStreamedText(t *testing.T) {
	_, url := start(t)
	resp := post(t, url, `{"model":"m","stream":true,"messages":[{"role":"user","content":"hello"}]}`)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("status %d, type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	names, data := events(t, resp)
	want := "message_start content_block_start content_block_delta content_block_stop message_delta message_stop"
	if strings.Join(names, " ") != want {
		t.Errorf("expected events %s, got %v", want, names)
	}
	if d := data[2]["delta"].(map[string]any); d["text"] != ReplyText {
		t.Errorf("expected the reply text, got %v", d)
	}
}

func TestToolUseThenText(t *testing.T) {
	s, url := start(t)
	resp := post(t, url, `{"model":"m","stream":true,`+bash+`,"messages":[{"role":"user","content":[{"type":"text","text":"run `+TriggerTool+`"}]}]}`)
	_, data := events(t, resp)
	if cb := data[1]["content_block"].(map[string]any); cb["type"] != "tool_use" || cb["name"] != "Bash" {
		t.Errorf("expected a Bash tool_use, got %v", cb)
	}
	if d := data[4]["delta"].(map[string]any); d["stop_reason"] != "tool_use" {
		t.Errorf("expected stop_reason tool_use, got %v", d)
	}
	// The tool result comes back: plain text now.
	resp = post(t, url, `{"model":"m","stream":false,`+bash+`,"messages":[{"role":"user","content":"run `+TriggerTool+`"},{"role":"assistant","content":[]},{"role":"user","content":[{"type":"tool_result","content":"ok"}]}]}`)
	var m struct {
		Content []struct{ Type, Text string }
	}
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		t.Fatal(err)
	}
	if len(m.Content) != 1 || m.Content[0].Text != ReplyText {
		t.Errorf("expected the text answer, got %+v", m)
	}
	recs := s.Records()
	if len(recs) != 2 || recs[0].Trigger != TriggerTool || recs[1].Trigger != TriggerTool || !recs[0].Tool || recs[1].Tool || recs[0].Time.IsZero() ||
		recs[0].ToolName != "Bash" || recs[0].ToolID == "" {
		t.Errorf("records: %+v", recs)
	}
	// Each record keeps the user side of the conversation it was sent.
	if len(recs) == 2 && (strings.Join(recs[0].Users, "|") != "run "+TriggerTool+"\n" || len(recs[1].Users) != 2 || recs[1].Users[0] != "run "+TriggerTool) {
		t.Errorf("expected the user messages recorded, got %q and %q", recs[0].Users, recs[1].Users)
	}
}

func TestErrors(t *testing.T) {
	_, url := start(t)
	for _, tc := range []struct {
		trigger, typ string
		status       int
	}{
		{TriggerRateLimit, "rate_limit_error", 429},
		{TriggerOverloaded, "overloaded_error", 529},
	} {
		resp := post(t, url, `{"model":"m","stream":true,"messages":[{"role":"user","content":"`+tc.trigger+`"}]}`)
		var e struct {
			Error struct{ Type string }
		}
		_ = json.NewDecoder(resp.Body).Decode(&e)
		if resp.StatusCode != tc.status || e.Error.Type != tc.typ {
			t.Errorf("[%s] expected %d %s, got %d %s", tc.trigger, tc.status, tc.typ, resp.StatusCode, e.Error.Type)
		}
	}
	resp, err := http.Get(url + "/v1/other")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Errorf("unknown path: expected 404, got %d", resp.StatusCode)
	}
}

func TestHangUntilRelease(t *testing.T) {
	s, url := start(t)
	got := make(chan int, 1)
	go func() {
		resp, err := http.Post(url+"/v1/messages", "application/json",
			strings.NewReader(`{"model":"m","stream":true,`+bash+`,"messages":[{"role":"user","content":"`+TriggerHang+`"}]}`))
		if err != nil {
			got <- -1
			return
		}
		resp.Body.Close()
		got <- resp.StatusCode
	}()
	deadline := time.Now().Add(10 * time.Second)
	for s.Hung() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond) // polling interval
	}
	if s.Hung() != 1 {
		t.Fatal("the request was not held")
	}
	select {
	case code := <-got:
		t.Fatalf("answered while hung: %d", code)
	default:
	}
	s.Release()
	if code := <-got; code != 500 {
		t.Errorf("after release: expected 500, got %d", code)
	}
	// A side request (no tools) with the trigger is answered at once.
	resp := post(t, url, `{"model":"m","messages":[{"role":"user","content":"`+TriggerHang+`"}]}`)
	if resp.StatusCode != 200 {
		t.Errorf("side request: expected 200, got %d", resp.StatusCode)
	}
}

func TestRefusesNonLoopback(t *testing.T) {
	ln, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Skip(err)
	}
	defer ln.Close()
	if err := New(nil).Run(context.Background(), ln); err == nil || !strings.Contains(err.Error(), "non-loopback") {
		t.Errorf("expected a refusal, got %v", err)
	}
}
