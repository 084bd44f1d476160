package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"herd"
	"herd/internal/api"
)

// BenchmarkControl: herd's control verbs at the API, as `herd inject
// --role` and `herd wait` (and the MCP tools over them) use them.
//
//   - send: one broadcast inject into a role of 50 tmux agents; per
//     session, how long its inject took inside the fan-out (p50, p99),
//     and the whole broadcast.
//   - wait: the wake-up of a wait after the change it waits for (an
//     activity reported by a hook), over 40 changes; the goal is p99 <
//     100 ms. Timed from the hook's report answered (0 when the wait
//     answered first: the writer publishes before it answers) and, an
//     upper bound, from the report sent.
func BenchmarkControl(b *testing.B) {
	if _, err := exec.LookPath("tmux"); err != nil {
		b.Skip("tmux is not installed")
	}
	d := startDaemon(b, "[probe]\ninterval = \"1s\"\n")
	ctx := context.Background()
	const n = 50
	roles := []herd.Role{
		{Name: "talk", Replicas: n, Command: []string{bin, "sim", "--wait-input", "--quiet", "--interval", "10s"}, Workdir: d.dir},
		{Name: "flip", Replicas: 1, Command: []string{bin, "sim", "--quiet", "--interval", "10s"}, Workdir: d.dir,
			Runtime: herd.RuntimeExec, Agent: herd.AgentClaude, AgentProcess: "herd"},
	}
	if err := d.client.Do(ctx, "POST", "/v1/roles", nil, roles, nil); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { d.client.Do(ctx, "DELETE", "/v1/roles/talk", nil, nil, nil) })
	deadline := time.Now().Add(2 * time.Minute)
	for running := 0; running < n+1; {
		var views []api.SessionView
		if err := d.client.Do(ctx, "GET", "/v1/sessions", nil, nil, &views); err != nil {
			b.Fatal(err)
		}
		running = 0
		for _, v := range views {
			if v.State == herd.StateRunning {
				running++
			}
		}
		if time.Now().After(deadline) {
			b.Fatalf("expected %d running sessions, got %d", n+1, running)
		}
		time.Sleep(100 * time.Millisecond)
	}

	b.Run("send50", func(b *testing.B) {
		var per, whole []time.Duration
		for range 5 {
			var res api.InjectManyResult
			t0 := time.Now()
			req := api.InjectManyRequest{Targets: api.Targets{Role: "talk"}, Text: "run the tests", Enter: true}
			if err := d.client.Do(ctx, "POST", "/v1/inject", nil, req, &res); err != nil {
				b.Fatal(err)
			}
			whole = append(whole, time.Since(t0))
			for _, dl := range res.Deliveries {
				if !dl.Delivered {
					b.Fatalf("%s refused: %s", dl.Session, dl.Error)
				}
				per = append(per, time.Duration(dl.TookMS*float64(time.Millisecond)))
			}
		}
		b.ReportMetric(ms(pct(per, 50)), "session-p50-ms")
		b.ReportMetric(ms(pct(per, 99)), "session-p99-ms")
		b.ReportMetric(ms(pct(whole, 50)), "broadcast-p50-ms")
		fmt.Printf("send to %d sessions: per session p50 %s p99 %s; whole broadcast p50 %s max %s (%d broadcasts)\n",
			n, pct(per, 50), pct(per, 99), pct(whole, 50), pct(whole, 100), len(whole))
	})

	b.Run("waitwake", func(b *testing.B) {
		v := d.session(b, "flip-0")
		fixture := func(name string) []byte {
			p, err := os.ReadFile(filepath.Join("..", "internal", "agents", "testdata", "claude", "2.1.330", name))
			if err != nil {
				b.Fatal(err)
			}
			return p
		}
		hooks := map[herd.Activity][2]any{
			herd.ActivityIdle:    {"Stop", fixture("hook-stop.json")},
			herd.ActivityWorking: {"PreToolUse", fixture("hook-pre-tool-use.json")},
		}
		report := func(a herd.Activity) {
			h := hooks[a]
			rep := api.ActivityReport{Session: "flip-0", Incarnation: v.Incarnation, Event: h[0].(string), Payload: h[1].([]byte),
				At: time.Now().UTC(), Agent: herd.AgentClaude}
			if err := d.client.Do(ctx, "POST", "/v1/activity", nil, rep, nil); err != nil {
				b.Fatal(err)
			}
		}
		var wake, fromSent []time.Duration
		goal := herd.ActivityIdle
		report(herd.ActivityWorking)
		for i := range 40 {
			from := herd.ActivityWorking
			if goal == herd.ActivityWorking {
				from = herd.ActivityIdle
			}
			report(from)
			done := make(chan time.Time, 1)
			go func() {
				var res api.WaitResult
				req := api.WaitRequest{Targets: api.Targets{Names: []string{"flip-0"}}, For: string(goal), Timeout: "10s"}
				if err := d.client.Do(ctx, "POST", "/v1/wait", nil, req, &res); err != nil || !res.Reached {
					b.Errorf("wait %d: %v %+v", i, err, res)
				}
				done <- time.Now()
			}()
			// Let the wait see the session not there yet.
			time.Sleep(time.Duration(20+i%7*13) * time.Millisecond)
			sent := time.Now()
			report(goal)
			changed := time.Now()
			woke := <-done
			wake = append(wake, max(0, woke.Sub(changed)))
			fromSent = append(fromSent, woke.Sub(sent))
			goal = from
		}
		b.ReportMetric(ms(pct(wake, 50)), "wake-p50-ms")
		b.ReportMetric(ms(pct(wake, 99)), "wake-p99-ms")
		b.ReportMetric(ms(pct(fromSent, 99)), "sent-p99-ms")
		fmt.Printf("wait wake-up after the change: p50 %s p99 %s max %s (%d changes; goal p99 < 100ms); from the report sent: p50 %s p99 %s\n",
			pct(wake, 50), pct(wake, 99), pct(wake, 100), len(wake), pct(fromSent, 50), pct(fromSent, 99))
	})
}

// pct is the p-th percentile of ds (100: the largest).
func pct(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := (len(s)*p + 99) / 100
	return s[min(max(i-1, 0), len(s)-1)]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
