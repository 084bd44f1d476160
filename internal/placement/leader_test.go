package placement

import (
	"context"
	"io"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"herd"
	"herd/internal/herdtest"
	"herd/internal/store"
	"herd/internal/store/pgtest"
	"herd/internal/store/postgres"
	"herd/internal/store/sqlite"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// runLeader runs a Leader of host on st until the returned stop is called.
func runLeader(t *testing.T, st store.Store, host string) (*Leader, func()) {
	l := NewLeader(Options{Store: st, Host: host, HostTimeout: 3 * time.Second, Interval: 50 * time.Millisecond, Log: quiet()})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { l.Run(ctx) })
	var once sync.Once
	stop := func() { once.Do(func() { cancel(); wg.Wait() }) }
	t.Cleanup(stop)
	return l, stop
}

// waitUntil polls cond until it holds or fails t after timeout.
func waitUntil(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	herdtest.WaitFor(t, what, timeout, cond)
}

// TestLeaderElection: three daemons' Leaders on one PostgreSQL: exactly
// one leads at any moment; when it goes another takes over, and the new
// leader places a placed role's slots.
func TestLeaderElection(t *testing.T) {
	dsn := pgtest.DSN(t)
	var stores []store.Store
	for range 3 {
		s, err := postgres.Open(t.Context(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		stores = append(stores, s)
	}
	names := []string{"a", "b", "c"}
	leaders := make([]*Leader, 3)
	stops := make([]func(), 3)
	for i := range 3 {
		leaders[i], stops[i] = runLeader(t, stores[i], names[i])
	}
	leading := func() (n, who int) {
		who = -1
		for i, l := range leaders {
			if l != nil && l.Leading() {
				n, who = n+1, i
			}
		}
		return n, who
	}
	waitUntil(t, "a leader", 10*time.Second, func() bool { n, _ := leading(); return n == 1 })
	// One leader only, for a while.
	for end := time.Now().Add(time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if n, _ := leading(); n != 1 {
			t.Fatalf("expected exactly one leader, got %d", n)
		}
	}
	_, first := leading()
	stops[first]()
	leaders[first] = nil
	waitUntil(t, "another leader", 10*time.Second, func() bool { n, who := leading(); return n == 1 && who != first })
	_, second := leading()

	// The new leader places a spread role over the hosts up.
	now := time.Now().UTC()
	err := stores[second].Update(t.Context(), func(tx store.Tx) error {
		for _, h := range names {
			if err := tx.PutHost(herd.Host{Name: h, HeartbeatAt: now}); err != nil {
				return err
			}
		}
		return tx.PutRole(herd.Role{Name: "w", Replicas: 3, Spread: true})
	})
	if err != nil {
		t.Fatal(err)
	}
	var got []herd.Placement
	waitUntil(t, "three slots placed", 10*time.Second, func() bool {
		_ = stores[second].View(t.Context(), func(tx store.Tx) error {
			var err error
			got, err = tx.Placements()
			return err
		})
		return len(got) == 3
	})
	seen := map[string]bool{}
	for _, p := range got {
		seen[p.Host] = true
	}
	if len(seen) != 3 {
		t.Errorf("expected one slot per host, got %+v", got)
	}
	var kv string
	_ = stores[second].View(t.Context(), func(tx store.Tx) error { kv, _, _ = tx.KV(KVLeader); return nil })
	if kv != names[second] {
		t.Errorf("expected kv to name the leader %s, got %q", names[second], kv)
	}
}

// TestLeaderSQLite: on SQLite the one daemon leads.
func TestLeaderSQLite(t *testing.T) {
	st, err := sqlite.Open(t.Context(), t.TempDir()+"/herd.db")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	l, _ := runLeader(t, st, "solo")
	waitUntil(t, "the one daemon leading", 5*time.Second, l.Leading)
}

// viewCounter counts the read-only transactions of a store that counts its
// writes.
type viewCounter struct {
	*sqlite.Store
	views int
}

func (v *viewCounter) View(ctx context.Context, fn func(store.Tx) error) error {
	v.views++
	return v.Store.View(ctx, fn)
}

// TestLoneLeaderIdlePasses: on SQLite (one daemon, the one writer) a pass
// that found nothing placed is not run again until the store is written;
// a placed role applied then is placed at the next pass.
func TestLoneLeaderIdlePasses(t *testing.T) {
	db, err := sqlite.Open(t.Context(), t.TempDir()+"/herd.db")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	st := &viewCounter{Store: db}
	l := NewLeader(Options{Store: st, Host: "solo", HostTimeout: 3 * time.Second, Interval: time.Hour, Log: quiet()})
	for range 3 {
		if _, err := l.Pass(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	if st.views != 1 {
		t.Errorf("[nothing placed] expected 1 read over 3 passes, got %d", st.views)
	}
	err = st.Update(t.Context(), func(tx store.Tx) error {
		return tx.PutRole(herd.Role{Name: "w", Replicas: 2, Command: []string{"sleep", "1"}, Workdir: "/", Runtime: herd.RuntimeExec, Hosts: []string{"solo"}})
	})
	if err != nil {
		t.Fatal(err)
	}
	c, err := l.Pass(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Put) != 2 {
		t.Fatalf("[placed role applied] expected its 2 slots placed, got %+v", c)
	}
	views := st.views
	if _, err := l.Pass(t.Context()); err != nil {
		t.Fatal(err)
	}
	if st.views != views+1 {
		t.Errorf("[a placed role] expected every pass to read, got %d reads for one pass", st.views-views)
	}
}

// TestLeaderWaitsForLease: on PostgreSQL, a failover slot of a host whose
// heartbeat is stale moves only once that host's lease, judged by the
// database's clock, ended more than the margin ago; the move raises the
// slot's generation (its fencing token).
func TestLeaderWaitsForLease(t *testing.T) {
	st, err := postgres.Open(t.Context(), pgtest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	const lease = 10 * time.Second
	// b's heartbeat is long stale; its lease ended 2s ago by the
	// database's clock (within the margin, the lease again).
	var dbNow time.Time
	err = st.Update(t.Context(), func(tx store.Tx) error {
		if dbNow, err = tx.Now(); err != nil {
			return err
		}
		b := herd.Host{Name: "b", StartedAt: dbNow.Add(-time.Hour), HeartbeatAt: dbNow.Add(-time.Hour)}
		if err := tx.PutHost(b); err != nil {
			return err
		}
		if err := tx.SetLease("b", dbNow.Add(-2*time.Second)); err != nil {
			return err
		}
		if err := tx.PutRole(herd.Role{Name: "w", Replicas: 1, Command: []string{"sleep", "1"}, Workdir: "/", Runtime: herd.RuntimeExec,
			Hosts: []string{"b", "a"}, Failover: true}); err != nil {
			return err
		}
		return tx.PutPlacement(herd.Placement{Role: "w", Index: 0, Host: "b", AssignedAt: dbNow.Add(-time.Hour)})
	})
	if err != nil {
		t.Fatal(err)
	}
	placed := func() herd.Placement {
		var p herd.Placement
		if err := st.View(t.Context(), func(tx store.Tx) error { p, err = tx.Placement("w", 0); return err }); err != nil {
			t.Fatal(err)
		}
		return p
	}
	before := placed()
	l := NewLeader(Options{Store: st, Host: "a", HostTimeout: 3 * time.Second, Lease: lease, Interval: time.Hour, Log: quiet()})
	if _, err := l.Pass(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := placed(); got != before {
		t.Fatalf("[lease within the margin] expected the slot to stay %+v, got %+v", before, got)
	}
	// The lease ended longer ago than the margin: the slot moves.
	if err := st.Update(t.Context(), func(tx store.Tx) error { return tx.SetLease("b", dbNow.Add(-lease-time.Second)) }); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Pass(t.Context()); err != nil {
		t.Fatal(err)
	}
	got := placed()
	if got.Host != "a" || got.Generation <= before.Generation {
		t.Errorf("[lease released] expected the slot on a with a generation above %d, got %+v", before.Generation, got)
	}
}
