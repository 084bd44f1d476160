package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"herd"
	"herd/internal/api"
)

// console is a benchmark daemon with its web console.
type console struct {
	*daemon
	// base is the console's URL, token its API token.
	base, token string
}

// startConsoleIn starts the daemon on state directory dir with its
// console on a free loopback port, and config added to herd.toml.
func startConsoleIn(b *testing.B, dir, config string) *console {
	b.Helper()
	addr := freeAddr(b)
	d := startDaemonIn(b, dir, bin, config+fmt.Sprintf("\n[web]\nlisten = %q\n", addr))
	c := &console{daemon: d, base: "http://" + addr}
	deadline := time.Now().Add(10 * time.Second)
	for {
		tok, err := os.ReadFile(filepath.Join(d.dir, "web.token"))
		if err == nil && len(strings.TrimSpace(string(tok))) >= 32 {
			c.token = strings.TrimSpace(string(tok))
			if _, err := c.get("/api/v1/whoami"); err == nil {
				return c
			}
		}
		if time.Now().After(deadline) {
			b.Fatalf("console at %s: not serving (%v)", addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// get reads one console path with the API token.
func (c *console) get(path string) ([]byte, error) {
	req, err := http.NewRequest(http.MethodGet, c.base+path, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("GET %s: %s: %s", path, resp.Status, body)
	}
	return body, err
}

// sseMessage is one server-sent event: its name ("" for the default)
// and when its blank line arrived.
type sseMessage struct {
	event string
	at    time.Time
}

// stream opens the console's event stream, as a browser's EventSource
// does; its messages arrive on the channel until cancel.
func (c *console) stream(b *testing.B) (<-chan sseMessage, func()) {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/api/v1/events", nil)
	req.Header.Set("Authorization", "Bearer "+c.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		b.Fatal(err)
	}
	out := make(chan sseMessage, 1024)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		event, data := "", false
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if data {
					select {
					case out <- sseMessage{event: event, at: time.Now()}:
					default:
					}
				}
				event, data = "", false
			case strings.HasPrefix(line, "event: "):
				event = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				data = true
			}
		}
	}()
	return out, func() { cancel(); <-done }
}

// BenchmarkConsoleServe: what the console costs to read at 1000 sessions
// (another host's, from the store), against the daemon's own API on its
// unix socket and `herd get sessions -o json` in the same run:
//
//   - console-sessions: GET /api/v1/sessions over loopback TCP;
//   - console-fleet-page: what the fleet page loads: the page, its two
//     scripts and style, /api/v1/sessions and /api/v1/inbox (a third of
//     the sessions are stalled: 333 inbox items);
//   - api-socket: GET /v1/sessions on the unix socket;
//   - cli: `herd get sessions -o json`, a process.
func BenchmarkConsoleServe(b *testing.B) {
	dir := fillSessions(b, "bench-elsewhere", []herd.State{herd.StateRunning, herd.StateRunning, herd.StateStalled})
	c := startConsoleIn(b, dir, "")
	ctx := context.Background()
	const rounds = 30
	measure := func(what string, f func() error) time.Duration {
		var ds []time.Duration
		for range rounds {
			t0 := time.Now()
			if err := f(); err != nil {
				b.Fatalf("%s: %v", what, err)
			}
			ds = append(ds, time.Since(t0))
		}
		p50 := pct(ds, 50)
		b.ReportMetric(ms(p50), what+"-p50-ms")
		fmt.Printf("%-20s p50 %8s  p99 %8s\n", what, p50.Round(10*time.Microsecond), pct(ds, 99).Round(10*time.Microsecond))
		return p50
	}
	for b.Loop() {
		sessions := measure("console-sessions", func() error {
			body, err := c.get("/api/v1/sessions")
			var v []api.SessionView
			if err == nil {
				err = json.Unmarshal(body, &v)
			}
			if err == nil && len(v) != 1000 {
				err = fmt.Errorf("%d sessions, want 1000", len(v))
			}
			return err
		})
		page := measure("console-fleet-page", func() error {
			for _, p := range []string{"/", "/static/common.js", "/static/index.js", "/static/app.css", "/api/v1/whoami", "/api/v1/sessions", "/api/v1/inbox"} {
				if _, err := c.get(p); err != nil {
					return err
				}
			}
			return nil
		})
		sock := measure("api-socket", func() error {
			var v []api.SessionView
			return c.client.Do(ctx, "GET", "/v1/sessions", nil, nil, &v)
		})
		cli := measure("cli", func() error {
			cmd := exec.Command(bin, "get", "sessions", "-o", "json")
			cmd.Env = c.sb.Environ()
			_, err := cmd.Output()
			return err
		})
		line := fmt.Sprintf("1000 sessions, p50 ratios: console-sessions/api-socket %.2f, console-sessions/cli %.2f, fleet-page/cli %.2f",
			float64(sessions)/float64(sock), float64(sessions)/float64(cli), float64(page)/float64(cli))
		b.Log(line)
		fmt.Println(line)
	}
}

// BenchmarkConsoleLatency: a change made through the API (an agent's
// hook reporting a new activity) until the console's event stream tells
// a browser of it (its "sessions" message), at 100 and 1000 sessions
// (one live exec agent of this host, the rest another host's rows), over
// 40 changes each. It runs with HERD_CONSOLE set (about a minute).
func BenchmarkConsoleLatency(b *testing.B) {
	if os.Getenv("HERD_CONSOLE") == "" {
		b.Skip("set HERD_CONSOLE=1 to measure the console's change latency (a minute)")
	}
	for _, n := range []int{100, 1000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			for b.Loop() {
				consoleLatency(b, n)
			}
		})
	}
}

func consoleLatency(b *testing.B, n int) {
	dir := fillSessionsN(b, "bench-elsewhere", []herd.State{herd.StateRunning, herd.StateSucceeded}, n-1)
	c := startConsoleIn(b, dir, "[probe]\ninterval = \"1s\"\n")
	ctx := context.Background()
	role := []herd.Role{{Name: "flip", Replicas: 1, Command: []string{bin, "sim", "--quiet", "--interval", "10s"}, Workdir: c.dir,
		Runtime: herd.RuntimeExec, Agent: herd.AgentClaude, AgentProcess: "herd"}}
	if err := c.client.Do(ctx, "POST", "/v1/roles", nil, role, nil); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.client.Do(ctx, "DELETE", "/v1/roles/flip", nil, nil, nil) })
	var v api.SessionView
	deadline := time.Now().Add(time.Minute)
	for v = c.session(b, "flip-0"); v.State != herd.StateRunning; v = c.session(b, "flip-0") {
		if time.Now().After(deadline) {
			b.Fatalf("flip-0: expected running … got %q", v.State)
		}
		time.Sleep(100 * time.Millisecond)
	}
	fixture := func(name string) []byte {
		p, err := os.ReadFile(filepath.Join("..", "internal", "agents", "testdata", "claude", "2.1.330", name))
		if err != nil {
			b.Fatal(err)
		}
		return p
	}
	hooks := [2][2]any{{"PreToolUse", fixture("hook-pre-tool-use.json")}, {"Stop", fixture("hook-stop.json")}}
	msgs, cancel := c.stream(b)
	defer cancel()
	// The console reads its baseline at its first poll after a stream
	// opens (the stream's first message has the page read everything).
	time.Sleep(time.Second)
	var lat []time.Duration
	for i := range 40 {
		// Quiet first: what an earlier change or a probe set off is
		// drained, so the next message is this change's.
		time.Sleep(time.Duration(150+i%5*37) * time.Millisecond)
		for len(msgs) > 0 {
			<-msgs
		}
		h := hooks[i%2]
		rep := api.ActivityReport{Session: "flip-0", Incarnation: v.Incarnation, Event: h[0].(string), Payload: h[1].([]byte),
			At: time.Now().UTC(), Agent: herd.AgentClaude}
		t0 := time.Now()
		if err := c.client.Do(ctx, "POST", "/v1/activity", nil, rep, nil); err != nil {
			b.Fatal(err)
		}
		timeout := time.After(5 * time.Second)
	wait:
		for {
			select {
			case m := <-msgs:
				if m.event == "sessions" {
					lat = append(lat, m.at.Sub(t0))
					break wait
				}
			case <-timeout:
				b.Fatalf("change %d: no sessions message in 5s", i)
			}
		}
	}
	b.ReportMetric(ms(pct(lat, 50)), "p50-ms")
	b.ReportMetric(ms(pct(lat, 99)), "p99-ms")
	line := fmt.Sprintf("change → browser, %d sessions: p50 %s p99 %s max %s (%d changes)", n,
		pct(lat, 50).Round(100*time.Microsecond), pct(lat, 99).Round(100*time.Microsecond), pct(lat, 100).Round(100*time.Microsecond), len(lat))
	b.Log(line)
	fmt.Println(line)
}

// BenchmarkConsoleIdleCPU: the daemon's own CPU (in % of one core) with
// 100 idle tmux agents (idleCommand) and stall_after = "24h", over a
// window of HERD_CONSOLE_WINDOW (30s) with no console open, then one with
// 20 open event streams (20 browsers on the fleet page), then none
// again; the goal is under 1 % with 20. It runs with HERD_CONSOLE_IDLE
// set (about 3 minutes; HERD_CONSOLE_PROFILE=FILE writes a 20s CPU profile
// of the daemon taken while the consoles are open):
//
//	HERD_CONSOLE_IDLE=1 go test -run '^$' -bench ConsoleIdleCPU -benchtime 1x -timeout 20m ./bench/
func BenchmarkConsoleIdleCPU(b *testing.B) {
	if os.Getenv("HERD_CONSOLE_IDLE") == "" {
		b.Skip("set HERD_CONSOLE_IDLE=1 to measure the daemon's CPU with consoles open (minutes)")
	}
	if _, err := exec.LookPath("tmux"); err != nil {
		b.Skip("tmux is not installed")
	}
	window := 30 * time.Second
	if d, err := time.ParseDuration(os.Getenv("HERD_CONSOLE_WINDOW")); err == nil && d > 0 {
		window = d
	}
	const n, browsers = 100, 20
	for b.Loop() {
		pp := freeAddr(b)
		c := startConsoleIn(b, b.TempDir(), fmt.Sprintf("[watchdog]\nstall_after = \"24h\"\n[metrics]\nlisten = %q\n", pp))
		role := []herd.Role{{Name: "lat", Replicas: n, Command: idleCommand(bin), Workdir: c.dir, Runtime: herd.RuntimeTmux}}
		if err := c.client.Do(context.Background(), "POST", "/v1/roles", nil, role, nil); err != nil {
			b.Fatal(err)
		}
		waitRunning(b, c.daemon, n)
		time.Sleep(15 * time.Second) // settle: adoption, the reaper's first pass
		pid := c.cmd.Process.Pid
		measure := func() float64 {
			cpu0, t0 := cpuOf(b, pid), time.Now()
			time.Sleep(window)
			return (cpuOf(b, pid) - cpu0).Seconds() / time.Since(t0).Seconds() * 100
		}
		none := measure()
		var cancels []func()
		for range browsers {
			_, cancel := c.stream(b)
			cancels = append(cancels, cancel)
		}
		if path := os.Getenv("HERD_CONSOLE_PROFILE"); path != "" {
			// A CPU profile of the daemon while the consoles are open.
			go fetch(b, "http://"+pp+"/debug/pprof/profile?seconds=20", path)
		}
		open := measure()
		for _, cancel := range cancels {
			cancel()
		}
		after := measure()
		b.ReportMetric(none, "0-consoles-%core")
		b.ReportMetric(open, "20-consoles-%core")
		line := fmt.Sprintf("idle fleet of %d, daemon CPU per %s window: 0 consoles %.2f%%, %d consoles %.2f%% (goal < 1%%), 0 again %.2f%%; +%.2f%% for %d consoles",
			n, window, none, browsers, open, after, open-(none+after)/2, browsers)
		b.Log(line)
		fmt.Println(line)
	}
}
