package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"herd"
)

// soakEvery is how often the soak samples the daemon.
const soakEvery = 30 * time.Second

// soakSample is one sample of the soak: the daemon's RSS, the store's
// files, the other files of the state directory, and the event log.
type soakSample struct {
	at       time.Duration
	rssKB    int64
	dbBytes  int64 // herd.db with its WAL and shared memory
	logBytes int64 // everything else under the state dir: captures, logs, spool
	events   int64 // the id of the newest event: how many were ever written
	rows     int   // events in the log now
	fds      int   // the daemon's open files
	threads  int   // the daemon's threads
}

// BenchmarkSoakCrashLoop runs two crash-looping roles (one tmux, one exec
// printing output) against one daemon for HERD_SOAK (e.g. "10m"; the
// benchmark is skipped without it) with event retention on, and reports
// events per minute, the store's and the other files' growth per hour
// (from the second half of the run, once retention has had its say), and
// the daemon's RSS sampled every 30s: first, last, max and its slope.
//
//	HERD_SOAK=10m go test -run '^$' -bench SoakCrashLoop -benchtime 1x -timeout 30m ./bench/
func BenchmarkSoakCrashLoop(b *testing.B) {
	length, err := time.ParseDuration(os.Getenv("HERD_SOAK"))
	if err != nil || length <= 0 {
		b.Skip("set HERD_SOAK to a duration (e.g. 10m) to run the soak")
	}
	every := min(soakEvery, length/4)
	if _, err := exec.LookPath("tmux"); err != nil {
		b.Skip("tmux is not installed")
	}
	// A 2 minute retention so that a 10 minute soak shows the log
	// reaching its steady size; a day's soak would use the default.
	d := startDaemon(b, `
[probe]
interval = "1s"
[store]
event_retention = "2m"
event_max_rows = 100000
[restart]
initial_backoff = "100ms"
max_backoff = "400ms"
max_restarts = 0
`)
	// Each dies after printing a little: a stream-json line and 200 lines
	// of stderr per incarnation on the exec side.
	die := []string{bin, "sim", "--interval", "50ms", "--exit-after", "300ms", "--exit-code", "3"}
	roles := []herd.Role{
		{Name: "loop-tmux", Replicas: 1, Command: die, Workdir: d.dir, Runtime: herd.RuntimeTmux},
		{Name: "loop-exec", Replicas: 1, Command: append(die, "--stderr-lines", "200"), Workdir: d.dir, Runtime: herd.RuntimeExec},
	}
	ctx := context.Background()
	if err := d.client.Do(ctx, "POST", "/v1/roles", nil, roles, nil); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		d.client.Do(ctx, "DELETE", "/v1/roles/loop-tmux", nil, nil, nil)
		d.client.Do(ctx, "DELETE", "/v1/roles/loop-exec", nil, nil, nil)
	})
	for b.Loop() {
		start := time.Now()
		var samples []soakSample
		for {
			s, err := d.sample(ctx)
			if err != nil {
				b.Fatal(err)
			}
			s.at = time.Since(start)
			samples = append(samples, s)
			// Every sample, as it is taken (b.Logf keeps only the first ten).
			fmt.Fprintf(os.Stderr, "soak %6s  rss %6d KB  fds %3d  threads %3d  db %9d B  files %9d B  events %7d (%d kept)\n",
				s.at.Round(time.Second), s.rssKB, s.fds, s.threads, s.dbBytes, s.logBytes, s.events, s.rows)
			if s.at >= length {
				break
			}
			time.Sleep(every)
		}
		first, last := samples[0], samples[len(samples)-1]
		mins := last.at.Minutes()
		b.ReportMetric(float64(last.events-first.events)/mins, "events/min")
		half := samples[len(samples)/2]
		perHour := func(a, z int64) float64 {
			return float64(z-a) / (last.at - half.at).Hours() / (1 << 20)
		}
		b.ReportMetric(perHour(half.dbBytes, last.dbBytes), "db-MB/h")
		b.ReportMetric(perHour(half.logBytes, last.logBytes), "files-MB/h")
		var maxRSS int64
		for _, s := range samples {
			maxRSS = max(maxRSS, s.rssKB)
		}
		b.ReportMetric(float64(first.rssKB)/1024, "rss-first-MB")
		b.ReportMetric(float64(last.rssKB)/1024, "rss-last-MB")
		b.ReportMetric(float64(maxRSS)/1024, "rss-max-MB")
		b.ReportMetric(rssSlope(samples)*60/1024, "rss-slope-MB/h")
		b.ReportMetric(rssSlope(samples[len(samples)/2:])*60/1024, "rss-slope-2nd-half-MB/h")
		b.ReportMetric(float64(last.fds-first.fds), "fds-delta")
		b.ReportMetric(float64(last.rows), "events-kept")
	}
}

// rssSlope is the least-squares slope of RSS over time, in KB per minute.
func rssSlope(samples []soakSample) float64 {
	if len(samples) < 2 {
		return 0
	}
	var sx, sy, sxx, sxy float64
	for _, s := range samples {
		x, y := s.at.Minutes(), float64(s.rssKB)
		sx, sy, sxx, sxy = sx+x, sy+y, sxx+x*x, sxy+x*y
	}
	n := float64(len(samples))
	den := n*sxx - sx*sx
	if den == 0 {
		return 0
	}
	return (n*sxy - sx*sy) / den
}

// sample reads the daemon's RSS, the state dir's sizes and the event log.
func (d *daemon) sample(ctx context.Context) (soakSample, error) {
	var s soakSample
	rss, err := vmRSS(d.cmd.Process.Pid)
	if err != nil {
		return s, err
	}
	s.rssKB = rss
	if fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", d.cmd.Process.Pid)); err == nil {
		s.fds = len(fds)
	}
	if tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", d.cmd.Process.Pid)); err == nil {
		s.threads = len(tasks)
	}
	err = filepath.WalkDir(d.dir, func(path string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return nil // a file rotated away while walking
		}
		info, err := e.Info()
		if err != nil || !info.Mode().IsRegular() {
			return nil
		}
		if strings.HasPrefix(e.Name(), "herd.db") {
			s.dbBytes += info.Size()
		} else {
			s.logBytes += info.Size()
		}
		return nil
	})
	if err != nil {
		return s, err
	}
	var events []herd.Event
	q := map[string][]string{"limit": {"1000000"}}
	if err := d.client.Do(ctx, "GET", "/v1/events", q, nil, &events); err != nil {
		return s, fmt.Errorf("events: %w", err)
	}
	s.rows = len(events)
	for _, e := range events {
		s.events = max(s.events, e.ID)
	}
	return s, nil
}

// vmRSS reads a process's resident set size in KB.
func vmRSS(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) >= 2 && f[0] == "VmRSS:" {
			return strconv.ParseInt(f[1], 10, 64)
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
}
