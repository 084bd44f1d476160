package attention

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
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

// sample is a permission prompt's note on channel.
func sample(channel string) Note {
	s := herd.Session{Name: "worker-0", Role: "worker", Host: "h", Incarnation: "i1", RuntimeKind: herd.RuntimeTmux}
	m := Compose(s, RuleWaiting, Cause{Data: map[string]any{"tool": "Bash"}}, time.Now())
	return Note{Message: m, Event: NotifiedEvent(m, channel)}
}

func TestNtfy(t *testing.T) {
	srv, got := recorder(t)
	if err := (Ntfy{URL: srv.URL + "/herd-topic"}).Send(testCtx(t), sample(ChannelNtfy)); err != nil {
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
	if err := (Slack{URL: srv.URL + "/api/webhooks/1/x/slack"}).Send(testCtx(t), sample(ChannelSlack)); err != nil {
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

// TestLinks: with the console's links, ntfy opens the inbox item on a
// tap and offers the answers as view actions; Slack gets a button.
func TestLinks(t *testing.T) {
	links := Links{Click: "https://herd.example.com/?item=worker-0", Actions: []LinkAction{
		{Label: "1. Yes", URL: "https://herd.example.com/a/t1.s1"},
		{Label: "2. Yes, and don't ask; again", URL: "https://herd.example.com/a/t2.s2"},
		{Label: "bad url", URL: "https://herd.example.com/a/x,y"},
		{Label: "3. No", URL: "https://herd.example.com/a/t3.s3"},
	}}
	srv, got := recorder(t)
	n := sample(ChannelNtfy)
	n.Links = links
	if err := (Ntfy{URL: srv.URL + "/herd-topic"}).Send(testCtx(t), n); err != nil {
		t.Fatalf("expected delivery, got %v", err)
	}
	r := <-got
	want := "view, 1. Yes, https://herd.example.com/a/t1.s1, clear=true; view, 2. Yes  and don't ask  again, https://herd.example.com/a/t2.s2, clear=true"
	if r.header.Get("Click") != links.Click || r.header.Get("Actions") != want {
		t.Errorf("[ntfy] expected Click %q and Actions %q … got %q, %q", links.Click, want, r.header.Get("Click"), r.header.Get("Actions"))
	}

	n = sample(ChannelSlack)
	n.Links = links
	if err := (Slack{URL: srv.URL + "/slack"}).Send(testCtx(t), n); err != nil {
		t.Fatalf("expected delivery, got %v", err)
	}
	r = <-got
	if !strings.Contains(r.body, `"url":"https://herd.example.com/?item=worker-0"`) || !strings.Contains(r.body, `"text":"*worker-0 needs permission*`) {
		t.Errorf("[slack] expected a button to the item and the text … got %s", r.body)
	}
}

func TestWebhookFailureIsAnError(t *testing.T) {
	srv, got := recorder(t, http.StatusServiceUnavailable)
	err := (Webhook{URL: srv.URL}).Send(testCtx(t), sample(ChannelWebhook))
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
	if err := (Desktop{Binary: bin}).Send(testCtx(t), sample(ChannelDesktop)); err != nil {
		t.Fatalf("expected delivery, got %v", err)
	}
	args, _ := os.ReadFile(bin + ".args")
	want := "--app-name=herd\n--urgency=critical\n--\nworker-0 needs permission\n"
	if !strings.HasPrefix(string(args), want) || !strings.Contains(string(args), "Run: herd attach worker-0") {
		t.Errorf("expected args %q + text, got %q", want, args)
	}
	if err := (Desktop{Binary: filepath.Join(t.TempDir(), "nosuch")}).Send(testCtx(t), sample(ChannelDesktop)); err == nil {
		t.Error("expected an error for a missing notify-send")
	}
}

func TestCommand(t *testing.T) {
	dir := t.TempDir()
	ok := fakeProgram(t, dir, "ok", 0)
	if err := (Command{Argv: []string{ok}}).Send(testCtx(t), sample(ChannelCommand)); err != nil {
		t.Fatalf("expected delivery, got %v", err)
	}
	in, _ := os.ReadFile(ok + ".stdin")
	var ev herd.Event
	if err := json.Unmarshal(in, &ev); err != nil || ev.Kind != herd.EventNotified || ev.Data["action"] != "herd attach worker-0" {
		t.Errorf("expected the notified event JSON on stdin, got %q (%v)", in, err)
	}
	bad := fakeProgram(t, dir, "bad", 3)
	if err := (Command{Argv: []string{bad}}).Send(testCtx(t), sample(ChannelCommand)); err == nil {
		t.Error("expected a non-zero exit to be an error")
	}
}

func TestChannelsOf(t *testing.T) {
	all := NotifyChannels(config.Notify{Desktop: true, Ntfy: "http://a", SlackWebhook: "http://b", Command: []string{"x"}, Webhook: "http://c"}, nil)
	var names []string
	for _, c := range all {
		names = append(names, c.Name())
	}
	if strings.Join(names, ",") != "desktop,ntfy,slack,command,webhook" {
		t.Errorf("expected every channel in order, got %v", names)
	}
	if len(NotifyChannels(config.Notify{}, nil)) != 0 {
		t.Error("expected no channel by default")
	}
}

func TestEscalationChannels(t *testing.T) {
	all := EscalationChannels(config.Escalation{Command: []string{"x"}, Webhook: "http://c"}, nil)
	if len(all) != 2 || all[0].Name() != ChannelCommand || !once(all[0]) || all[1].Name() != ChannelWebhook || once(all[1]) {
		t.Errorf("expected the command (run once) and the webhook (retried), got %+v", all)
	}
	if len(EscalationChannels(config.Escalation{}, nil)) != 0 {
		t.Error("expected no channel by default")
	}
	for _, ch := range NotifyChannels(config.Notify{Desktop: true, Command: []string{"x"}, Webhook: "http://c"}, nil) {
		if once(ch) {
			t.Errorf("[notify %s] expected every notify channel retried until delivered", ch.Name())
		}
	}
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestRunCommandGetsPayload(t *testing.T) {
	out := filepath.Join(t.TempDir(), "got")
	exit, err := RunCommand(testCtx(t), []string{"sh", "-c", `cat > "$1"`, "notify", out}, []byte(`{"kind":"escalated"}`))
	if exit != 0 || err != nil {
		t.Fatalf("[cat] expected 0 nil, got %d %v", exit, err)
	}
	if b, _ := os.ReadFile(out); string(b) != `{"kind":"escalated"}` {
		t.Fatalf("[cat] expected the payload on stdin, got %q", b)
	}
}

func TestRunCommandExitStatus(t *testing.T) {
	exit, err := RunCommand(testCtx(t), []string{"sh", "-c", "echo no route >&2; exit 3"}, nil)
	if exit != 3 || err == nil || !strings.Contains(err.Error(), "no route") {
		t.Fatalf("[exit 3] expected 3 and an error carrying stderr, got %d %v", exit, err)
	}
	if exit, err := RunCommand(testCtx(t), []string{filepath.Join(t.TempDir(), "missing")}, nil); exit != -1 || err == nil {
		t.Fatalf("[missing binary] expected -1 and an error, got %d %v", exit, err)
	}
	if exit, err := RunCommand(testCtx(t), nil, nil); exit != -1 || err == nil {
		t.Fatalf("[no command] expected -1 and an error, got %d %v", exit, err)
	}
}

// TestRunCommandTimeoutKillsGroup: a command and its background child
// outlive the deadline; both are killed.
func TestRunCommandTimeoutKillsGroup(t *testing.T) {
	pids := filepath.Join(t.TempDir(), "pids")
	ctx, cancel := context.WithTimeout(testCtx(t), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	exit, err := RunCommand(ctx, []string{"sh", "-c", `sleep 60 & echo $$ $! > "$1"; wait`, "notify", pids}, nil)
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("[timeout] expected Run back soon after 300ms, took %s", took)
	}
	if exit != -1 || err == nil || !strings.Contains(err.Error(), "timed out") {
		t.Fatalf("[timeout] expected -1 and a timeout error, got %d %v", exit, err)
	}
	b, rerr := os.ReadFile(pids)
	if rerr != nil {
		t.Fatal(rerr)
	}
	for _, f := range strings.Fields(string(b)) {
		pid, _ := strconv.Atoi(f)
		waitGone(t, pid)
	}
}

// waitGone polls until pid no longer exists (or is a zombie).
func waitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
			return
		}
		if b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat")); err == nil {
			if f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:])); len(f) > 0 && f[0] == "Z" {
				return
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("[group kill] expected pid %d gone, it still runs", pid)
}

func TestWebhookStatuses(t *testing.T) {
	var status atomic.Int32
	var got atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got.Store(r.Method + " " + r.Header.Get("Content-Type") + " " + r.Header.Get("User-Agent") + " " + string(b))
		w.WriteHeader(int(status.Load()))
		io.WriteString(w, "nope")
	}))
	defer srv.Close()
	note := Note{Event: herd.Event{ID: 7, Kind: herd.EventEscalated, Session: "w-0"}}
	body, _ := json.Marshal(note.Event)
	cases := []struct {
		status int
		ok     bool
	}{{200, true}, {204, true}, {299, true}, {301, false}, {404, false}, {500, false}}
	for _, c := range cases {
		status.Store(int32(c.status))
		err := (Webhook{URL: srv.URL}).Send(testCtx(t), note)
		if (err == nil) != c.ok {
			t.Errorf("[status %d] expected ok %v, got %v", c.status, c.ok, err)
		}
		if want := "POST application/json herd " + string(body); got.Load() != want {
			t.Errorf("[status %d] expected request %q, got %q", c.status, want, got.Load())
		}
	}
}

func TestWebhookTimeout(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	ctx, cancel := context.WithTimeout(testCtx(t), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := (Webhook{URL: srv.URL}).Send(ctx, Note{})
	if err == nil || time.Since(start) > 5*time.Second {
		t.Fatalf("[hung webhook] expected a timeout error soon, got %v after %s", err, time.Since(start))
	}
	if err := (Webhook{URL: "://bad"}).Send(testCtx(t), Note{}); err == nil {
		t.Fatal("[bad url] expected an error, got nil")
	}
}
