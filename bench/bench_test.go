// Package bench measures herd end to end with a normally built binary:
// death-detection latency and the cost of a CLI call against a big store.
// Run: go test -run '^$' -bench . -benchtime 1x ./bench/
package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"syscall"
	"testing"
	"time"

	"herd"
	"herd/internal/api"
	"herd/internal/herdtest"
	"herd/internal/store"
	"herd/internal/store/sqlite"
)

var bin string

func TestMain(m *testing.M) {
	herdtest.Main(m, func() (func(), int) {
		flag.Parse()
		if f := flag.Lookup("test.bench"); f == nil || f.Value.String() == "" {
			// The test command runs this package's tests (pure checks of
			// the benchmarks' bounds): no binary to build.
			return nil, 0
		}
		dir, err := os.MkdirTemp("", "herd-bench-")
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			return nil, 1
		}
		cleanup := func() { os.RemoveAll(dir) }
		bin = filepath.Join(dir, "herd")
		if out, err := exec.Command("go", "build", "-o", bin, "herd/cmd/herd").CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "build: %v\n%s", err, out)
			return cleanup, 1
		}
		return cleanup, 0
	})
}

// daemon is one benchmark daemon in a sandbox of its own.
type daemon struct {
	sb     *herdtest.Sandbox
	dir    string
	cmd    *exec.Cmd
	client *api.Client
}

func startDaemon(b *testing.B, config string) *daemon {
	return startDaemonBin(b, bin, config)
}

// startDaemonBin starts the daemon binary path with config in a state
// directory and tmux server of its own.
func startDaemonBin(b *testing.B, path, config string) *daemon {
	return startDaemonIn(b, b.TempDir(), path, config)
}

// startDaemonIn is startDaemonBin on state directory dir, which may hold
// a store already.
func startDaemonIn(b *testing.B, dir, path, config string) *daemon {
	b.Helper()
	return startDaemonEdited(b, dir, path, config, nil)
}

// startDaemonEdited is startDaemonIn with the sandbox's herd.toml passed
// through edit (nil: as is) before the daemon reads it: a baseline binary
// may not know every table of today's.
func startDaemonEdited(b *testing.B, dir, path, config string, edit func([]byte) []byte) *daemon {
	b.Helper()
	sb := herdtest.NewAt(b, dir, config)
	if edit != nil {
		raw, err := os.ReadFile(sb.Config())
		if err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(sb.Config(), edit(raw), 0o600); err != nil {
			b.Fatal(err)
		}
	}
	d := &daemon{sb: sb, dir: sb.Dir}
	d.start(b, path)
	// Before the sandbox's cleanup (which kills what is left): the
	// daemon stops its agents itself.
	b.Cleanup(func() { d.client.Do(context.Background(), "DELETE", "/v1/roles/lat", nil, nil, nil) })
	return d
}

// start runs the daemon binary path on d's state directory and waits for
// it to answer.
func (d *daemon) start(b *testing.B, path string) {
	b.Helper()
	d.cmd = d.sb.Daemon(path, nil)
	d.client = api.NewClient(d.sb.Socket)
}

// restart stops the daemon with SIGTERM (its agents keep running) and
// starts binary path in its place.
func (d *daemon) restart(b *testing.B, path string) {
	b.Helper()
	d.cmd.Process.Signal(syscall.SIGTERM)
	d.cmd.Wait()
	d.start(b, path)
}

func (d *daemon) session(b *testing.B, name string) api.SessionView {
	var views []api.SessionView
	if err := d.client.Do(context.Background(), "GET", "/v1/sessions", nil, nil, &views); err != nil {
		b.Fatal(err)
	}
	for _, v := range views {
		if v.Name == name {
			return v
		}
	}
	return api.SessionView{}
}

// BenchmarkDeathLatency: SIGKILL of the agent → `crashed` event, over 50
// kills, with probe.interval = 1s. A prober that only polls would notice a
// death half an interval later on average (500 ms) and up to a whole one.
// With HERD_BENCH_BASE=REV that revision's binary runs side by side.
func BenchmarkDeathLatency(b *testing.B) {
	bins := binaries(b)
	for _, rt := range []string{herd.RuntimeTmux, herd.RuntimeExec} {
		for _, which := range []string{"base", "head"} {
			path, ok := bins[which]
			if !ok {
				continue
			}
			b.Run(rt+"/"+which, func(b *testing.B) {
				if _, err := exec.LookPath("tmux"); err != nil && rt == herd.RuntimeTmux {
					b.Skip("tmux is not installed")
				}
				deathLatency(b, path, rt)
			})
		}
	}
}

// deathLatency is one BenchmarkDeathLatency run of binary path.
func deathLatency(b *testing.B, path, rt string) {
	d := startDaemonBin(b, path, `
[probe]
interval = "1s"
[restart]
initial_backoff = "10ms"
max_backoff = "10ms"
max_restarts = 0
`)
	role := []herd.Role{{Name: "lat", Replicas: 1, Command: []string{"sleep", "3600"}, Workdir: d.dir, Runtime: rt}}
	if err := d.client.Do(context.Background(), "POST", "/v1/roles", nil, role, nil); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		var lat, exitLat []time.Duration
		var lastInc string
		for range 50 {
			var v api.SessionView
			for v.State != herd.StateRunning || v.PID == 0 || v.Incarnation == lastInc {
				time.Sleep(5 * time.Millisecond)
				v = d.session(b, "lat-0")
			}
			exited := exitWatch(v.PID, 10*time.Second)
			killed := time.Now()
			syscall.Kill(v.PID, syscall.SIGKILL)
			var crashedAt time.Time
			for crashedAt.IsZero() {
				var events []herd.Event
				q := map[string][]string{"session": {"lat-0"}, "kind": {herd.EventCrashed}}
				d.client.Do(context.Background(), "GET", "/v1/events", q, nil, &events)
				for _, e := range events {
					if e.Incarnation == v.Incarnation {
						crashedAt = e.Time
					}
				}
				time.Sleep(2 * time.Millisecond)
			}
			lat = append(lat, crashedAt.Sub(killed))
			if at := exited(); !at.IsZero() {
				exitLat = append(exitLat, at.Sub(killed))
			}
			lastInc = v.Incarnation
		}
		sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
		p50, p99 := lat[len(lat)/2], lat[len(lat)*99/100]
		b.ReportMetric(float64(p50.Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(p99.Microseconds())/1000, "p99-ms")
		b.ReportMetric(float64(lat[len(lat)-1].Microseconds())/1000, "max-ms")
		if len(exitLat) > 0 {
			// The machine's share: SIGKILL -> exited, seen by a
			// pidfd of the benchmark's own.
			sort.Slice(exitLat, func(i, j int) bool { return exitLat[i] < exitLat[j] })
			b.ReportMetric(float64(exitLat[len(exitLat)*99/100].Microseconds())/1000, "exit-p99-ms")
		}
	}
}

// BenchmarkGetSessions1000: one `herd get sessions` CLI call with 1000
// sessions in the store, against `herd version` (process start, no daemon
// call) in the same run: another host's sessions (read from the store),
// and this host's (served from the daemon's live set).
func BenchmarkGetSessions1000(b *testing.B) {
	here, err := os.Hostname()
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name, host string
		states     []herd.State
	}{
		// Live sessions of another host: listed with their pids like
		// local ones, and left alone by this daemon.
		{"elsewhere", "bench-elsewhere", []herd.State{herd.StateRunning, herd.StateRunning, herd.StateStalled}},
		// This host's sessions, ended (a live one would be probed and
		// found dead): nothing relaunches a failed or succeeded slot.
		{"here", here, []herd.State{herd.StateSucceeded, herd.StateSucceeded, herd.StateFailed}},
	} {
		dir := fillSessions(b, c.host, c.states)
		for _, which := range []string{"base", "head"} {
			if path, ok := binaries(b)[which]; ok {
				b.Run(c.name+"/"+which, func(b *testing.B) { getSessions(b, path, dir) })
			}
		}
	}
}

// fillSessions makes a state directory whose store holds a role of 1000
// replicas and its 1000 sessions on host, in states by turns.
func fillSessions(b *testing.B, host string, states []herd.State) string {
	return fillSessionsN(b, host, states, 1000)
}

// fillSessionsN is fillSessions with n sessions.
func fillSessionsN(b *testing.B, host string, states []herd.State, n int) string {
	dir := b.TempDir()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(dir, "herd.db"))
	if err != nil {
		b.Fatal(err)
	}
	now := time.Now().UTC()
	err = st.Update(ctx, func(tx store.Tx) error {
		tx.PutRole(herd.Role{Name: "w", Replicas: n, Command: []string{"true"}, Workdir: dir, Runtime: herd.RuntimeExec, Agent: herd.AgentGeneric, Host: host,
			Restart: herd.RestartPolicy{Policy: herd.PolicyNever, InitialBackoff: time.Second, MaxBackoff: time.Second, ResetAfter: time.Minute}})
		for i := range n {
			code := 1
			name := herd.SessionName("w", i)
			inc := herd.Incarnation{ID: fmt.Sprintf("inc-%d", i), Session: name, Host: host, RuntimeKind: herd.RuntimeExec, Argv: []string{"true"}, Workdir: dir, StartedAt: now,
				Root: herd.Identity{PID: 100000 + i, StartTime: 1, BootID: "elsewhere"}}
			if !states[i%len(states)].Live() {
				inc.EndedAt = &now
			}
			if err := tx.PutIncarnation(inc); err != nil {
				return err
			}
			s := herd.Session{Name: name, Role: "w", Index: i, Host: host, State: states[i%len(states)], Incarnation: inc.ID, RuntimeKind: herd.RuntimeExec, StartedAt: &now, StateSince: now,
				Exit:     &herd.Exit{Code: &code, Reason: herd.ReasonExitCode, At: now},
				Snapshot: &herd.Snapshot{Argv: []string{"true"}, Workdir: dir, EnvNames: []string{"HOME", "PATH"}, Agent: herd.AgentGeneric, RuntimeKind: herd.RuntimeExec}}
			if err := tx.PutSession(s); err != nil {
				return err
			}
		}
		return nil
	})
	st.Close()
	if err != nil {
		b.Fatal(err)
	}
	return dir
}

// getSessions measures the API and the CLI of binary path against the
// store in dir.
func getSessions(b *testing.B, path, dir string) {
	ctx := context.Background()
	sb := herdtest.NewAt(b, dir, "")
	cmd := sb.Daemon(path, nil)
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	c := api.NewClient(sb.Socket)
	run := func(b *testing.B, args ...string) {
		for b.Loop() {
			cli := exec.Command(path, args...)
			cli.Env = sb.Environ()
			out, err := cli.Output()
			if err != nil {
				b.Fatal(err)
			}
			switch {
			case args[len(args)-1] == "json":
				var v []api.SessionView
				if err := json.Unmarshal(out, &v); err != nil || len(v) != 1000 {
					b.Fatalf("expected 1000 sessions, got %d (%v)", len(v), err)
				}
			case args[0] == "get":
				if n := bytes.Count(out, []byte("\n")); n != 1001 {
					b.Fatalf("expected a header and 1000 rows, got %d lines", n)
				}
			case !bytes.HasPrefix(out, []byte("herd")):
				b.Fatalf("unexpected version output %q", out)
			}
		}
	}
	b.Run("api-only", func(b *testing.B) {
		for b.Loop() {
			var v []api.SessionView
			if err := c.Do(ctx, "GET", "/v1/sessions", nil, nil, &v); err != nil || len(v) != 1000 {
				b.Fatalf("expected 1000 sessions, got %d (%v)", len(v), err)
			}
		}
	})
	b.Run("get-sessions-json", func(b *testing.B) { run(b, "get", "sessions", "-o", "json") })
	b.Run("get-sessions-table", func(b *testing.B) { run(b, "get", "sessions") })
	b.Run("version-baseline", func(b *testing.B) { run(b, "version") })
}
