package frontdoor

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// serve runs l's server of h on a loopback listener; it returns the base
// URL.
func serve(t *testing.T, l Limits, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := l.Server(h)
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String()
}

// TestHandlerOutlivesReadLimit: a handler that works longer than Read
// (a verb that waits) keeps its request, with or without a body; net/http
// alone cancels it when the read deadline passes.
func TestHandlerOutlivesReadLimit(t *testing.T) {
	l := Limits{ReadHeader: time.Second, Read: 100 * time.Millisecond, Idle: time.Second, MaxBody: 1 << 10}
	url := serve(t, l, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.ReadAll(r.Body)
		select {
		case <-r.Context().Done():
			http.Error(w, "cancelled", http.StatusInternalServerError)
		case <-time.After(400 * time.Millisecond):
			io.WriteString(w, "done")
		}
	}))
	for _, body := range []io.Reader{nil, strings.NewReader(`{"a":1}`)} {
		resp, err := http.Post(url, "application/json", body)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(b) != "done" {
			t.Errorf("[body %v] expected the handler to finish … got %d %q", body != nil, resp.StatusCode, b)
		}
	}
}

// TestBodyBound: a body over MaxBody is refused before a handler sees it
// (declared), or fails its read (chunked).
func TestBodyBound(t *testing.T) {
	l := Limits{ReadHeader: time.Second, Read: time.Second, MaxBody: 1 << 10}
	url := serve(t, l, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.ReadAll(r.Body); errors.As(err, new(*http.MaxBytesError)) {
			http.Error(w, "too large", http.StatusRequestEntityTooLarge)
		}
	}))
	big := bytes.Repeat([]byte("x"), 2<<10)
	resp, err := http.Post(url, "text/plain", bytes.NewReader(big))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("[declared] expected 413 … got %d", resp.StatusCode)
	}
	resp, err = http.Post(url, "text/plain", io.MultiReader(bytes.NewReader(big))) // no length: chunked
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("[chunked] expected 413 … got %d", resp.StatusCode)
	}
}

// logLines is a slog handler that keeps the messages logged.
type logLines struct {
	mu   sync.Mutex
	msgs []string
}

func (h *logLines) Enabled(context.Context, slog.Level) bool { return true }
func (h *logLines) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.msgs = append(h.msgs, r.Message)
	return nil
}
func (h *logLines) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *logLines) WithGroup(string) slog.Handler      { return h }

func (h *logLines) lines() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.msgs...)
}

// closedAtOnce reports whether the server closed c without a word.
func closedAtOnce(c net.Conn) bool {
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	n, err := c.Read(make([]byte, 1))
	return n == 0 && err != nil && !errors.Is(err, context.DeadlineExceeded) && !isTimeout(err)
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// TestListenerCap: over Max, a connection is closed at once, the reason
// logged once per Quiet.Every; closing one admits the next.
func TestListenerCap(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	logs := &logLines{}
	l := &Listener{Listener: inner, Max: 2, Quiet: Quiet{Every: time.Hour}, Log: slog.New(logs), Name: "test"}
	defer l.Close()
	admitted := make(chan net.Conn, 10)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			admitted <- c
		}
	}()
	dial := func() net.Conn {
		t.Helper()
		c, err := net.Dial("tcp", inner.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	a, b := dial(), dial()
	first := <-admitted
	<-admitted
	for range 3 {
		if c := dial(); !closedAtOnce(c) {
			t.Fatalf("[over the cap] expected the connection closed at once")
		}
	}
	if got := logs.lines(); len(got) != 1 || !strings.Contains(got[0], "too many connections") {
		t.Errorf("[log] expected one line with the reason … got %q", got)
	}
	first.Close()
	c := dial()
	select {
	case <-admitted:
	case <-time.After(2 * time.Second):
		t.Fatalf("[after a close] expected the next connection admitted")
	}
	if l.Open() != 2 {
		t.Errorf("[open] expected 2 … got %d", l.Open())
	}
	_, _, _ = a, b, c
}

// TestListenerReserve: with fewer free descriptors than Reserve, every
// connection is closed at once, whatever the cap.
func TestListenerReserve(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var free struct {
		sync.Mutex
		n int
	}
	free.n = 10
	logs := &logLines{}
	l := &Listener{Listener: inner, Max: 100, Reserve: 64, Log: slog.New(logs), Name: "test",
		Free: func() (int, bool) { free.Lock(); defer free.Unlock(); return free.n, true }}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	c, err := net.Dial("tcp", inner.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if !closedAtOnce(c) {
		t.Fatalf("[short of descriptors] expected the connection closed at once")
	}
	if got := logs.lines(); len(got) != 1 || !strings.Contains(got[0], "file descriptors short") {
		t.Errorf("[log] expected the reason … got %q", got)
	}
	if l.Open() != 0 {
		t.Errorf("[open] expected none counted … got %d", l.Open())
	}
}

func TestFreeFDs(t *testing.T) {
	free, ok := FreeFDs()
	if !ok || free <= 0 {
		t.Skipf("no descriptor count here: %d %v", free, ok)
	}
	f, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if after, _ := FreeFDs(); after >= free {
		t.Errorf("[one more open] expected fewer free than %d … got %d", free, after)
	}
}

func TestStreams(t *testing.T) {
	s := &Streams{PerClient: 2, Total: 3}
	var rel []func()
	for _, from := range []string{"10.0.0.1:1", "10.0.0.1:2"} {
		r, err := s.Open(from)
		if err != nil {
			t.Fatalf("[%s] expected admitted … got %v", from, err)
		}
		rel = append(rel, r)
	}
	var se *ErrStreams
	if _, err := s.Open("10.0.0.1:3"); !errors.As(err, &se) || !se.Client {
		t.Errorf("[third from one address] expected its own cap … got %v", err)
	}
	if r, err := s.Open("10.0.0.2:1"); err != nil {
		t.Errorf("[another address] expected admitted … got %v", err)
	} else {
		rel = append(rel, r)
	}
	if _, err := s.Open("10.0.0.3:1"); !errors.As(err, &se) || se.Client {
		t.Errorf("[over the total] expected the total cap … got %v", err)
	}
	rel[0]()
	rel[0]() // twice: counted out once
	if r, err := s.Open("10.0.0.1:4"); err != nil {
		t.Errorf("[after a release] expected admitted … got %v", err)
	} else {
		r()
	}
	if _, err := s.Open("10.0.0.4:1"); err != nil {
		t.Errorf("[released twice] expected room for one … got %v", err)
	}
	if _, err := s.Open("10.0.0.5:1"); !errors.As(err, &se) || se.Client {
		t.Errorf("[released twice] expected it counted out once: the total reached … got %v", err)
	}
}
