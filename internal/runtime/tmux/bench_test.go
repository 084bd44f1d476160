package tmux

import (
	"context"
	"fmt"
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
