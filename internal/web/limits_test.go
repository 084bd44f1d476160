package web

import (
	"bufio"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"herd/internal/frontdoor"
)

// shortLimits are the console's limits with deadlines short enough for a
// test, and a cap of conns connections.
func shortLimits(conns int) *limits {
	l := defaultLimits()
	l.http.ReadHeader = 300 * time.Millisecond
	l.http.Idle = 300 * time.Millisecond
	l.conns = conns
	l.streams = frontdoor.Streams{PerClient: 2, Total: 4}
	return l
}

// closed waits up to within for the server to close c (reading and
// dropping whatever it sends), and reports whether it did.
func closed(c net.Conn, within time.Duration) bool {
	c.SetReadDeadline(time.Now().Add(within))
	_, err := io.Copy(io.Discard, c)
	var ne net.Error
	return !(errors.As(err, &ne) && ne.Timeout())
}

// lockedBuffer is a log's buffer, written and read concurrently.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// whoami asks as an API client who it is; it returns the status, or 0
// when the connection was refused or closed.
func whoami(c *testConsole) int {
	req, _ := http.NewRequest(http.MethodGet, c.url+"/api/v1/whoami", nil)
	req.Header.Set("Authorization", "Bearer the-token")
	cl := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 2 * time.Second}
	resp, err := cl.Do(req)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestIdleConnectionsCapped: many more idle connections than the cap
// (half of them silent, half after one request) cannot hold the console:
// those over the cap are closed at once, the rest when their header or
// idle deadline passes, and a person's request is served meanwhile.
func TestIdleConnectionsCapped(t *testing.T) {
	const max = 8
	log := &lockedBuffer{}
	c := newTestConsole(t, func(o *Options, _ string) {
		o.limits = shortLimits(max)
		o.Log = slog.New(slog.NewTextHandler(log, nil))
	})
	addr := strings.TrimPrefix(c.url, "http://")
	if code := whoami(c); code != 200 {
		t.Fatalf("[before] expected 200 … got %d", code)
	}
	var conns []net.Conn
	for i := range 6 * max {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("[dial %d] %v", i, err)
		}
		defer conn.Close()
		if i%2 == 1 {
			// One unauthenticated request, its reply read, then nothing.
			io.WriteString(conn, "GET /api/v1/sessions HTTP/1.1\r\nHost: "+addr+"\r\n\r\n")
			if resp, err := http.ReadResponse(bufio.NewReader(conn), nil); err == nil {
				resp.Body.Close()
			}
		}
		conns = append(conns, conn)
	}
	start := time.Now()
	for i, conn := range conns {
		if !closed(conn, 3*time.Second) {
			t.Fatalf("[idle connection %d] expected closed within 3s … still open after %s", i, time.Since(start))
		}
	}
	if got := log.String(); !strings.Contains(got, "web: connection closed at once: too many connections open") {
		t.Errorf("[log] expected the refusals logged with their reason … got %q", got)
	}
	deadline := time.Now().Add(5 * time.Second)
	for whoami(c) != 200 {
		if time.Now().After(deadline) {
			t.Fatalf("[after the flood] expected a person's request served")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// While idle connections fill the cap, a request waits at most a
	// header deadline for room.
	for range max {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close() // held open until the test ends
	}
	deadline = time.Now().Add(5 * time.Second)
	for whoami(c) != 200 {
		if time.Now().After(deadline) {
			t.Fatalf("[cap held by idle connections] expected a person's request served once they are closed")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestSlowloris: a connection that never finishes its headers is closed
// once the header deadline passes, however it trickles.
func TestSlowloris(t *testing.T) {
	c := newTestConsole(t, func(o *Options, _ string) { o.limits = shortLimits(16) })
	addr := strings.TrimPrefix(c.url, "http://")
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	start := time.Now()
	io.WriteString(conn, "GET /api/v1/sessions HTTP/1.1\r\nHost: "+addr+"\r\n")
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			if _, err := io.WriteString(conn, "X-Slow-"+string(rune('a'+i%26))+": 1\r\n"); err != nil {
				return
			}
			time.Sleep(50 * time.Millisecond) // a trickle, not a wait

		}
	}()
	if !closed(conn, 3*time.Second) {
		t.Fatalf("[slowloris] expected closed after the 300ms header deadline … open after %s", time.Since(start))
	}
	if took := time.Since(start); took < 250*time.Millisecond {
		t.Errorf("[slowloris] expected closed at the header deadline, not before … after %s", took)
	}
	conn.Close()
	<-done
}

// TestDescriptorReserve: while the daemon has fewer free descriptors
// than its reserve, the console takes no connection at all.
func TestDescriptorReserve(t *testing.T) {
	if _, ok := frontdoor.FreeFDs(); !ok {
		t.Skip("no descriptor count here")
	}
	c := newTestConsole(t, func(o *Options, _ string) {
		o.limits = shortLimits(16)
		o.limits.reserve = 1 << 30 // more than any limit: always short
	})
	if code := whoami(c); code != 0 {
		t.Errorf("[short of descriptors] expected the connection closed … got %d", code)
	}
}

// TestStreamCaps: event streams are capped per client address; a stream
// over the cap is 429, and a closed stream makes room.
func TestStreamCaps(t *testing.T) {
	c := newTestConsole(t, func(o *Options, _ string) { o.limits = shortLimits(16) })
	open := func() (*http.Response, error) {
		req, _ := http.NewRequest(http.MethodGet, c.url+"/api/v1/events", nil)
		req.Header.Set("Authorization", "Bearer the-token")
		return (&http.Transport{}).RoundTrip(req)
	}
	var streams []*http.Response
	for i := range 2 {
		resp, err := open()
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("[stream %d] expected 200 … got %v %v", i, resp, err)
		}
		streams = append(streams, resp)
	}
	resp, err := open()
	if err != nil || resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("[third stream from one address] expected 429 … got %v %v", resp, err)
	}
	resp.Body.Close()
	streams[0].Body.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		resp, err := open()
		if err == nil && resp.StatusCode == 200 {
			resp.Body.Close()
			break
		}
		if err == nil {
			resp.Body.Close()
		}
		if time.Now().After(deadline) {
			t.Fatalf("[after a close] expected room for a stream … got %v %v", resp, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	streams[1].Body.Close()
}

// TestBodyBounds: a body over the bound is 413 on a JSON route, before
// anything is typed.
func TestBodyBounds(t *testing.T) {
	c := newTestConsole(t)
	body := `{"text":"` + strings.Repeat("x", maxBody) + `"}`
	req, _ := http.NewRequest(http.MethodPost, c.url+"/api/v1/sessions/w-0/input", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer the-token")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge || len(c.verbs.injected) != 0 {
		t.Errorf("[input over the bound] expected 413 and nothing typed … got %d, %+v", resp.StatusCode, c.verbs.injected)
	}
}

// TestInputMeansWhatItSays: input with both a key and text is 400; a
// multi-line ask reaches the verb as one; a reply with a line break is
// 400 before anything is typed (no Esc without its words).
func TestInputMeansWhatItSays(t *testing.T) {
	c := newTestConsole(t)
	post := func(path string, body any) int {
		t.Helper()
		return c.call(t, http.DefaultClient, http.MethodPost, path, map[string]string{"Authorization": "Bearer the-token"}, body, nil)
	}
	if code := post("/api/v1/sessions/w-0/input", map[string]any{"key": "enter", "text": "rm -rf /"}); code != http.StatusBadRequest {
		t.Errorf("[key and text] expected 400 … got %d", code)
	}
	if code := post("/api/v1/sessions/w-0/input", map[string]any{"text": "one\ntwo", "multiline": true}); code != http.StatusOK {
		t.Errorf("[multiline] expected 200 … got %d", code)
	}
	if code := post("/api/v1/sessions/w-0/answer", map[string]any{"text": "no, use ls\n2"}); code != http.StatusBadRequest {
		t.Errorf("[reply with a line break] expected 400 … got %d", code)
	}
	c.verbs.mu.Lock()
	defer c.verbs.mu.Unlock()
	if len(c.verbs.injected) != 1 || !c.verbs.injected[0].Multiline || c.verbs.injected[0].Text != "one\ntwo" {
		t.Errorf("[typed] expected only the multi-line input, asked as such … got %+v", c.verbs.injected)
	}
}
