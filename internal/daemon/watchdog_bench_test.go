package daemon

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"herd"
	"herd/internal/store"
	"herd/internal/store/sqlite"
)

// BenchmarkWatchdogTick100 measures one watchdog tick over 100 live exec
// sessions (real sleeping processes, real output files, SQLite):
//   - quiet: every session recently active, so nothing is sampled;
//   - stalled: every session stalled with a warning due on every tick, so
//     each tick samples all 100 trees in /proc and writes 100 events (the
//     worst case; normally a stalled session is sampled once per stall_repeat).
func BenchmarkWatchdogTick100(b *testing.B) {
	for _, stalled := range []bool{false, true} {
		name := "quiet"
		if stalled {
			name = "stalled"
		}
		b.Run(name, func(b *testing.B) { benchTick(b, stalled) })
	}
}

func benchTick(b *testing.B, stalled bool) {
	dir := b.TempDir()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(dir, "herd.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	cfg := testConfig()
	cfg.Daemon.Host = "bench"
	cfg.Watchdog.StallAfter = time.Hour
	cfg.Watchdog.StallRepeat = time.Nanosecond
	d, err := New(Options{StateDir: dir, Config: cfg, Store: st, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	// Started two hours ago, silent since: past stall_after.
	now := time.Now().Add(-2 * time.Hour).UTC()
	err = st.Update(ctx, func(tx store.Tx) error {
		for i := range 100 {
			cmd := exec.Command("sleep", "300")
			cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
			if err := cmd.Start(); err != nil {
				b.Skipf("no sleep binary: %v", err)
			}
			b.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
			id, err := d.proc.Identify(cmd.Process.Pid, d.bootID)
			if err != nil {
				return err
			}
			name := fmt.Sprintf("b-%d", i)
			inc := herd.Incarnation{ID: fmt.Sprintf("inc-%d", i), Session: name, Host: d.host, RuntimeKind: herd.RuntimeExec,
				Identity: id, Root: id, StartedAt: now}
			s := herd.Session{Name: name, Role: "b", Index: i, Host: d.host, State: herd.StateRunning, Incarnation: inc.ID,
				RuntimeKind: herd.RuntimeExec, Activity: herd.ActivityWorking, StartedAt: &now, StateSince: now}
			if stalled {
				s.State, s.StateSince = herd.StateStalled, now.Add(time.Hour)
			} else {
				recent := time.Now().UTC()
				s.LastActivityAt = &recent
			}
			out, _ := d.exec.Paths(name, inc.ID)
			os.MkdirAll(filepath.Dir(out), 0o700)
			os.WriteFile(out, []byte(`{"type":"system","subtype":"init","session_id":"x"}`+"\n"), 0o600)
			os.Chtimes(out, now, now) // written at start
			if err := tx.PutSession(s); err != nil {
				return err
			}
			if err := tx.PutIncarnation(inc); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	d.watchdog.Tick(ctx, time.Now()) // first sight: tails opened, ids recorded
	var before, after syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &before)
	b.ResetTimer()
	for b.Loop() {
		d.watchdog.Tick(ctx, time.Now())
	}
	b.StopTimer()
	syscall.Getrusage(syscall.RUSAGE_SELF, &after)
	cpu := time.Duration(syscall.TimevalToNsec(after.Utime) - syscall.TimevalToNsec(before.Utime) +
		syscall.TimevalToNsec(after.Stime) - syscall.TimevalToNsec(before.Stime))
	b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "cpu-ms/tick")
	if stalled {
		var n int
		st.View(ctx, func(tx store.Tx) error {
			evs, err := tx.Events(store.EventFilter{Kind: herd.EventStallWarning, Limit: 1000})
			n = len(evs)
			return err
		})
		if n == 0 {
			b.Fatal("expected stall warnings, got none")
		}
	}
}
