package bench

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"testing"
	"time"

	"herd"
	"herd/internal/api"
	"herd/internal/herdtest"
	"herd/internal/pgcluster"
	"herd/internal/store"
	"herd/internal/store/postgres"
)

// BenchmarkFleetGetSessions1000: one daemon's view of a fleet of 10 hosts
// × 100 live sessions on one PostgreSQL (a private cluster): the API alone
// and `herd get sessions` through the CLI. Goal: under 50 ms.
func BenchmarkFleetGetSessions1000(b *testing.B) {
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
	st, err := postgres.Open(ctx, dsn)
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	now := time.Now().UTC()
	err = st.Update(ctx, func(tx store.Tx) error {
		for h := range 10 {
			host := fmt.Sprintf("h%d", h)
			if err := tx.PutHost(herd.Host{Name: host, BootID: "boot", Version: "bench", StartedAt: now, HeartbeatAt: now}); err != nil {
				return err
			}
			role := fmt.Sprintf("r%d", h)
			if err := tx.PutRole(herd.Role{Name: role, Replicas: 100, Command: []string{"true"}, Workdir: dir, Runtime: herd.RuntimeExec, Agent: herd.AgentGeneric, Host: host,
				Restart: herd.RestartPolicy{Policy: herd.PolicyNever, InitialBackoff: time.Second, MaxBackoff: time.Second, ResetAfter: time.Minute}}); err != nil {
				return err
			}
			for i := range 100 {
				name := herd.SessionName(role, i)
				inc := herd.Incarnation{ID: fmt.Sprintf("inc-%s", name), Session: name, Host: host, RuntimeKind: herd.RuntimeExec, Argv: []string{"true"}, Workdir: dir, StartedAt: now,
					Identity: herd.Identity{PID: 1000 + i, BootID: "boot"}}
				if err := tx.PutIncarnation(inc); err != nil {
					return err
				}
				s := herd.Session{Name: name, Role: role, Index: i, Host: host, State: herd.StateRunning, Runtime: herd.Alive, Process: herd.Alive,
					Incarnation: inc.ID, RuntimeKind: herd.RuntimeExec, StartedAt: &now, StateSince: now}
				if err := tx.PutSession(s); err != nil {
					return err
				}
			}
		}
		return nil
	})
	st.Close()
	if err != nil {
		b.Fatal(err)
	}
	sb := herdtest.NewAt(b, dir, fmt.Sprintf("[daemon]\nhost = \"viewer\"\n[store]\ndriver = \"postgres\"\ndsn = %q\n[fleet]\nhost_timeout = \"1h\"\n", dsn))
	sb.Daemon(bin, nil)
	cl := api.NewClient(sb.Socket)
	b.Run("api-only", func(b *testing.B) {
		for b.Loop() {
			var v []api.SessionView
			if err := cl.Do(ctx, "GET", "/v1/sessions", nil, nil, &v); err != nil || len(v) != 1000 {
				b.Fatalf("expected 1000 sessions, got %d (%v)", len(v), err)
			}
		}
	})
	b.Run("get-sessions-table", func(b *testing.B) {
		for b.Loop() {
			cli := exec.Command(bin, "get", "sessions")
			cli.Env = sb.Environ()
			out, err := cli.Output()
			if err != nil {
				b.Fatal(err)
			}
			if n := len(out); n == 0 {
				b.Fatal("no output")
			}
		}
	})
	b.Run("get-hosts", func(b *testing.B) {
		for b.Loop() {
			var v []api.HostView
			if err := cl.Do(ctx, "GET", "/v1/hosts", nil, nil, &v); err != nil || len(v) != 11 {
				b.Fatalf("expected 11 hosts, got %d (%v)", len(v), err)
			}
		}
	})
}
