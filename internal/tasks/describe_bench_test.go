package tasks

import (
	"context"
	"log/slog"
	"slices"
	"testing"
	"time"

	"herd"
	"herd/internal/status"
	"herd/internal/store"
	"herd/internal/worktree"
)

// BenchmarkDescribeTask: `herd describe task` of the oldest of 10,000
// tasks whose stories fill the log (ten events each) beside 100,000
// events of the agents, through the events' task index ("index"), and
// as it was read before the index ("scan": each task event kind since
// the task was made, matched on its data).
func BenchmarkDescribeTask(b *testing.B) {
	st, _ := benchStore(b, 1, 10000, 64, false)
	ctx := context.Background()
	t0 := time.Now() // after the tasks were made
	kinds := []string{herd.EventTaskQueued, herd.EventTaskAssigned, herd.EventStopped, herd.EventRestarted, herd.EventTaskDelivered,
		herd.EventTaskChecked, herd.EventReaction, herd.EventTaskReview, herd.EventTaskLanded, herd.EventStopped}
	for chunk := range 20 {
		err := st.Update(ctx, func(tx store.Tx) error {
			for i := chunk * 500; i < (chunk+1)*500; i++ {
				id := herd.TaskID(int64(i + 1))
				for j, k := range kinds {
					at := t0.Add(time.Duration(i*len(kinds)+j) * time.Millisecond)
					if err := tx.AppendEvent(&herd.Event{Time: at, Host: "h", Session: "w-0", Kind: k, Data: map[string]any{"task": id}}); err != nil {
						return err
					}
					if err := tx.AppendEvent(&herd.Event{Time: at, Host: "h", Session: "w-0", Kind: herd.EventActivity, Data: map[string]any{"to": "idle"}}); err != nil {
						return err
					}
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	m := New(Options{Status: status.New(st, "h", herd.RestartPolicy{}, slog.Default()), Worktrees: &worktree.Manager{}, Dir: b.TempDir(), Log: slog.Default()})
	scan := func(id string) (n int, err error) {
		err = st.View(ctx, func(tx store.Tx) error {
			t, err := tx.Task(id)
			if err != nil {
				return err
			}
			var out []herd.Event
			for _, kind := range herd.TaskEventKinds {
				evs, err := tx.Events(store.EventFilter{Kind: kind, Since: t.CreatedAt})
				if err != nil {
					return err
				}
				for _, ev := range evs {
					if ev.Data["task"] == id {
						out = append(out, ev)
					}
				}
			}
			slices.SortFunc(out, func(a, b herd.Event) int { return int(a.ID - b.ID) })
			n = len(out)
			return nil
		})
		return n, err
	}
	b.Run("index", func(b *testing.B) {
		for b.Loop() {
			d, err := m.Describe(ctx, "t-1")
			if err != nil || len(d.Events) != len(kinds) {
				b.Fatalf("expected %d events, got %d, %v", len(kinds), len(d.Events), err)
			}
		}
	})
	b.Run("scan", func(b *testing.B) {
		for b.Loop() {
			if n, err := scan("t-1"); err != nil || n != 7 {
				b.Fatalf("expected the 7 events of task kinds, got %d, %v", n, err)
			}
		}
	})
}
