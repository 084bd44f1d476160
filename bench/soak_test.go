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
event_retention = "2m" # soakRetention
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
		for _, v := range soakViolations(samples, soakRetention) {
			b.Error(v)
		}
	}
}

// soakRetention is the event retention the soak's daemon runs with.
const soakRetention = 2 * time.Minute

// Bounds of the soak, from two 5 minute runs on a loaded 2-core machine:
// RSS 25–26 MB at the start, 34.5–35.5 MB at the end, 43 MB at most, its
// growth slowing all the way (29–31 MB/h over the second half: the heap
// and SQLite's page cache warming up); 17 to 28 open fds (pipes and
// pidfds of incarnations in flight); the store flat at 5.4 MB once
// retention applied (+0.3 MB over the second half); 830–840 events a
// minute, 1600 to 2100 kept under a 2 minute retention. Each bound is
// about twice what was seen, and still catches a leak of one fd, or a few
// KB, per incarnation (about three a second) within minutes, and
// retention that does not run.
const (
	// soakRSSSlopeMBh bounds the RSS slope over the second half.
	soakRSSSlopeMBh = 60
	// soakRSSMaxMB bounds RSS at any sample.
	soakRSSMaxMB = 128
	// soakFDGrowth bounds the open fds over the first sample's.
	soakFDGrowth = 32
	// soakDBGrowth and soakDBSlackBytes bound the store's growth over
	// the second half: a fraction of its size, plus room for the WAL.
	soakDBGrowth     = 0.1
	soakDBSlackBytes = 2 << 20
	// soakKeptFactor bounds the events kept: this many times what the
	// retention window holds at the measured rate.
	soakKeptFactor = 2
)

// soakViolations checks the samples of a soak against its bounds and
// says what each broken one saw. The store and the events kept are
// bounded only once retention has had its say (the second half starts
// after it).
func soakViolations(samples []soakSample, retention time.Duration) []string {
	if len(samples) < 4 {
		return []string{fmt.Sprintf("soak: %d samples, too few to bound anything (run it longer)", len(samples))}
	}
	var out []string
	first, half, last := samples[0], samples[len(samples)/2], samples[len(samples)-1]
	if slope := rssSlope(samples[len(samples)/2:]) * 60 / 1024; slope > soakRSSSlopeMBh {
		out = append(out, fmt.Sprintf("soak: RSS grows %.1f MB/h over the second half, bound %d", slope, soakRSSSlopeMBh))
	}
	for _, s := range samples {
		if s.rssKB > soakRSSMaxMB<<10 {
			out = append(out, fmt.Sprintf("soak: RSS %d MB at %s, bound %d", s.rssKB>>10, s.at.Round(time.Second), soakRSSMaxMB))
			break
		}
	}
	for _, s := range samples {
		if s.fds > first.fds+soakFDGrowth {
			out = append(out, fmt.Sprintf("soak: %d open fds at %s, %d at the start, bound +%d", s.fds, s.at.Round(time.Second), first.fds, soakFDGrowth))
			break
		}
	}
	if half.at < retention {
		return append(out, fmt.Sprintf("soak: the second half starts at %s, before the %s retention applies: run it longer than %s to bound the store", half.at.Round(time.Second), retention, 2*retention))
	}
	if limit := half.dbBytes + int64(float64(half.dbBytes)*soakDBGrowth) + soakDBSlackBytes; last.dbBytes > limit {
		out = append(out, fmt.Sprintf("soak: the store grew from %d to %d bytes over the second half, bound %d", half.dbBytes, last.dbBytes, limit))
	}
	perMin := float64(last.events-first.events) / (last.at - first.at).Minutes()
	if limit := int(soakKeptFactor * perMin * retention.Minutes()); last.rows > limit {
		out = append(out, fmt.Sprintf("soak: %d events kept at the end (%.0f a minute, %s retention), bound %d", last.rows, perMin, retention, limit))
	}
	return out
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
