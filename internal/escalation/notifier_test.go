package escalation

import (
	"context"
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
)

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestRunGetsPayload(t *testing.T) {
	out := filepath.Join(t.TempDir(), "got")
	n := &Notifier{Command: []string{"sh", "-c", `cat > "$1"`, "notify", out}}
	exit, err := n.Run(testCtx(t), []byte(`{"kind":"escalated"}`))
	if exit != 0 || err != nil {
		t.Fatalf("[cat] expected 0 nil, got %d %v", exit, err)
	}
	if b, _ := os.ReadFile(out); string(b) != `{"kind":"escalated"}` {
		t.Fatalf("[cat] expected the payload on stdin, got %q", b)
	}
}

func TestRunExitStatus(t *testing.T) {
	n := &Notifier{Command: []string{"sh", "-c", "echo no route >&2; exit 3"}}
	exit, err := n.Run(testCtx(t), nil)
	if exit != 3 || err == nil || !strings.Contains(err.Error(), "no route") {
		t.Fatalf("[exit 3] expected 3 and an error carrying stderr, got %d %v", exit, err)
	}
	n = &Notifier{Command: []string{filepath.Join(t.TempDir(), "missing")}}
	if exit, err := n.Run(testCtx(t), nil); exit != -1 || err == nil {
		t.Fatalf("[missing binary] expected -1 and an error, got %d %v", exit, err)
	}
	if exit, err := (&Notifier{}).Run(testCtx(t), nil); exit != -1 || err == nil {
		t.Fatalf("[no command] expected -1 and an error, got %d %v", exit, err)
	}
}

// TestRunTimeoutKillsGroup: a command and its background child outlive
// the timeout; both are killed.
func TestRunTimeoutKillsGroup(t *testing.T) {
	pids := filepath.Join(t.TempDir(), "pids")
	n := &Notifier{
		Command:        []string{"sh", "-c", `sleep 60 & echo $$ $! > "$1"; wait`, "notify", pids},
		CommandTimeout: 300 * time.Millisecond,
	}
	start := time.Now()
	exit, err := n.Run(testCtx(t), nil)
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

func TestPost(t *testing.T) {
	var status atomic.Int32
	var got atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got.Store(r.Method + " " + r.Header.Get("Content-Type") + " " + string(b))
		w.WriteHeader(int(status.Load()))
		io.WriteString(w, "nope")
	}))
	defer srv.Close()
	n := &Notifier{Webhook: srv.URL}
	cases := []struct {
		status int
		ok     bool
	}{{200, true}, {204, true}, {299, true}, {301, false}, {404, false}, {500, false}}
	for _, c := range cases {
		status.Store(int32(c.status))
		err := n.Post(testCtx(t), []byte(`{"a":1}`))
		if (err == nil) != c.ok {
			t.Errorf("[status %d] expected ok %v, got %v", c.status, c.ok, err)
		}
		if want := `POST application/json {"a":1}`; got.Load() != want {
			t.Errorf("[status %d] expected request %q, got %q", c.status, want, got.Load())
		}
	}
}

func TestPostTimeout(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	n := &Notifier{Webhook: srv.URL, WebhookTimeout: 200 * time.Millisecond}
	start := time.Now()
	err := n.Post(testCtx(t), nil)
	if err == nil || time.Since(start) > 5*time.Second {
		t.Fatalf("[hung webhook] expected a timeout error soon, got %v after %s", err, time.Since(start))
	}
	if err := (&Notifier{Webhook: "://bad"}).Post(testCtx(t), nil); err == nil {
		t.Fatal("[bad url] expected an error, got nil")
	}
}

func TestDeliverPendingOnly(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	defer srv.Close()
	n := &Notifier{Command: []string{"true"}, Webhook: srv.URL}
	r := n.Deliver(testCtx(t), Episode{EventID: 1}, nil)
	if !r.CommandRan || r.CommandErr != nil || !r.WebhookTried || r.WebhookErr != nil || hits.Load() != 1 {
		t.Fatalf("[fresh] expected both channels once, got %+v hits %d", r, hits.Load())
	}
	r = n.Deliver(testCtx(t), Episode{EventID: 1, CommandDone: true}, nil)
	if r.CommandRan || !r.WebhookTried || hits.Load() != 2 {
		t.Fatalf("[command done] expected webhook only, got %+v hits %d", r, hits.Load())
	}
	var none *Notifier
	if ch := none.Channels(); ch.Command || ch.Webhook {
		t.Fatalf("[nil notifier] expected no channels, got %+v", ch)
	}
}
