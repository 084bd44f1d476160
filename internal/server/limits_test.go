package server

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"herd/internal/frontdoor"
)

// serveUnix serves h under l on a unix socket, as the daemon does; it
// returns the socket's path and a client of it.
func serveUnix(t *testing.T, h http.Handler, l frontdoor.Limits) (string, *http.Client) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "herd.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	srv := httpServer(h, l)
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	cl := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", path)
	}}}
	return path, cl
}

// testLimits are the API's limits, short enough for a test.
func testLimits() frontdoor.Limits {
	l := apiLimits
	l.ReadHeader, l.Read, l.Write, l.Idle = 200*time.Millisecond, 300*time.Millisecond, 300*time.Millisecond, 300*time.Millisecond
	return l
}

// TestSocketSlowloris: a client of the unix socket that never finishes
// its headers is dropped at the header deadline.
func TestSocketSlowloris(t *testing.T) {
	path, _ := serveUnix(t, http.NotFoundHandler(), testLimits())
	conn, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	start := time.Now()
	io.WriteString(conn, "GET /v1/sessions HTTP/1.1\r\nHost: herd\r\nX-Slow: ")
	conn.SetReadDeadline(time.Now().Add(3 * time.Second))
	_, err = io.Copy(io.Discard, conn)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("[slowloris] expected dropped at the 200ms header deadline … open after %s", time.Since(start))
	}
}

// TestSocketVerbOutlivesDeadlines: a verb that takes longer than the
// read and write deadlines (a stop's grace, a rollout) keeps its request
// and gets its reply; a read (GET) that takes longer is cut at the write
// deadline; a body over the bound is 413.
func TestSocketVerbOutlivesDeadlines(t *testing.T) {
	slow := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.ReadAll(r.Body); err != nil {
			http.Error(w, err.Error(), http.StatusRequestEntityTooLarge)
			return
		}
		select {
		case <-r.Context().Done():
			return
		case <-time.After(700 * time.Millisecond):
		}
		io.WriteString(w, "done")
	})
	_, cl := serveUnix(t, slow, testLimits())
	resp, err := cl.Post("http://herd/v1/sessions/w-0/stop", "application/json", strings.NewReader(`{"grace":"1s"}`))
	if err != nil {
		t.Fatalf("[verb] expected a reply … got %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "done" {
		t.Errorf("[verb] expected the verb's reply … got %d %q", resp.StatusCode, b)
	}
	if resp, err := cl.Get("http://herd/v1/sessions"); err == nil {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(b) == "done" {
			t.Errorf("[slow read] expected cut at the write deadline … got the reply")
		}
	}
	big := strings.NewReader(strings.Repeat("x", int(apiLimits.MaxBody)+1))
	resp, err = cl.Post("http://herd/v1/roles", "application/json", big)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("[body over the bound] expected 413 … got %d", resp.StatusCode)
	}
}
