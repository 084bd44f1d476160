package tmux

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"
)

var benchSizes = []int{10, 100, 1000}

// createBatch is how many new-session commands go into one tmux invocation;
// a whole invocation must fit tmux's 16 KiB command limit.
const createBatch = 100

func benchName(i int) string { return fmt.Sprintf("bench-%04d", i) }

// benchServer starts a private server with n sessions running sleep.
func benchServer(b *testing.B, n int) *Client {
	b.Helper()
	if testing.Short() {
		b.Skip("creates real tmux sessions")
	}
	c := newClient(b)
	c.Timeout = time.Minute
	start := time.Now()
	for lo := 0; lo < n; lo += createBatch {
		var cmds [][]string
		for i := lo; i < min(lo+createBatch, n); i++ {
			cmds = append(cmds, []string{"new-session", "-d", "-s", benchName(i), "--", "sleep", "3600"})
		}
		if _, err := c.run(context.Background(), nil, cmds...); err != nil {
			b.Fatalf("create sessions: %v", err)
		}
	}
	b.Logf("created %d sessions in %v", n, time.Since(start))
	return c
}

// BenchmarkListPanes is the batched probe: one call for all sessions.
func BenchmarkListPanes(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			c := benchServer(b, n)
			ctx := context.Background()
			for b.Loop() {
				panes, err := c.ListPanes(ctx)
				if err != nil || len(panes) != n {
					b.Fatalf("expected %d panes … got %d, %v", n, len(panes), err)
				}
			}
		})
	}
}

// BenchmarkHasSessionEach is the naive probe: one has-session per session,
// one after the other.
func BenchmarkHasSessionEach(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			c := benchServer(b, n)
			ctx := context.Background()
			for b.Loop() {
				for i := range n {
					ok, err := c.HasSession(ctx, benchName(i))
					if !ok || err != nil {
						b.Fatalf("expected %s … got %v, %v", benchName(i), ok, err)
					}
				}
			}
		})
	}
}

// BenchmarkOneCall is one call with 1000 sessions on the server, through
// a tmux process of its own and over the control connection: a listing of
// one session (the confirmation of a death) and a launch (new-session and
// set-option). Besides ns/op it reports the p50 and p99 of the calls.
func BenchmarkOneCall(b *testing.B) {
	c := benchServer(b, 1000)
	ctl := &Client{Socket: c.Socket, Timeout: time.Minute, Control: true}
	b.Cleanup(func() { ctl.Close(context.Background()) })
	connected(b, ctl)
	ctx := context.Background()
	for _, tr := range []struct {
		name string
		c    *Client
	}{{"exec", c}, {"control", ctl}} {
		b.Run(tr.name+"/list-session", func(b *testing.B) {
			var took []time.Duration
			i := 0
			for b.Loop() {
				start := time.Now()
				panes, err := tr.c.ListSession(ctx, benchName(i%1000))
				took = append(took, time.Since(start))
				if err != nil || len(panes) != 1 {
					b.Fatalf("expected one pane … got %d, %v", len(panes), err)
				}
				i++
			}
			reportPercentiles(b, took)
		})
		b.Run(tr.name+"/new-session", func(b *testing.B) {
			var took []time.Duration
			var names []string
			for b.Loop() {
				name := fmt.Sprintf("%s-new-%d", tr.name, len(names))
				start := time.Now()
				_, err := tr.c.NewSession(ctx, name, "", nil, []string{"sleep", "3600"})
				took = append(took, time.Since(start))
				if err != nil {
					b.Fatalf("new session: %v", err)
				}
				names = append(names, name)
			}
			b.StopTimer()
			for _, n := range names {
				tr.c.KillSession(ctx, n)
			}
			reportPercentiles(b, took)
		})
	}
	if s := ctl.Stats(); s.Exec > 2 {
		b.Errorf("expected the control client's calls over its connection … got %+v", s)
	}
}

// reportPercentiles reports the p50 and p99 of took in milliseconds.
func reportPercentiles(b *testing.B, took []time.Duration) {
	if len(took) == 0 {
		return
	}
	slices.Sort(took)
	at := func(q float64) float64 {
		return float64(took[min(len(took)-1, int(q*float64(len(took))))].Microseconds()) / 1000
	}
	b.ReportMetric(at(0.50), "p50-ms")
	b.ReportMetric(at(0.99), "p99-ms")
}
