package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"herd"
	"herd/internal/api"
	"herd/internal/pgcluster"
	"herd/internal/testenv"
)

// startCluster is startPG keeping the cluster, to kill and restart it.
func startCluster(t *testing.T) *pgcluster.Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := pgcluster.Start(ctx)
	if errors.Is(err, pgcluster.ErrNoBinaries) {
		testenv.Require(t, "PostgreSQL", err.Error(), testenv.InstallPostgres)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := c.Stop(ctx); err != nil {
			t.Errorf("stop PostgreSQL: %v", err)
		}
	})
	return c
}

// storeAway reads whether e's daemon says its store is away.
func (e *env) storeAway() bool {
	e.t.Helper()
	h, err := api.NewClient(e.socket).Ping(context.Background(), 5*time.Second)
	if err != nil {
		e.t.Fatal(err)
	}
	return h.StoreAwaySince != nil
}

// daemonAlive reports whether e's daemon process has not exited (a
// child of the test that exited is a zombie until waited for).
func (e *env) daemonAlive() bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", e.daemon.Process.Pid))
	if err != nil {
		return false
	}
	_, rest, _ := strings.Cut(string(b), ") ")
	return !strings.HasPrefix(rest, "Z")
}

// TestPostgresOutageCampaign: three daemons with 50 sessions each (40
// steady agents, 10 crash-looping ones) on one PostgreSQL, which is
// killed with SIGKILL and restarted several times, held down longer
// each time. Every daemon keeps supervising meanwhile (the crash-looping
// agents are relaunched with their backoff, `herd get` answers with the
// store-away line), and once the store is back every incarnation an agent
// started is in the database with its events once each, no crash was
// relaunched twice, no steady agent was relaunched, and no daemon exited.
// The test command runs a short campaign (two outages of 2 and 6 s, 15
// agents a daemon: about a minute on a 2-core machine);
// HERD_CAMPAIGN=full (scripts/chaos.sh) runs four outages over 50 agents
// a daemon, and HERD_OUTAGE_CYCLES sets the number of outages.
func TestPostgresOutageCampaign(t *testing.T) {
	cycles, steady, crashy := campaign(2, 4), campaign(12, 40), campaign(3, 10)
	if v := os.Getenv("HERD_OUTAGE_CYCLES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("HERD_OUTAGE_CYCLES=%q: want a positive number", v)
		}
		cycles = n
	}
	pg := startCluster(t)
	dsn := pg.DSN("postgres")
	// The private cluster runs with synchronous_commit off (tests' speed):
	// a commit acknowledged just before a kill -9 could be lost by the
	// server itself. Production's default, on, for the campaign's database.
	{
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		_, err = conn.Exec(ctx, "ALTER DATABASE postgres SET synchronous_commit = on")
		conn.Close(ctx)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
	}
	starts := t.TempDir() // each agent writes its incarnation here as it starts
	var envs []*env
	for _, h := range []string{"ha", "hb", "hc"} {
		e := newFleetEnv(t, h, dsn, "host_timeout = \"30s\"",
			"[restart]", "initial_backoff = \"1s\"", "max_backoff = \"2s\"", "max_restarts = 0")
		// The store killed under it: a read that found it unreachable,
		// or a refused fleet write, before the journal took over, is
		// logged; nothing else may be.
		e.sb.ExpectErrors(`store unreachable`, `the store is away`)
		envs = append(envs, e)
	}
	for _, e := range envs {
		e.start()
	}
	for i, e := range envs {
		h := []string{"ha", "hb", "hc"}[i]
		file := filepath.Join(starts, h)
		e.must("run", "steady-"+h, "--runtime", "exec", "--replicas", strconv.Itoa(steady), "--",
			"sh", "-c", fmt.Sprintf("echo \"$HERD_INCARNATION\" >> %s; exec sleep 3600", file))
		e.must("run", "crashy-"+h, "--runtime", "exec", "--replicas", strconv.Itoa(crashy), "--",
			"sh", "-c", fmt.Sprintf("echo \"$HERD_INCARNATION\" >> %s; sleep 0.5; exit 3", file))
	}
	steadyPIDs := map[string]int{}
	for i, e := range envs {
		h := []string{"ha", "hb", "hc"}[i]
		e.waitFor("the steady agents running", 90*time.Second, func() bool {
			n := 0
			for _, s := range e.sessions() {
				if s.Role == "steady-"+h && s.State == herd.StateRunning && s.PID > 0 {
					n++
				}
			}
			return n == steady
		})
		for _, s := range e.sessions() {
			if s.Role == "steady-"+h {
				steadyPIDs[s.Name] = s.PID
			}
		}
	}

	var downFor time.Duration
	for c := 0; c < cycles; c++ {
		hold := time.Duration(2+4*c) * time.Second // 2s 6s 10s 14s ...
		if err := pg.Kill(); err != nil {
			t.Fatal(err)
		}
		down := time.Now()
		for _, e := range envs {
			e.waitFor("the daemon saying its store is away", 20*time.Second, e.storeAway)
		}
		// Local supervision goes on: the listing answers with the line.
		for _, e := range envs {
			out, errOut, code := e.herd("get", "sessions")
			if code != 0 || !strings.Contains(errOut, "store away since") || strings.Count(out, "\nsteady-") != steady {
				t.Fatalf("cycle %d: expected get to answer from the live set with the store-away line, got code %d\n%s\n%s", c, code, out, errOut)
			}
		}
		for time.Since(down) < hold {
			for _, e := range envs {
				if !e.daemonAlive() {
					t.Fatalf("cycle %d: a daemon exited while the store was away", c)
				}
			}
			time.Sleep(200 * time.Millisecond) // the outage's length, not a wait for a condition
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		err := pg.Restart(ctx)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		downFor += time.Since(down)
		for _, e := range envs {
			e.waitFor("the daemon's journal written to the store", 60*time.Second, func() bool { return !e.storeAway() })
		}
		t.Logf("cycle %d: store down %s", c, time.Since(down).Round(100*time.Millisecond))
	}
	// Quiesce: stop the crash loops, so that every incarnation started
	// has ended and been recorded.
	for i, e := range envs {
		h := []string{"ha", "hb", "hc"}[i]
		e.must("scale", "crashy-"+h, "--replicas", "0")
	}
	for i, e := range envs {
		h := []string{"ha", "hb", "hc"}[i]
		e.waitFor("the crash-looping sessions gone", 60*time.Second, func() bool {
			for _, s := range e.sessions() {
				if s.Role == "crashy-"+h && s.State.Live() {
					return false
				}
			}
			return true
		})
	}
	for _, e := range envs {
		if !e.daemonAlive() {
			t.Fatal("a daemon exited")
		}
	}

	// What the agents say they started, against what the database holds.
	started := map[string]string{} // incarnation -> host
	for _, h := range []string{"ha", "hb", "hc"} {
		f, err := os.Open(filepath.Join(starts, h))
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if id := strings.TrimSpace(sc.Text()); id != "" {
				if _, dup := started[id]; dup {
					t.Errorf("incarnation %s started twice", id)
				}
				started[id] = h
			}
		}
		f.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	type key struct{ inc, kind string }
	counts := map[key]int{}
	perSession := map[string]map[string]int{} // session -> kind -> count
	rows, err := conn.Query(ctx, "SELECT session, incarnation, kind FROM events")
	if err != nil {
		t.Fatal(err)
	}
	events := 0
	for rows.Next() {
		var s, inc, kind string
		if err := rows.Scan(&s, &inc, &kind); err != nil {
			t.Fatal(err)
		}
		events++
		counts[key{inc, kind}]++
		if perSession[s] == nil {
			perSession[s] = map[string]int{}
		}
		perSession[s][kind]++
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	incs := map[string]bool{} // id -> ended
	open := map[string]int{}  // session -> open incarnations
	rows, err = conn.Query(ctx, "SELECT id, session, ended_at IS NOT NULL FROM incarnations")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id, s string
		var ended bool
		if err := rows.Scan(&id, &s, &ended); err != nil {
			t.Fatal(err)
		}
		incs[id] = ended
		if !ended {
			open[s]++
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}

	lost, doubled, dupRelaunch := 0, 0, 0
	for k, n := range counts {
		switch k.kind {
		case herd.EventSpawned, herd.EventRestarted, herd.EventExited, herd.EventCrashed, herd.EventBackoff, herd.EventSummary, herd.EventStopped:
			if n > 1 {
				doubled += n - 1
				t.Errorf("incarnation %s: %d %s events", k.inc, n, k.kind)
			}
		}
	}
	for id := range started {
		ended, ok := incs[id]
		if !ok {
			lost++
			t.Errorf("incarnation %s started but not in the database", id)
			continue
		}
		if counts[key{id, herd.EventSpawned}]+counts[key{id, herd.EventRestarted}] != 1 {
			lost++
			var kinds []string
			for k, n := range counts {
				if k.inc == id {
					kinds = append(kinds, fmt.Sprintf("%s×%d", k.kind, n))
				}
			}
			t.Errorf("incarnation %s (host %s): no start event; its events: %v", id, started[id], kinds)
		}
		if ended && counts[key{id, herd.EventSummary}] != 1 {
			lost++
			t.Errorf("incarnation %s ended without its summary", id)
		}
	}
	crashes, relaunches := 0, 0
	for s, kinds := range perSession {
		if open[s] > 1 {
			dupRelaunch++
			t.Errorf("session %s: %d open incarnations", s, open[s])
		}
		crashes += kinds[herd.EventCrashed]
		relaunches += kinds[herd.EventRestarted]
		if kinds[herd.EventRestarted] > kinds[herd.EventCrashed] {
			dupRelaunch += kinds[herd.EventRestarted] - kinds[herd.EventCrashed]
			t.Errorf("session %s: %d relaunches for %d crashes", s, kinds[herd.EventRestarted], kinds[herd.EventCrashed])
		}
	}
	for i, e := range envs {
		h := []string{"ha", "hb", "hc"}[i]
		for _, s := range e.sessions() {
			if s.Role == "steady-"+h && (s.State != herd.StateRunning || s.PID != steadyPIDs[s.Name]) {
				dupRelaunch++
				t.Errorf("steady session %s: %s pid %d, was pid %d", s.Name, s.State, s.PID, steadyPIDs[s.Name])
			}
		}
	}
	for i, e := range envs {
		b, err := os.ReadFile(e.logPath)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			if strings.Contains(line, "store back") || strings.Contains(line, "store away:") ||
				(lost > 0 && (strings.Contains(line, "level=ERROR") || strings.Contains(line, "level=WARN"))) {
				t.Logf("%s: %s", []string{"ha", "hb", "hc"}[i], line)
			}
		}
	}
	t.Logf("outages: %d, store down %s in all; incarnations started by agents: %d; events in the database: %d; crashes: %d, relaunches: %d; lost: %d, doubled: %d, duplicate relaunches: %d, daemon exits: 0",
		cycles, downFor.Round(100*time.Millisecond), len(started), events, crashes, relaunches, lost, doubled, dupRelaunch)
}
