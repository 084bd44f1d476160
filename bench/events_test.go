package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"herd"
	"herd/internal/herdtest"
	"herd/internal/store"
	"herd/internal/store/sqlite"
)

// BenchmarkEventsLog: `herd events` over a log of HERD_BENCH_EVENTS events
// (1,000,000 by default), the whole log (--limit 0) and the default view:
// the time each takes and the daemon's peak RSS (VmHWM) after the whole
// log was read, side by side with HERD_BENCH_BASE's binary.
func BenchmarkEventsLog(b *testing.B) {
	n := 1_000_000
	if v, err := strconv.Atoi(os.Getenv("HERD_BENCH_EVENTS")); err == nil && v > 0 {
		n = v
	}
	dir := b.TempDir()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(dir, "herd.db"))
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now().Add(-time.Hour).UTC()
	const batch = 50_000
	for done := 0; done < n; done += batch {
		err = st.Update(ctx, func(tx store.Tx) error {
			for i := done; i < min(done+batch, n); i++ {
				e := herd.Event{Time: start.Add(time.Duration(i) * time.Millisecond), Host: "h", Session: herd.SessionName("w", i%100),
					Incarnation: "inc", Kind: herd.EventActivity, Reason: "idle", Message: "an event of the log", Data: map[string]any{"i": i}}
				if err := tx.AppendEvent(&e); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	st.Close()
	for _, which := range []string{"base", "head"} {
		path, ok := binaries(b)[which]
		if !ok {
			continue
		}
		b.Run(which, func(b *testing.B) {
			for b.Loop() {
				eventsLog(b, path, dir, n)
			}
		})
	}
}

func eventsLog(b *testing.B, path, dir string, n int) {
	sb := herdtest.NewAt(b, dir, "")
	cmd := sb.Daemon(path, nil)
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	rss0 := peakRSS(b, cmd.Process.Pid)
	run := func(args ...string) (time.Duration, int) {
		t0 := time.Now()
		cli := exec.Command(path, args...)
		cli.Env = sb.Environ()
		out, err := cli.Output()
		if err != nil {
			b.Fatalf("%v: %v", args, err)
		}
		return time.Since(t0), strings.Count(string(out), "\n")
	}
	d, lines := run("events", "-o", "json", "--limit", "0")
	if lines != n {
		b.Fatalf("expected %d events, got %d lines", n, lines)
	}
	b.ReportMetric(d.Seconds(), "all-s")
	b.ReportMetric(float64(peakRSS(b, cmd.Process.Pid))/(1<<20), "daemon-peak-MiB")
	b.ReportMetric(float64(rss0)/(1<<20), "daemon-start-MiB")
	d, lines = run("events")
	b.ReportMetric(float64(d.Microseconds())/1000, "default-ms")
	b.ReportMetric(float64(lines), "default-lines")
}

// peakRSS is the peak resident set (VmHWM) of pid, in bytes.
func peakRSS(b *testing.B, pid int) int64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	for line := range strings.Lines(string(raw)) {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}
