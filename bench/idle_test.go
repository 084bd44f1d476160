package bench

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"herd"
	"herd/internal/api"
)

// binaries returns the binaries to measure side by side: this tree's
// ("head"), and, when HERD_BENCH_BASE names a git revision, that
// revision's ("base"), built from `git archive`.
func binaries(b *testing.B) map[string]string {
	bins := map[string]string{"head": bin}
	ref := os.Getenv("HERD_BENCH_BASE")
	if ref == "" {
		return bins
	}
	if baseBin == "" {
		// Built once for every benchmark of the run.
		path, err := buildRef(ref)
		if err != nil {
			b.Fatal(err)
		}
		baseBin = path
	}
	bins["base"] = baseBin
	return bins
}

var baseBin string

// fleetSizes is HERD_BENCH_N ("10,100" by default): the idle fleets.
func fleetSizes(b *testing.B) []int {
	spec := os.Getenv("HERD_BENCH_N")
	if spec == "" {
		spec = "10,100"
	}
	var out []int
	for _, f := range strings.Split(spec, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			b.Fatalf("HERD_BENCH_N: bad size %q", f)
		}
		out = append(out, n)
	}
	return out
}

// BenchmarkIdleFleet: N idle agents (sleep) under the daemon's default
// probe and watchdog settings; over a window (HERD_BENCH_WINDOW, 10s) it
// reports the daemon's CPU seconds per minute (utime+stime from
// /proc/PID/stat, not wall time), its OS threads, and the tmux server's
// CPU seconds per minute. With HERD_BENCH_BASE=REV the same runs go
// against that revision's binary in the same run.
func BenchmarkIdleFleet(b *testing.B) {
	window := 10 * time.Second
	if d, err := time.ParseDuration(os.Getenv("HERD_BENCH_WINDOW")); err == nil && d > 0 {
		window = d
	}
	bins := binaries(b)
	for _, rt := range []string{herd.RuntimeTmux, herd.RuntimeExec} {
		for _, n := range fleetSizes(b) {
			for _, which := range []string{"base", "head"} {
				path, ok := bins[which]
				if !ok {
					continue
				}
				b.Run(fmt.Sprintf("%s/n=%d/%s", rt, n, which), func(b *testing.B) {
					if _, err := exec.LookPath("tmux"); err != nil && rt == herd.RuntimeTmux {
						b.Skip("tmux is not installed")
					}
					for b.Loop() {
						idleFleet(b, path, rt, n, window)
					}
				})
			}
		}
	}
}

func idleFleet(b *testing.B, path, rt string, n int, window time.Duration) {
	d := startDaemonBin(b, path, "")
	role := []herd.Role{{Name: "lat", Replicas: n, Command: []string{"sleep", "3600"}, Workdir: d.dir, Runtime: rt}}
	launched := time.Now()
	if err := d.client.Do(context.Background(), "POST", "/v1/roles", nil, role, nil); err != nil {
		b.Fatal(err)
	}
	deadline := time.Now().Add(time.Duration(n)*500*time.Millisecond + 60*time.Second)
	for {
		var views []api.SessionView
		if err := d.client.Do(context.Background(), "GET", "/v1/sessions", nil, nil, &views); err != nil {
			b.Fatal(err)
		}
		running := 0
		for _, v := range views {
			if v.State == herd.StateRunning {
				running++
			}
		}
		if running == n {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("expected %d running sessions, got %d", n, running)
		}
		time.Sleep(50 * time.Millisecond)
	}
	b.ReportMetric(time.Since(launched).Seconds(), "launch-s")
	reportLaunchGaps(b, d, n)
	time.Sleep(3 * time.Second) // settle: adoption writes, first watchdog pass
	pid := d.cmd.Process.Pid
	tmuxPID := 0
	if rt == herd.RuntimeTmux {
		out, err := exec.Command("tmux", "-L", d.sb.Tmux, "display-message", "-p", "#{pid}").Output()
		if err != nil {
			b.Fatal(err)
		}
		tmuxPID, _ = strconv.Atoi(string(bytes.TrimSpace(out)))
	}
	cpu0, tcpu0 := cpuOf(b, pid), cpuOf(b, tmuxPID)
	time.Sleep(window)
	cpu, tcpu := cpuOf(b, pid)-cpu0, cpuOf(b, tmuxPID)-tcpu0
	perMin := cpu.Seconds() / window.Minutes()
	b.ReportMetric(perMin, "cpu-s/min")
	b.ReportMetric(perMin/60*100, "%core")
	b.ReportMetric(float64(threadsOf(b, pid)), "threads")
	if tmuxPID > 0 {
		b.ReportMetric(tcpu.Seconds()/window.Minutes(), "tmux-cpu-s/min")
	}

	// get sessions over the fleet at the API (the median of 21 calls).
	var took []time.Duration
	for range 21 {
		t0 := time.Now()
		var views []api.SessionView
		if err := d.client.Do(context.Background(), "GET", "/v1/sessions", nil, nil, &views); err != nil {
			b.Fatal(err)
		}
		took = append(took, time.Since(t0))
	}
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "get-sessions-api-ms")

	// Adoption: the same binary restarted adopts every agent, each with
	// one adopted event.
	restarted := time.Now()
	d.restart(b, path)
	deadline = time.Now().Add(time.Duration(n)*100*time.Millisecond + 30*time.Second)
	for {
		var events []herd.Event
		q := map[string][]string{"kind": {herd.EventAdopted}, "limit": {strconv.Itoa(2 * n)}}
		if err := d.client.Do(context.Background(), "GET", "/v1/events", q, nil, &events); err != nil {
			b.Fatal(err)
		}
		adopted := map[string]bool{}
		for _, e := range events {
			if !e.Time.Before(restarted) {
				adopted[e.Session] = true
			}
		}
		if len(adopted) == n {
			break
		}
		if time.Now().After(deadline) {
			b.Errorf("expected %d sessions adopted, got %d", n, len(adopted))
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	b.ReportMetric(time.Since(restarted).Seconds(), "adopt-s")

	// SIGKILL of one agent -> its crashed event, with the others present.
	var views []api.SessionView
	if err := d.client.Do(context.Background(), "GET", "/v1/sessions", nil, nil, &views); err != nil {
		b.Fatal(err)
	}
	var lat, exitLat []time.Duration
	for _, v := range views {
		if len(lat) == deathKills {
			break
		}
		if v.State != herd.StateRunning || v.PID == 0 {
			continue
		}
		exited := exitWatch(v.PID, 10*time.Second)
		killed := time.Now()
		syscall.Kill(v.PID, syscall.SIGKILL)
		var crashedAt time.Time
		for crashedAt.IsZero() && time.Since(killed) < 10*time.Second {
			var events []herd.Event
			q := map[string][]string{"session": {v.Name}, "kind": {herd.EventCrashed}}
			d.client.Do(context.Background(), "GET", "/v1/events", q, nil, &events)
			for _, e := range events {
				if e.Incarnation == v.Incarnation {
					crashedAt = e.Time
				}
			}
			time.Sleep(2 * time.Millisecond)
		}
		if crashedAt.IsZero() {
			b.Errorf("[%s] expected a crashed event within 10s of SIGKILL", v.Name)
			continue
		}
		lat = append(lat, crashedAt.Sub(killed))
		if at := exited(); !at.IsZero() {
			exitLat = append(exitLat, at.Sub(killed))
		}
	}
	if len(lat) > 0 {
		slices.Sort(lat)
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "kill-p50-ms")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "kill-p99-ms")
	}
	if len(exitLat) > 0 {
		// SIGKILL -> the process seen exited by a pidfd of the
		// benchmark's own: the machine's share of the figures above.
		slices.Sort(exitLat)
		b.ReportMetric(float64(exitLat[len(exitLat)/2].Microseconds())/1000, "kill-exit-p50-ms")
		b.ReportMetric(float64(exitLat[len(exitLat)*99/100].Microseconds())/1000, "kill-exit-p99-ms")
	}
}

// deathKills is how many agents of the idle fleet are killed, one at a
// time, to measure SIGKILL -> crashed with the rest present.
const deathKills = 20

// cpuOf is the user plus system CPU time of pid (0: none).
func cpuOf(b *testing.B, pid int) time.Duration {
	if pid == 0 {
		return 0
	}
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	i := bytes.LastIndexByte(raw, ')')
	f := strings.Fields(string(raw[i+2:]))
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * time.Second / 100 // USER_HZ
}

// threadsOf is the number of OS threads of pid.
func threadsOf(b *testing.B, pid int) int {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	for line := range strings.Lines(string(raw)) {
		if v, ok := strings.CutPrefix(line, "Threads:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	return 0
}
