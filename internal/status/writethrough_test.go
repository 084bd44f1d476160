package status

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"herd"
	"herd/internal/store"
	"herd/internal/store/pgtest"
	"herd/internal/store/postgres"
	"herd/internal/store/sqlite"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// backends opens each store the live set is checked against: SQLite, and
// PostgreSQL when a server is available.
func backends(t *testing.T) map[string]func(t *testing.T) store.Store {
	return map[string]func(t *testing.T) store.Store{
		"sqlite": func(t *testing.T) store.Store {
			db, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "herd.db"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			return db
		},
		"postgres": func(t *testing.T) store.Store {
			db, err := postgres.Open(context.Background(), pgtest.DSN(t))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			return db
		},
	}
}

// errRollback is a transaction's failure on purpose.
var errRollback = errors.New("rolled back on purpose")

// fleetGen makes random writes of the kinds the daemon makes: launches,
// crashes, stops, archives, deleted roles and sessions, other hosts' rows,
// rolled-back transactions and writes around the manager's store.
type fleetGen struct {
	r    *rand.Rand
	host string
	now  time.Time
	n    int    // ids made
	id   string // prefix of the ids made
}

func (g *fleetGen) role() string { return []string{"alpha", "beta", "w", "w-x"}[g.r.IntN(4)] }

func (g *fleetGen) sessionName() string {
	return herd.SessionName(g.role(), g.r.IntN(4))
}

func (g *fleetGen) at() time.Time {
	g.now = g.now.Add(time.Duration(g.r.IntN(5000)) * time.Millisecond)
	// Not in UTC and with a monotonic reading, as time.Now() gives: the
	// store returns UTC without one.
	return g.now.In(time.FixedZone("X", 3600))
}

// write returns one transaction's writes. host is the host the rows are
// written for (this host's, mostly).
func (g *fleetGen) write() (string, func(tx store.Tx) error) {
	host := g.host
	if g.r.IntN(5) == 0 {
		host = "other"
	}
	name := g.sessionName()
	role := name[:len(name)-2]
	g.n++
	incID := fmt.Sprintf("inc-%s%d", g.id, g.n)
	switch k := g.r.IntN(9); k {
	case 0, 1: // a launch: an open incarnation and its running session
		at := g.at()
		code := 0
		return "launch", func(tx store.Tx) error {
			inc := herd.Incarnation{ID: incID, Session: name, Host: host, RuntimeKind: herd.RuntimeExec, Argv: []string{"agent", "--x"},
				StartedAt: at, Root: herd.Identity{PID: 100 + g.n, StartTime: 7, BootID: "b"}, Template: "command=a workdir=b env=c"}
			if err := tx.PutIncarnation(inc); err != nil {
				return err
			}
			return tx.PutSession(herd.Session{Name: name, Role: role, Index: 1, Host: host, State: herd.StateRunning, Incarnation: incID,
				RuntimeKind: herd.RuntimeExec, Runtime: herd.Alive, Process: herd.Alive, Activity: herd.ActivityIdle,
				StartedAt: &at, StateSince: at, Exit: &herd.Exit{Code: &code, Reason: "exit_code", At: at, Message: "m"}})
		}
	case 2, 3: // a crash or a stop: the current incarnation ends
		at := g.at()
		state := []herd.State{herd.StateBackoff, herd.StateStopped, herd.StateCrashed, herd.StateFailed}[g.r.IntN(4)]
		sig := 9
		return "end", func(tx store.Tx) error {
			s, err := tx.Session(name)
			if errors.Is(err, store.ErrNotFound) {
				return nil
			}
			if err != nil {
				return err
			}
			if inc, err := tx.Incarnation(s.Incarnation); err == nil {
				inc.EndedAt, inc.Exit = &at, &herd.Exit{Signal: &sig, Reason: "signal", At: at}
				if err := tx.PutIncarnation(inc); err != nil {
					return err
				}
			}
			s.State, s.StateSince, s.Restarts, s.LastCrashAt = state, at, s.Restarts+1, &at
			s.BackoffUntil = &at
			s.Snapshot = &herd.Snapshot{Argv: []string{"agent"}, EnvNames: []string{}, Agent: "claude", RuntimeKind: herd.RuntimeExec}
			return tx.PutSession(s)
		}
	case 4: // an archive, an activity: the session alone changes
		at := g.at()
		return "touch", func(tx store.Tx) error {
			s, err := tx.Session(name)
			if errors.Is(err, store.ErrNotFound) {
				return nil
			}
			if err != nil {
				return err
			}
			s.Archived = g.r.IntN(2) == 0
			s.LastActivityAt, s.Activity = &at, herd.ActivityWorking
			return tx.PutSession(s)
		}
	case 5: // a role declared or changed
		at := g.at()
		replicas := g.r.IntN(5)
		return "role", func(tx store.Tx) error {
			return tx.PutRole(herd.Role{Name: role, Replicas: replicas, Command: []string{"agent"}, Env: map[string]string{"A": "1"},
				Runtime: herd.RuntimeExec, UpdatedAt: at, Host: host, Hosts: []string{}, ResumeOnCrash: herd.Bool(false),
				Restart: herd.RestartPolicy{Policy: herd.PolicyAlways, InitialBackoff: time.Second}})
		}
	case 6: // a role deleted, with its sessions
		return "delete role", func(tx store.Tx) error { return tx.DeleteRole(role) }
	case 7: // a session forgotten
		return "delete session", func(tx store.Tx) error { return tx.DeleteSession(name) }
	default: // a session moved to another host
		return "move", func(tx store.Tx) error {
			s, err := tx.Session(name)
			if errors.Is(err, store.ErrNotFound) {
				return nil
			}
			if err != nil {
				return err
			}
			s.Host = "other"
			if s.Host == host {
				s.Host = g.host
			}
			return tx.PutSession(s)
		}
	}
}

// liveCmp compares sets: times by instant and zone, nil and empty alike.
var liveCmp = []cmp.Option{cmpopts.EquateEmpty()}

// checkFresh compares the live set with a fresh read of the store.
func checkFresh(t *testing.T, m *Manager, step string) {
	t.Helper()
	ctx := context.Background()
	roles, all, live, err := m.Listing(ctx)
	if err != nil {
		t.Fatalf("[%s] listing: %v", step, err)
	}
	var (
		wantRoles []herd.Role
		wantAll   []herd.Session
		wantLive  []Live
	)
	err = m.raw.View(ctx, func(tx store.Tx) (err error) {
		if wantRoles, err = tx.Roles(); err != nil {
			return err
		}
		if wantAll, err = tx.SessionsOnHost(m.host); err != nil {
			return err
		}
		for _, s := range wantAll {
			inc, err := tx.Incarnation(s.Incarnation)
			if err == nil && inc.EndedAt == nil && inc.Host == m.host && s.State.Live() {
				wantLive = append(wantLive, Live{S: s, Inc: inc})
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("[%s] fresh read: %v", step, err)
	}
	// In Go's order of names, whatever the store's collation.
	slices.SortFunc(wantRoles, func(a, b herd.Role) int { return strings.Compare(a.Name, b.Name) })
	slices.SortFunc(wantAll, func(a, b herd.Session) int { return strings.Compare(a.Name, b.Name) })
	slices.SortFunc(wantLive, func(a, b Live) int { return strings.Compare(a.S.Name, b.S.Name) })
	if d := cmp.Diff(wantRoles, roles, liveCmp...); d != "" {
		t.Fatalf("[%s] roles differ from the store (-store +set):\n%s", step, d)
	}
	if d := cmp.Diff(wantAll, all, liveCmp...); d != "" {
		t.Fatalf("[%s] sessions differ from the store (-store +set):\n%s", step, d)
	}
	if d := cmp.Diff(wantLive, live, liveCmp...); d != "" {
		t.Fatalf("[%s] live sessions differ from the store (-store +set):\n%s", step, d)
	}
}

// TestLiveSetEqualsStore: random sequences of writes through the manager
// (launches, crashes, stops, archives, deleted roles and sessions, other
// hosts' rows, rolled-back transactions), writes around it and hints
// leave the set equal to a fresh read of the store; only the writes
// around the manager and the hints cost a read.
func TestLiveSetEqualsStore(t *testing.T) {
	for name, open := range backends(t) {
		t.Run(name, func(t *testing.T) {
			steps := 400
			if name == "postgres" {
				steps = 150
			}
			for seed := range uint64(3) {
				db := open(t)
				m := New(db, "h", herd.RestartPolicy{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
				g := &fleetGen{r: rand.New(rand.NewPCG(seed, 16)), host: "h", now: time.Now()}
				ctx := context.Background()
				if _, _, err := m.Live(ctx); err != nil {
					t.Fatal(err)
				}
				wantReads := m.LiveReads()
				for i := range steps {
					kind, fn := g.write()
					step := fmt.Sprintf("seed %d step %d %s", seed, i, kind)
					switch g.r.IntN(10) {
					case 0: // rolled back: applies nothing
						err := m.Store().Update(ctx, func(tx store.Tx) error {
							if err := fn(tx); err != nil {
								return err
							}
							return errRollback
						})
						if !errors.Is(err, errRollback) {
							t.Fatalf("[%s] expected the rollback, got %v", step, err)
						}
					case 1: // around the manager: the next reader reads
						if err := db.Update(ctx, fn); err != nil {
							t.Fatalf("[%s] %v", step, err)
						}
						wantReads++
					case 2: // a hint
						if err := db.Update(ctx, fn); err != nil {
							t.Fatalf("[%s] %v", step, err)
						}
						m.Invalidate()
						wantReads++
					default:
						if err := m.Store().Update(ctx, fn); err != nil {
							t.Fatalf("[%s] %v", step, err)
						}
					}
					checkFresh(t, m, step)
					if got := m.LiveReads(); got != wantReads {
						t.Fatalf("[%s] expected %d reads of the store, got %d", step, wantReads, got)
					}
				}
			}
		})
	}
}

// TestLiveSetConcurrentWrites: writers through the manager racing with
// readers, hints and their reads (whose result must take in the writes
// committed while they read) leave the set equal to the store.
func TestLiveSetConcurrentWrites(t *testing.T) {
	for name, open := range backends(t) {
		t.Run(name, func(t *testing.T) {
			db := open(t)
			m := New(db, "h", herd.RestartPolicy{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
			ctx := context.Background()
			var wg sync.WaitGroup
			for w := range 4 {
				wg.Go(func() {
					g := &fleetGen{r: rand.New(rand.NewPCG(uint64(w), 99)), host: "h", now: time.Now(), id: fmt.Sprint(w, "-")}
					for range 60 {
						kind, fn := g.write()
						if err := m.Store().Update(ctx, fn); err != nil {
							t.Errorf("[writer %d %s] %v", w, kind, err)
							return
						}
					}
				})
			}
			done := make(chan struct{})
			var readers sync.WaitGroup
			readers.Go(func() {
				for {
					select {
					case <-done:
						return
					default:
					}
					m.Invalidate()
					if _, _, err := m.Live(ctx); err != nil {
						t.Errorf("[reader] %v", err)
						return
					}
				}
			})
			wg.Wait()
			close(done)
			readers.Wait()
			checkFresh(t, m, "after the race")
		})
	}
}

// TestIdleTickReadsNothing: after writes through the manager, the loops'
// reads (a tick: Live, Listing, LiveOne) are served from memory.
func TestIdleTickReadsNothing(t *testing.T) {
	db := backends(t)["sqlite"](t)
	m := New(db, "h", herd.RestartPolicy{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	ctx := context.Background()
	g := &fleetGen{r: rand.New(rand.NewPCG(1, 2)), host: "h", now: time.Now()}
	if _, _, err := m.Live(ctx); err != nil {
		t.Fatal(err)
	}
	reads := m.LiveReads()
	for range 50 {
		_, fn := g.write()
		if err := m.Store().Update(ctx, fn); err != nil {
			t.Fatal(err)
		}
		// Writes the set does not hold (events, kv, hosts) cost nothing
		// either.
		err := m.Store().Update(ctx, func(tx store.Tx) error {
			if err := tx.PutKV("k", "v"); err != nil {
				return err
			}
			return tx.AppendEvent(&herd.Event{Time: time.Now(), Host: "h", Kind: herd.EventActivity})
		})
		if err != nil {
			t.Fatal(err)
		}
		_, all, _, err := m.Listing(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range all {
			if _, _, err := m.LiveOne(ctx, s.Name); err != nil {
				t.Fatal(err)
			}
		}
	}
	if got := m.LiveReads() - reads; got != 0 {
		t.Errorf("expected no read of the store after writes through the manager, got %d", got)
	}
	checkFresh(t, m, "end")
}

// TestLiveSetPanicAppliesNothing: a transaction whose fn panics after a
// write is rolled back by the backend and applies nothing; the manager's
// next writes are applied with no read.
func TestLiveSetPanicAppliesNothing(t *testing.T) {
	db := backends(t)["sqlite"](t)
	m := New(db, "h", herd.RestartPolicy{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	ctx := context.Background()
	g := &fleetGen{r: rand.New(rand.NewPCG(3, 4)), host: "h", now: time.Now()}
	if _, _, err := m.Live(ctx); err != nil {
		t.Fatal(err)
	}
	reads := m.LiveReads()
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("expected the panic to reach the caller")
			}
		}()
		m.Store().Update(ctx, func(tx store.Tx) error {
			if err := tx.PutSession(herd.Session{Name: "p-0", Role: "p", Host: "h", State: herd.StateRunning}); err != nil {
				return err
			}
			panic("in the middle of a transaction")
		})
	}()
	checkFresh(t, m, "after the panic")
	for range 20 {
		_, fn := g.write()
		if err := m.Store().Update(ctx, fn); err != nil {
			t.Fatal(err)
		}
	}
	checkFresh(t, m, "after the writes")
	if got := m.LiveReads() - reads; got != 0 {
		t.Errorf("expected no read of the store, got %d", got)
	}
}
