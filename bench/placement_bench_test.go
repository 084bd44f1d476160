package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os/exec"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"herd"
	"herd/internal/api"
	"herd/internal/herdtest"
	"herd/internal/pgcluster"
	"herd/internal/placement"
	"herd/internal/slots"
	"herd/internal/status"
	"herd/internal/store"
	"herd/internal/store/postgres"
)

// BenchmarkFleetPlacement: 10 simulated hosts × 100 sessions of one
// placed role (spread, failover) on one PostgreSQL (a private cluster),
// each host with its own Store, as its daemon has. One op is one tick of
// every host at once, each doing what a daemon does against the database
// in a probe interval: its heartbeat, the prober's read of its live
// sessions, one reconcile round (roles, its sessions, its placements, its
// open incarnations) and one round of the placement leader's loop (the
// leader's pass; the others' try of the lock). Reported: statements (each
// one round trip, BEGIN and COMMIT included) per host tick and for the
// leader's tick, the time of a host's tick, the connections a Store
// holds. Then a real daemon joins as a viewer: `herd get sessions` of the
// 1000 fleet sessions, and, once it leads, the connections it holds on
// the server (pool, listener and lock).
func BenchmarkFleetPlacement(b *testing.B) {
	const hosts, perHost = 10, 100
	ctx := context.Background()
	c, err := pgcluster.Start(ctx)
	if errors.Is(err, pgcluster.ErrNoBinaries) {
		b.Skip(err)
	}
	if err != nil {
		b.Fatal(err)
	}
	defer c.Stop(ctx)
	dsn := c.DSN("postgres")
	log := slog.New(slog.NewTextHandler(io.Discard, nil))

	stores := make([]*postgres.Store, hosts)
	trips := make([]atomic.Int64, hosts)
	for h := range stores {
		cfg, err := pgx.ParseConfig(dsn)
		if err != nil {
			b.Fatal(err)
		}
		cfg.Tracer = counter{&trips[h]}
		if stores[h], err = postgres.OpenConfig(ctx, cfg); err != nil {
			b.Fatal(err)
		}
		defer stores[h].Close()
	}
	name := func(h int) string { return fmt.Sprintf("h%d", h) }
	dir := b.TempDir()
	now := time.Now().UTC()
	err = stores[0].Update(ctx, func(tx store.Tx) error {
		for h := range hosts {
			if err := tx.PutHost(herd.Host{Name: name(h), BootID: "boot", Version: "bench", StartedAt: now, HeartbeatAt: now}); err != nil {
				return err
			}
		}
		return tx.PutRole(herd.Role{Name: "w", Replicas: hosts * perHost, Command: []string{"true"}, Workdir: dir,
			Runtime: herd.RuntimeExec, Agent: herd.AgentGeneric, Host: name(0), Spread: true, Failover: true,
			Restart: herd.RestartPolicy{Policy: herd.PolicyNever, InitialBackoff: time.Second, MaxBackoff: time.Second, ResetAfter: time.Minute}})
	})
	if err != nil {
		b.Fatal(err)
	}
	leaders := make([]*placement.Leader, hosts)
	for h := range leaders {
		leaders[h] = placement.NewLeader(placement.Options{Store: stores[h], Host: name(h), HostTimeout: time.Hour, Log: log})
		defer leaders[h].Close()
	}
	if !leaders[0].Tick(ctx) {
		b.Fatal("h0 should lead: nobody else tried")
	}
	// The placed slots run: a session and an open incarnation each.
	err = stores[0].Update(ctx, func(tx store.Tx) error {
		ps, err := tx.Placements()
		if err != nil {
			return err
		}
		if len(ps) != hosts*perHost {
			return fmt.Errorf("%d placements, want %d", len(ps), hosts*perHost)
		}
		for _, p := range ps {
			sn := herd.SessionName(p.Role, p.Index)
			inc := herd.Incarnation{ID: "inc-" + sn, Session: sn, Host: p.Host, RuntimeKind: herd.RuntimeExec, Argv: []string{"true"},
				Workdir: dir, StartedAt: now, Identity: herd.Identity{PID: 1000 + p.Index, BootID: "boot"}}
			s := herd.Session{Name: sn, Role: p.Role, Index: p.Index, Host: p.Host, State: herd.StateRunning, Runtime: herd.Alive,
				Process: herd.Alive, Incarnation: inc.ID, RuntimeKind: herd.RuntimeExec, StartedAt: &now, StateSince: now}
			if err := errors.Join(tx.PutIncarnation(inc), tx.PutSession(s)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	mgrs := make([]*status.Manager, hosts)
	sls := make([]*slots.Slots, hosts)
	for h := range hosts {
		mgrs[h] = status.New(stores[h], name(h), herd.RestartPolicy{}, log)
		sls[h] = slots.New(slots.Options{Status: mgrs[h], HostTimeout: time.Hour, Log: log})
	}
	tick := func(h int) error {
		err := stores[h].Update(ctx, func(tx store.Tx) error {
			return tx.PutHost(herd.Host{Name: name(h), BootID: "boot", Version: "bench", StartedAt: now, HeartbeatAt: time.Now().UTC()})
		})
		if err != nil {
			return err
		}
		_, live, err := mgrs[h].Live(ctx)
		if err != nil {
			return err
		}
		if len(live) != perHost {
			return fmt.Errorf("%s: %d live sessions, want %d", name(h), len(live), perHost)
		}
		sls[h].Reconcile(ctx)
		leaders[h].Tick(ctx)
		return nil
	}

	var (
		ops                int
		durs               []time.Duration
		leaderTrips, other int64
		maxConns           int
	)
	for h := range trips {
		trips[h].Store(0)
	}
	for b.Loop() {
		var wg sync.WaitGroup
		var mu sync.Mutex
		errs := make([]error, hosts)
		for h := range hosts {
			wg.Go(func() {
				start := time.Now()
				errs[h] = tick(h)
				mu.Lock()
				durs = append(durs, time.Since(start))
				mu.Unlock()
			})
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			b.Fatal(err)
		}
		for _, s := range stores {
			maxConns = max(maxConns, s.Conns())
		}
		ops++
	}
	for h := range trips {
		if h == 0 {
			leaderTrips += trips[h].Load()
		} else {
			other += trips[h].Load()
		}
	}
	sort.Slice(durs, func(i, j int) bool { return durs[i] < durs[j] })
	b.ReportMetric(float64(other)/float64(ops*(hosts-1)), "trips/host-tick")
	b.ReportMetric(float64(leaderTrips)/float64(ops), "trips/leader-tick")
	b.ReportMetric(float64(durs[len(durs)/2].Microseconds())/1000, "ms/host-tick-p50")
	b.ReportMetric(float64(durs[len(durs)*99/100].Microseconds())/1000, "ms/host-tick-p99")
	b.ReportMetric(float64(maxConns), "max-conns/store")
	// One host ticking alone: its own cost, without nine others beside it
	// on the same cores.
	var alone []time.Duration
	for range 20 {
		start := time.Now()
		if err := tick(1); err != nil {
			b.Fatal(err)
		}
		alone = append(alone, time.Since(start))
	}
	sort.Slice(alone, func(i, j int) bool { return alone[i] < alone[j] })
	b.ReportMetric(float64(alone[len(alone)/2].Microseconds())/1000, "ms/host-tick-alone-p50")

	// A real daemon views the fleet, then leads it.
	sb := herdtest.New(b, fmt.Sprintf("[daemon]\nhost = \"viewer\"\n[store]\ndriver = \"postgres\"\ndsn = %q\n[fleet]\nhost_timeout = \"1h\"\n",
		dsn+" application_name=herd-viewer"))
	sb.Daemon(bin, nil)
	cl := api.NewClient(sb.Socket)
	cli := func(args ...string) *exec.Cmd {
		c := exec.Command(bin, args...)
		c.Env = sb.Environ()
		return c
	}
	var getDurs []time.Duration
	for range 20 {
		start := time.Now()
		out, err := cli("get", "sessions", "-o", "name").Output()
		if err != nil {
			b.Fatal(err)
		}
		getDurs = append(getDurs, time.Since(start))
		if n := bytesCount(out, '\n'); n != hosts*perHost {
			b.Fatalf("expected %d sessions, got %d", hosts*perHost, n)
		}
	}
	sort.Slice(getDurs, func(i, j int) bool { return getDurs[i] < getDurs[j] })
	b.ReportMetric(float64(getDurs[len(getDurs)/2].Microseconds())/1000, "ms/get-sessions-1000-cli-p50")
	var apiDurs []time.Duration
	for range 20 {
		start := time.Now()
		var v []api.SessionView
		if err := cl.Do(ctx, "GET", "/v1/sessions", nil, nil, &v); err != nil || len(v) != hosts*perHost {
			b.Fatalf("expected %d sessions, got %d (%v)", hosts*perHost, len(v), err)
		}
		apiDurs = append(apiDurs, time.Since(start))
	}
	sort.Slice(apiDurs, func(i, j int) bool { return apiDurs[i] < apiDurs[j] })
	b.ReportMetric(float64(apiDurs[len(apiDurs)/2].Microseconds())/1000, "ms/get-sessions-1000-api-p50")

	// h0 gives the lead up; the viewer takes it, and holds its pool,
	// its listener and the lock within postgres.MaxConns.
	leaders[0].Close()
	herdtest.WaitFor(b, "the viewer leading", 20*time.Second, func() bool {
		var hv []api.HostView
		if err := cl.Do(ctx, "GET", "/v1/hosts", nil, nil, &hv); err != nil {
			return false
		}
		for _, v := range hv {
			if v.Name == "viewer" && v.Leader {
				return true
			}
		}
		return false
	})
	peak := 0
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() { _ = cli("get", "sessions").Run() })
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for polling := true; polling; {
		peak = max(peak, serverConns(b, dsn, "herd-viewer"))
		select {
		case <-done:
			polling = false
		case <-time.After(20 * time.Millisecond):
		}
	}
	b.ReportMetric(float64(peak), "server-conns/leading-daemon")
	if peak > postgres.MaxConns {
		b.Errorf("expected the leading daemon within %d connections, saw %d", postgres.MaxConns, peak)
	}
}

// counter counts the statements a Store sends.
type counter struct{ n *atomic.Int64 }

func (c counter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	return ctx
}

func (counter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// serverConns counts the server's connections named app.
func serverConns(b *testing.B, dsn, app string) int {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1", app).Scan(&n); err != nil {
		b.Fatal(err)
	}
	return n
}

func bytesCount(b []byte, c byte) int {
	n := 0
	for _, x := range b {
		if x == c {
			n++
		}
	}
	return n
}
