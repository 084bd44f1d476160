package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"herd"
	"herd/internal/web/auth"
)

// floodConfig: crash loops that never give up within the test (a crash
// every 1.5 s, relaunched after at most 500 ms) and the console on a
// private loopback port.
const floodConfig = `
[restart]
initial_backoff = "100ms"
max_backoff = "500ms"
max_restarts = 1000
[web]
listen = "127.0.0.1:0"
`

// TestConsoleFloodKeepsSupervision: a daemon whose descriptor limit is
// 1,024 holds its supervision while its console's port is flooded with
// 2,000 idle connections (each sent one unauthenticated request) and 200
// event streams that are never read: agents crash and are relaunched,
// each inside its cgroup where the machine has them; a steady agent's
// hooks keep arriving through the spool; `herd get sessions` answers
// every time; the connections beyond the console's cap are closed at once
// with the reason in the log, and nothing runs out of descriptors.
func TestConsoleFloodKeepsSupervision(t *testing.T) {
	t.Parallel()
	hasTmux(t)
	e := newEnv(t, floodConfig)
	e.start()
	var lim unix.Rlimit
	pid := e.daemon.Process.Pid
	if err := unix.Prlimit(pid, unix.RLIMIT_NOFILE, nil, &lim); err != nil {
		t.Fatal(err)
	}
	if err := unix.Prlimit(pid, unix.RLIMIT_NOFILE, &unix.Rlimit{Cur: 1024, Max: lim.Max}, nil); err != nil {
		t.Fatal(err)
	}
	e.must("apply", "-f", e.writeRoles("flood.toml", fmt.Sprintf(`
[[role]]
name = "crasher"
replicas = 3
command = [%q, "sim", "--interval", "100ms", "--exit-after", "1500ms", "--exit-code", "1"]
runtime = "tmux"

[[role]]
name = "steady"
replicas = 1
command = [%q, "sim", "--interval", "300ms", "--hooks", "PreToolUse:Bash,Stop"]
runtime = "tmux"
`, bin, bin)))
	e.waitState("steady-0", herd.StateRunning, 20*time.Second)

	link := strings.TrimSpace(e.must("web", "url"))
	u, err := url.Parse(link)
	if err != nil {
		t.Fatal(err)
	}
	addr := u.Host
	tok, err := os.ReadFile(filepath.Join(e.dir, auth.TokenFile))
	if err != nil {
		t.Fatal(err)
	}

	// The daemon's answer on its socket, timed from here: a CLI's own
	// start (a race-instrumented binary) would drown what is measured.
	sock := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", e.socket)
		},
	}}
	getSessions := func() (time.Duration, error) {
		start := time.Now()
		resp, err := sock.Get("http://herd/v1/sessions")
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		if _, err := io.Copy(io.Discard, resp.Body); err != nil || resp.StatusCode != http.StatusOK {
			return 0, fmt.Errorf("%s: %v", resp.Status, err)
		}
		return time.Since(start), nil
	}
	baseline := percentiles(t, "the socket's GET /v1/sessions, no flood", 50, getSessions)

	restarts := func() int { return len(e.events("--kind", herd.EventRestarted, "--limit", "0")) }
	hookAt := func() time.Time {
		for _, s := range e.sessions() {
			if s.Name == "steady-0" && s.LastActivityAt != nil {
				return *s.LastActivityAt
			}
		}
		return time.Time{}
	}
	restartsBefore, hooksBefore := restarts(), hookAt()

	// The flood: 200 event streams never read (those over the caps are
	// refused) ...
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	streams, refusedStreams := 0, 0
	for range 200 {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			refusedStreams++
			continue
		}
		conns = append(conns, c)
		fmt.Fprintf(c, "GET /api/v1/events HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n\r\n", addr, strings.TrimSpace(string(tok)))
		c.SetReadDeadline(time.Now().Add(2 * time.Second))
		line, err := bufio.NewReader(c).ReadString('\n')
		c.SetReadDeadline(time.Time{})
		if err == nil && strings.Contains(line, " 200 ") {
			streams++ // never read again
		} else {
			refusedStreams++
		}
	}
	// Then 2,000 connections, each with one request sent and nothing
	// more.
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				c, err := net.DialTimeout("tcp", addr, 5*time.Second)
				if err != nil {
					continue // the backlog full: refused is fine too
				}
				fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: %s\r\n\r\n", addr)
				mu.Lock()
				conns = append(conns, c)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	t.Logf("flood: %d event streams open (never read), %d refused; %d connections dialled in all", streams, refusedStreams, len(conns))

	flooded := percentiles(t, "the socket's GET /v1/sessions, flooded", 100, getSessions)
	if _, stderr, code := e.herd("get", "sessions"); code != 0 {
		t.Errorf("expected herd get sessions to answer during the flood … exit %d: %s", code, stderr)
	}
	e.waitFor("crashed agents relaunched during the flood", 30*time.Second, func() bool { return restarts() >= restartsBefore+6 })
	e.waitFor("the steady agent's hooks read during the flood", 30*time.Second, func() bool { return hookAt().After(hooksBefore) })
	if flooded.failed > 0 {
		t.Errorf("expected every get sessions answered during the flood … %d of %d failed (first: %v)", flooded.failed, flooded.n, flooded.err)
	}
	// Latency is the machine's as much as the daemon's (the e2e tests run
	// side by side): the typical call may not slow down by more than 5×,
	// and no call may wait like a starved daemon's (its calls timed out).
	if limit := max(50*time.Millisecond, 5*baseline.p50); flooded.p50 > limit {
		t.Errorf("expected the typical answer during the flood within %s (5 × the %s without it) … got %s", limit, baseline.p50, flooded.p50)
	}
	if flooded.p99 > 2*time.Second {
		t.Errorf("expected every answer during the flood within 2 s … p99 %s", flooded.p99)
	}

	log, _ := os.ReadFile(e.logPath)
	for _, bad := range []string{"too many open files", "launch outside a cgroup"} {
		if strings.Contains(string(log), bad) {
			t.Errorf("expected no %q in the daemon's log during the flood", bad)
		}
	}
	if !strings.Contains(string(log), "web: connection closed at once: ") {
		t.Errorf("expected the connections beyond the console's cap closed with the reason logged")
	}
	if streams > 64 {
		t.Errorf("expected at most 64 event streams open … got %d", streams)
	}
}

// latencies is what percentiles measured.
type latencies struct {
	n, failed int
	err       error
	p50, p99  time.Duration
}

// percentiles runs call n times and logs its p50 and p99.
func percentiles(t *testing.T, what string, n int, call func() (time.Duration, error)) latencies {
	t.Helper()
	l := latencies{n: n}
	var took []time.Duration
	for range n {
		d, err := call()
		if err != nil {
			l.failed++
			if l.err == nil {
				l.err = err
			}
			continue
		}
		took = append(took, d)
	}
	if len(took) > 0 {
		slices.Sort(took)
		l.p50, l.p99 = took[len(took)/2], took[min(len(took)-1, len(took)*99/100)]
	}
	t.Logf("%s: %d calls, p50 %s, p99 %s, %d failed", what, n, l.p50, l.p99, l.failed)
	return l
}
