package tasks

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"herd"
	"herd/internal/slots"
	"herd/internal/status"
	"herd/internal/store"
	"herd/internal/store/sqlite"
	"herd/internal/verbs"
	"herd/internal/worktree"
)

// benchStore is a store with a task role of replicas idle replicas (none
// holding a task unless busy) and queued queued tasks of prompt bytes.
func benchStore(b *testing.B, replicas, queued, prompt int, busy bool) (store.Store, string) {
	b.Helper()
	repo := b.TempDir()
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"commit", "-q", "--allow-empty", "-m", "first"}} {
		gitIn(b, repo, args...)
	}
	st, err := sqlite.Open(context.Background(), filepath.Join(b.TempDir(), "herd.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	now := time.Now().UTC()
	err = st.Update(context.Background(), func(tx store.Tx) error {
		if err := tx.PutRole(herd.Role{Name: "w", Replicas: replicas, Command: []string{"agent"}, Workdir: repo, Runtime: herd.RuntimeTmux, Tasks: true}); err != nil {
			return err
		}
		for i := range replicas {
			name := herd.SessionName("w", i)
			if err := tx.PutSession(herd.Session{Name: name, Role: "w", Index: i, Host: "h", State: herd.StateRunning,
				Activity: herd.ActivityIdle, Incarnation: "first-" + name, RuntimeKind: herd.RuntimeTmux}); err != nil {
				return err
			}
			if busy {
				t := herd.Task{Role: "w", State: herd.TaskWorking, Session: name, Incarnation: "first-" + name, Repo: repo, Base: "main",
					Prompt: strings.Repeat("p", prompt), CreatedAt: now, UpdatedAt: now}
				if err := tx.AddTask(&t); err != nil {
					return err
				}
			}
		}
		for range queued {
			t := herd.Task{Role: "w", State: herd.TaskQueued, Repo: repo, Base: "main", Prompt: strings.Repeat("p", prompt), CreatedAt: now, UpdatedAt: now}
			if err := tx.AddTask(&t); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return st, repo
}

// BenchmarkListTasks10000 lists 10,000 tasks (1 KiB prompts) as `herd
// get tasks` does: one query; the naive way, a read per task, for the
// ratio.
func BenchmarkListTasks10000(b *testing.B) {
	st, _ := benchStore(b, 0, 10000, 1024, false)
	ctx := context.Background()
	b.Run("one-query", func(b *testing.B) {
		for b.Loop() {
			var ts []herd.Task
			if err := st.View(ctx, func(tx store.Tx) (err error) { ts, err = tx.Tasks(store.TaskFilter{}); return err }); err != nil || len(ts) != 10000 {
				b.Fatal(err, len(ts))
			}
		}
	})
	b.Run("queued-only", func(b *testing.B) {
		for b.Loop() {
			var ts []herd.Task
			if err := st.View(ctx, func(tx store.Tx) (err error) {
				ts, err = tx.Tasks(store.TaskFilter{States: []herd.TaskState{herd.TaskQueued}, Limit: 100})
				return err
			}); err != nil || len(ts) != 100 {
				b.Fatal(err, len(ts))
			}
		}
	})
	b.Run("naive-per-task", func(b *testing.B) {
		for b.Loop() {
			err := st.View(ctx, func(tx store.Tx) error {
				for i := range 10000 {
					if _, err := tx.Task(herd.TaskID(int64(i + 1))); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkRoundIdle1000Queued is one round of the component with 1,000
// queued tasks and 10 replicas that all hold one (nothing to do): what
// each wake-up costs. It prints what the idle daemon spends on tasks at
// its rate of wake-ups when nothing changes (the safety tick, 30 s) and
// what a 1 s polling loop would.
func BenchmarkRoundIdle1000Queued(b *testing.B) {
	st, _ := benchStore(b, 10, 1000, 1024, true)
	m := New(Options{Status: status.New(st, "h", herd.RestartPolicy{}, slog.New(slog.DiscardHandler)), Slots: noSlots{}, Inject: noInject{},
		Worktrees: &worktree.Manager{}, Dir: b.TempDir(), Log: slog.New(slog.DiscardHandler)})
	ctx := context.Background()
	start := time.Now()
	for b.Loop() {
		if err := m.round(ctx); err != nil {
			b.Fatal(err)
		}
	}
	per := time.Since(start) / time.Duration(b.N)
	b.ReportMetric(float64(per.Microseconds())/1000, "ms/round")
	b.Logf("a round with 1,000 queued tasks: %s; idle at one wake-up per %s: %.4f%% of a core; polling every 1s: %.3f%%",
		per, safetyTick, 100*per.Seconds()/safetyTick.Seconds(), 100*per.Seconds())
}

type noSlots struct{}

func (noSlots) Restart(context.Context, slots.RestartRequest) (string, error) { return "", nil }

type noInject struct{}

func (noInject) Inject(context.Context, verbs.InjectRequest) (verbs.Result, error) {
	return verbs.Result{}, nil
}

// BenchmarkQueueToPrompt100 adds 100 tasks with 100 idle replicas and
// the component running, and measures from `task add` returning to the
// prompt handed to the agent's pane (the relaunch and the typing are
// stand-ins here: the component's own path, with the task's git
// worktree made for real). "one-by-one" waits for each prompt before
// the next task; "burst" adds the 100 20 ms apart, so they queue for the
// repository's git lock (each worktree is a git worktree add, about
// 75 ms here). It prints p50 and p99.
func BenchmarkQueueToPrompt100(b *testing.B) {
	b.Run("one-by-one", func(b *testing.B) { queueToPrompt(b, 0) })
	b.Run("burst", func(b *testing.B) { queueToPrompt(b, 20*time.Millisecond) })
}

func queueToPrompt(b *testing.B, gap time.Duration) {
	const n = 100
	for b.Loop() {
		st, _ := benchStore(b, n, 0, 0, false)
		f := &fakeHerd{t: b, st: st}
		var (
			mu      sync.Mutex
			added   = map[string]time.Time{}
			latency []time.Duration
			done    = make(chan struct{})
			each    = make(chan struct{}, n)
		)
		ctx, cancel := context.WithCancel(context.Background())
		m := New(Options{Status: status.New(st, "h", herd.RestartPolicy{}, slog.New(slog.DiscardHandler)), Slots: f, Inject: injectFunc(func(req verbs.InjectRequest) {
			mu.Lock()
			defer mu.Unlock()
			id := strings.TrimPrefix(req.Text, "task ")
			latency = append(latency, time.Since(added[id]))
			each <- struct{}{}
			if len(latency) == n {
				close(done)
			}
		}), Worktrees: &worktree.Manager{}, Dir: b.TempDir(), Log: slog.New(slog.DiscardHandler)})
		go m.Run(ctx)
		for i := range n {
			mu.Lock()
			added[fmt.Sprint(i)] = time.Now()
			mu.Unlock()
			if _, err := m.Add(ctx, AddRequest{Role: "w", Prompt: fmt.Sprintf("task %d", i)}); err != nil {
				b.Fatal(err)
			}
			if gap > 0 {
				time.Sleep(gap)
				continue
			}
			select {
			case <-each:
			case <-time.After(time.Minute):
				b.Fatalf("task %d not delivered", i)
			}
		}
		select {
		case <-done:
		case <-time.After(time.Minute):
			b.Fatalf("%d of %d prompts delivered", len(latency), n)
		}
		cancel()
		slices.Sort(latency)
		b.ReportMetric(float64(latency[n/2].Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(latency[n*99/100].Microseconds())/1000, "p99-ms")
		b.Logf("queue → prompt, %d idle replicas: p50 %s, p99 %s (a 1s polling dispatcher: p50 ≈ 500ms)", n, latency[n/2], latency[n*99/100])
	}
}

type injectFunc func(verbs.InjectRequest)

func (f injectFunc) Inject(_ context.Context, req verbs.InjectRequest) (verbs.Result, error) {
	f(req)
	return verbs.Result{}, nil
}
