package backend

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"herd"
	"herd/internal/config"
	"herd/internal/store"
	"herd/internal/store/pgtest"
)

// Fleet shape of the benchmarks: hosts × sessionsPerHost sessions.
const (
	hosts           = 10
	sessionsPerHost = 100
)

// eachBackend runs fn on a fresh store of every backend.
func eachBackend(b *testing.B, fn func(b *testing.B, s store.Store)) {
	backends := []struct {
		name string
		cfg  func(b *testing.B) (config.Store, string)
	}{
		{"sqlite", func(b *testing.B) (config.Store, string) {
			return config.Store{Driver: config.DriverSQLite}, filepath.Join(b.TempDir(), "state")
		}},
		{"postgres", func(b *testing.B) (config.Store, string) {
			return config.Store{Driver: config.DriverPostgres, DSN: pgtest.DSN(b)}, ""
		}},
	}
	for _, be := range backends {
		b.Run(be.name, func(b *testing.B) {
			cfg, dir := be.cfg(b)
			s, err := Open(context.Background(), cfg, dir)
			if err != nil {
				b.Fatalf("open: %v", err)
			}
			b.Cleanup(func() { _ = s.Close() })
			seedFleet(b, s)
			fn(b, s)
		})
	}
}

// seedFleet stores hosts × sessionsPerHost running sessions, each with an
// exit record and a resume snapshot, as a fleet that has seen some crashes.
func seedFleet(b *testing.B, s store.Store) {
	b.Helper()
	now := time.Now()
	err := s.Update(b.Context(), func(tx store.Tx) error {
		for h := range hosts {
			host := fmt.Sprint("host-", h)
			if err := tx.PutHost(herd.Host{Name: host, BootID: "b", StartedAt: now, HeartbeatAt: now}); err != nil {
				return err
			}
			for i := range sessionsPerHost {
				code := 1
				se := herd.Session{
					Name: herd.SessionName(fmt.Sprint("worker", h), i), Role: fmt.Sprint("worker", h), Index: i,
					Host: host, State: herd.StateRunning, Incarnation: fmt.Sprint("inc-", h, "-", i),
					RuntimeKind: herd.RuntimeTmux, Runtime: herd.Alive, Process: herd.Alive,
					Activity: herd.ActivityWorking, StartedAt: &now, LastActivityAt: &now, StateSince: now,
					Exit:     &herd.Exit{Code: &code, Reason: herd.ReasonExitCode, At: now},
					Snapshot: &herd.Snapshot{Argv: []string{"claude"}, Workdir: "/src"},
				}
				if err := tx.PutSession(se); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		b.Fatalf("seed: %v", err)
	}
}

// BenchmarkFleetSessions reads every session of the fleet in one View, as
// `herd get sessions` does.
func BenchmarkFleetSessions(b *testing.B) {
	eachBackend(b, func(b *testing.B, s store.Store) {
		for b.Loop() {
			err := s.View(b.Context(), func(tx store.Tx) error {
				got, err := tx.Sessions()
				if err == nil && len(got) != hosts*sessionsPerHost {
					err = fmt.Errorf("got %d sessions", len(got))
				}
				return err
			})
			if err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkHostSessions reads one host's sessions, as a daemon's tick does.
func BenchmarkHostSessions(b *testing.B) {
	eachBackend(b, func(b *testing.B, s store.Store) {
		for b.Loop() {
			err := s.View(b.Context(), func(tx store.Tx) error {
				got, err := tx.SessionsOnHost("host-3")
				if err == nil && len(got) != sessionsPerHost {
					err = fmt.Errorf("got %d sessions", len(got))
				}
				return err
			})
			if err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkCompareAndSet is one write transaction of the stop path: read a
// session, check its incarnation, write it and an event.
func BenchmarkCompareAndSet(b *testing.B) {
	eachBackend(b, func(b *testing.B, s store.Store) {
		i := 0
		for b.Loop() {
			name := herd.SessionName("worker3", i%sessionsPerHost)
			i++
			err := s.Update(b.Context(), func(tx store.Tx) error {
				cur, err := tx.Session(name)
				if err != nil {
					return err
				}
				if cur.Incarnation == "" {
					return nil
				}
				cur.StateSince = time.Now()
				if err := tx.PutSession(cur); err != nil {
					return err
				}
				return tx.AppendEvent(&herd.Event{Time: cur.StateSince, Host: cur.Host, Session: name,
					Incarnation: cur.Incarnation, Kind: herd.EventActivity})
			})
			if err != nil {
				b.Fatal(err)
			}
		}
	})
}
