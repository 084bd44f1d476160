package postgres

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"herd"
	"herd/internal/store"
	"herd/internal/store/pgtest"
)

// BenchmarkFleetTick simulates the hosts of a fleet ticking together on one
// database, each through its own Store: every host reads its sessions and
// writes the few that changed, each write a compare-and-set transaction
// (one with an event). One op is one tick of every host.
func BenchmarkFleetTick(b *testing.B) {
	const (
		hosts           = 10
		sessionsPerHost = 100
		writesPerTick   = 5
	)
	dsn := pgtest.DSN(b)
	stores := make([]*Store, hosts)
	var trips atomic.Int64
	for h := range stores {
		cfg, err := pgx.ParseConfig(dsn)
		if err != nil {
			b.Fatal(err)
		}
		cfg.Tracer = roundTrips{&trips}
		if stores[h], err = openConfig(b.Context(), cfg); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = stores[h].Close() })
	}
	now := time.Now()
	err := stores[0].Update(b.Context(), func(tx store.Tx) error {
		for h := range hosts {
			for i := range sessionsPerHost {
				err := tx.PutSession(herd.Session{Name: herd.SessionName(fmt.Sprint("w", h), i),
					Role: fmt.Sprint("w", h), Index: i, Host: fmt.Sprint("host-", h), State: herd.StateRunning,
					Incarnation: fmt.Sprint("inc-", h, "-", i), StateSince: now, StartedAt: &now})
				if err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}

	tick := func(h, n int) error {
		s, host := stores[h], fmt.Sprint("host-", h)
		var own []herd.Session
		if err := s.View(b.Context(), func(tx store.Tx) error {
			var err error
			own, err = tx.SessionsOnHost(host)
			return err
		}); err != nil {
			return err
		}
		if len(own) != sessionsPerHost {
			return fmt.Errorf("%s: %d sessions", host, len(own))
		}
		for w := range writesPerTick {
			seen := own[(n*writesPerTick+w)%len(own)]
			err := s.Update(b.Context(), func(tx store.Tx) error {
				cur, err := tx.Session(seen.Name)
				if err != nil || cur.Incarnation != seen.Incarnation {
					return err
				}
				cur.LastActivityAt = new(time.Now())
				if err := tx.PutSession(cur); err != nil {
					return err
				}
				if w > 0 {
					return nil
				}
				return tx.AppendEvent(&herd.Event{Time: time.Now(), Host: host, Session: cur.Name,
					Incarnation: cur.Incarnation, Kind: herd.EventActivity})
			})
			if err != nil {
				return err
			}
		}
		return nil
	}

	n, maxConns := 0, 0
	trips.Store(0)
	for b.Loop() {
		var wg sync.WaitGroup
		errs := make([]error, hosts)
		for h := range hosts {
			wg.Go(func() { errs[h] = tick(h, n) })
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				b.Fatal(err)
			}
		}
		for _, s := range stores {
			maxConns = max(maxConns, s.Conns())
		}
		n++
	}
	var retries uint64
	for _, s := range stores {
		retries += s.Retries()
	}
	b.ReportMetric(float64(retries)/float64(n), "retries/op")
	b.ReportMetric(float64(maxConns), "max-conns/store")
	b.ReportMetric(float64(trips.Load())/float64(n*hosts), "round-trips/host-tick")
}

// roundTrips counts the statements sent to the server (BEGIN and COMMIT
// included), each one round trip.
type roundTrips struct{ n *atomic.Int64 }

func (r roundTrips) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	r.n.Add(1)
	return ctx
}

func (roundTrips) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
