package notify

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"herd"
	"herd/internal/config"
)

// request is what a loopback test server received.
type request struct {
	header http.Header
	body   string
}

// recorder is a loopback HTTP server that records requests and answers
// with the status codes given, then 200.
func recorder(t *testing.T, statuses ...int) (*httptest.Server, chan request) {
	t.Helper()
	got := make(chan request, 16)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- request{r.Header.Clone(), string(b)}
		if len(statuses) > 0 {
			code := statuses[0]
			statuses = statuses[1:]
			http.Error(w, "try later", code)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(srv.Close)
	return srv, got
}

func sample() Message {
	s := herd.Session{Name: "worker-0", Role: "worker", Host: "h", Incarnation: "i1", RuntimeKind: herd.RuntimeTmux}
	return Compose(s, NeedWaiting, Cause{Data: map[string]any{"tool": "Bash"}}, time.Now())
}

func TestNtfy(t *testing.T) {
	srv, got := recorder(t)
	if err := (Ntfy{URL: srv.URL + "/herd-topic"}).Send(context.Background(), sample()); err != nil {
		t.Fatalf("expected delivery, got %v", err)
	}
	r := <-got
	if r.header.Get("Title") != "worker-0 needs permission" || r.header.Get("Priority") != "4" || r.header.Get("Tags") != "herd,waiting" {
		t.Errorf("expected Title, Priority 4 and Tags headers, got %v", r.header)
	}
	if !strings.Contains(r.body, "permission to use Bash") || !strings.Contains(r.body, "Run: herd attach worker-0") {
		t.Errorf("expected the text as the body, got %q", r.body)
	}
}

func TestSlackBody(t *testing.T) {
	srv, got := recorder(t)
	if err := (Slack{URL: srv.URL + "/api/webhooks/1/x/slack"}).Send(context.Background(), sample()); err != nil {
		t.Fatalf("expected delivery, got %v", err)
	}
	r := <-got
	var body map[string]string
	if err := json.Unmarshal([]byte(r.body), &body); err != nil {
		t.Fatalf("expected a JSON body, got %q: %v", r.body, err)
	}
	if len(body) != 1 || !strings.Contains(body["text"], "*worker-0 needs permission*") || !strings.Contains(body["text"], "`herd attach worker-0`") {
		t.Errorf(`expected {"text": ...} naming session and action, got %q`, r.body)
	}
}

func TestWebhookFailureIsAnError(t *testing.T) {
	srv, got := recorder(t, http.StatusServiceUnavailable)
	err := (Webhook{URL: srv.URL}).Send(context.Background(), sample())
	if err == nil || !strings.Contains(err.Error(), "503") || !strings.Contains(err.Error(), "try later") {
		t.Errorf("expected a 503 error carrying the answer, got %v", err)
	}
	r := <-got
	var ev herd.Event
	if err := json.Unmarshal([]byte(r.body), &ev); err != nil || ev.Kind != herd.EventNotified || ev.Session != "worker-0" || ev.Data["channel"] != ChannelWebhook {
		t.Errorf("expected the notified event JSON, got %q (%v)", r.body, err)
	}
}

// fakeProgram writes an executable script that records its arguments
// and stdin under dir, exiting with code.
func fakeProgram(t *testing.T, dir, name string, code int) string {
	t.Helper()
	path := filepath.Join(dir, name)
	script := "#!/bin/sh\nprintf '%s\\n' \"$@\" > \"$0.args\"\ncat > \"$0.stdin\"\nexit " + map[bool]string{true: "0", false: "3"}[code == 0] + "\n"
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestDesktop(t *testing.T) {
	bin := fakeProgram(t, t.TempDir(), "notify-send", 0)
	if err := (Desktop{Binary: bin}).Send(context.Background(), sample()); err != nil {
		t.Fatalf("expected delivery, got %v", err)
	}
	args, _ := os.ReadFile(bin + ".args")
	want := "--app-name=herd\n--urgency=critical\n--\nworker-0 needs permission\n"
	if !strings.HasPrefix(string(args), want) || !strings.Contains(string(args), "Run: herd attach worker-0") {
		t.Errorf("expected args %q + text, got %q", want, args)
	}
	if err := (Desktop{Binary: filepath.Join(t.TempDir(), "nosuch")}).Send(context.Background(), sample()); err == nil {
		t.Error("expected an error for a missing notify-send")
	}
}

func TestCommand(t *testing.T) {
	dir := t.TempDir()
	ok := fakeProgram(t, dir, "ok", 0)
	if err := (Command{Argv: []string{ok}}).Send(context.Background(), sample()); err != nil {
		t.Fatalf("expected delivery, got %v", err)
	}
	in, _ := os.ReadFile(ok + ".stdin")
	var ev herd.Event
	if err := json.Unmarshal(in, &ev); err != nil || ev.Kind != herd.EventNotified || ev.Data["action"] != "herd attach worker-0" {
		t.Errorf("expected the notified event JSON on stdin, got %q (%v)", in, err)
	}
	bad := fakeProgram(t, dir, "bad", 3)
	if err := (Command{Argv: []string{bad}}).Send(context.Background(), sample()); err == nil {
		t.Error("expected a non-zero exit to be an error")
	}
}

func TestChannelsOf(t *testing.T) {
	all := Channels(config.Notify{Desktop: true, Ntfy: "http://a", SlackWebhook: "http://b", Command: []string{"x"}, Webhook: "http://c"}, nil)
	var names []string
	for _, c := range all {
		names = append(names, c.Name())
	}
	if strings.Join(names, ",") != "desktop,ntfy,slack,command,webhook" {
		t.Errorf("expected every channel in order, got %v", names)
	}
	if len(Channels(config.Notify{}, nil)) != 0 {
		t.Error("expected no channel by default")
	}
}
