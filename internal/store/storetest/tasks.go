package storetest

import (
	"errors"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"herd"
	"herd/internal/errs"
	"herd/internal/store"
)

// addTask adds task in its own transaction and returns it with its id.
func addTask(t *testing.T, s store.Store, task herd.Task) herd.Task {
	t.Helper()
	update(t, s, func(tx store.Tx) error { return tx.AddTask(&task) })
	return task
}

// testTaskRoundTrip: ids are t-1, t-2, ... in order of adding; a task
// reads back whole (times in UTC, the prompt's odd bytes as valid text);
// Put replaces it; a missing one is not found; a malformed id is bad
// input; a task without role or creation time is refused.
func testTaskRoundTrip(t *testing.T, s store.Store) {
	first := addTask(t, s, herd.Task{Role: "w", Title: "fix it", State: herd.TaskQueued, Repo: "/r", Base: "main",
		Check: []string{"go", "test", "./..."}, Prompt: "do it\nwell", CreatedAt: at(1), UpdatedAt: at(1)})
	second := addTask(t, s, herd.Task{Role: "w", State: herd.TaskQueued, CreatedAt: at(2), UpdatedAt: at(2)})
	if first.ID != "t-1" || second.ID != "t-2" {
		t.Fatalf("[ids] expected t-1 and t-2, got %s and %s", first.ID, second.ID)
	}
	var got herd.Task
	view(t, s, func(tx store.Tx) (err error) { got, err = tx.Task("t-1"); return err })
	if diff := cmp.Diff(first, got); diff != "" {
		t.Errorf("[round trip] (-want +got):\n%s", diff)
	}
	first.State, first.Session, first.Branch, first.Commits, first.UpdatedAt = herd.TaskWorking, "w-0", "herd/t-1", 2, at(5)
	update(t, s, func(tx store.Tx) error { return tx.PutTask(first) })
	view(t, s, func(tx store.Tx) (err error) { got, err = tx.Task("t-1"); return err })
	if diff := cmp.Diff(first, got); diff != "" {
		t.Errorf("[replaced] (-want +got):\n%s", diff)
	}
	err := s.View(ctx(t), func(tx store.Tx) error { _, err := tx.Task("t-99"); return err })
	if !errors.Is(err, store.ErrNotFound) || err.Error() != "task t-99 not found" {
		t.Errorf("[missing] expected \"task t-99 not found\", got %v", err)
	}
	for _, bad := range []string{"", "t-0", "t-01", "7", "t-x", "t--1"} {
		err := s.View(ctx(t), func(tx store.Tx) error { _, err := tx.Task(bad); return err })
		if errs.KindOf(err) != errs.BadInput {
			t.Errorf("[id %q] expected bad input, got %v", bad, err)
		}
	}
	if err := s.Update(ctx(t), func(tx store.Tx) error { return tx.PutTask(herd.Task{ID: "t-50", Role: "w", CreatedAt: at(1)}) }); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("[put missing] expected not found, got %v", err)
	}
	for _, bad := range []herd.Task{{CreatedAt: at(1)}, {Role: "w"}} {
		if err := s.Update(ctx(t), func(tx store.Tx) error { return tx.AddTask(&bad) }); err == nil {
			t.Errorf("expected an error adding %+v", bad)
		}
	}
}

// testTaskFilters: by role, by states, by the session holding it, after
// a number and limited; oldest first.
func testTaskFilters(t *testing.T, s store.Store) {
	add := func(role string, st herd.TaskState, session string) string {
		return addTask(t, s, herd.Task{Role: role, State: st, Session: session, CreatedAt: at(1)}).ID
	}
	q1, w1, q2, l1, r1 := add("a", herd.TaskQueued, ""), add("a", herd.TaskWorking, "a-0"), add("b", herd.TaskQueued, ""),
		add("a", herd.TaskLanded, "a-0"), add("b", herd.TaskReview, "b-1")
	ids := func(f store.TaskFilter) []string {
		var got []herd.Task
		view(t, s, func(tx store.Tx) (err error) { got, err = tx.Tasks(f); return err })
		out := []string{}
		for _, task := range got {
			out = append(out, task.ID)
		}
		return out
	}
	for _, c := range []struct {
		name string
		f    store.TaskFilter
		want []string
	}{
		{"all", store.TaskFilter{}, []string{q1, w1, q2, l1, r1}},
		{"role", store.TaskFilter{Role: "a"}, []string{q1, w1, l1}},
		{"queued", store.TaskFilter{States: []herd.TaskState{herd.TaskQueued}}, []string{q1, q2}},
		{"two states of a role", store.TaskFilter{Role: "b", States: []herd.TaskState{herd.TaskQueued, herd.TaskReview}}, []string{q2, r1}},
		// An ended task no longer holds its session.
		{"held", store.TaskFilter{Held: "a-0"}, []string{w1}},
		{"after", store.TaskFilter{AfterSeq: 2, Limit: 2}, []string{q2, l1}},
	} {
		if diff := cmp.Diff(c.want, ids(c.f)); diff != "" {
			t.Errorf("[%s] (-want +got):\n%s", c.name, diff)
		}
	}
}

// testTaskHeldOnce: a replica holds one task: a second task holding it
// is a conflict, whether added or put, and once the first ends it may.
func testTaskHeldOnce(t *testing.T, s store.Store) {
	first := addTask(t, s, herd.Task{Role: "w", State: herd.TaskWorking, Session: "w-0", CreatedAt: at(1)})
	second := addTask(t, s, herd.Task{Role: "w", State: herd.TaskQueued, CreatedAt: at(2)})
	second.State, second.Session = herd.TaskAssigned, "w-0"
	err := s.Update(ctx(t), func(tx store.Tx) error { return tx.PutTask(second) })
	if errs.KindOf(err) != errs.Conflict {
		t.Fatalf("[second holder] expected a conflict, got %v", err)
	}
	third := herd.Task{Role: "w", State: herd.TaskAssigned, Session: "w-0", CreatedAt: at(3)}
	if err := s.Update(ctx(t), func(tx store.Tx) error { return tx.AddTask(&third) }); errs.KindOf(err) != errs.Conflict {
		t.Errorf("[added holding] expected a conflict, got %v", err)
	}
	first.State = herd.TaskLanded
	update(t, s, func(tx store.Tx) error { return tx.PutTask(first) })
	update(t, s, func(tx store.Tx) error { return tx.PutTask(second) })
}

// testTaskAssignConcurrent: many transactions assigning queued tasks to
// one replica at once, each reading what is queued and whether the
// replica is free: the replica ends with one task, assigned once.
func testTaskAssignConcurrent(t *testing.T, s store.Store) {
	for range 5 {
		addTask(t, s, herd.Task{Role: "w", State: herd.TaskQueued, CreatedAt: at(1)})
	}
	const n = 10
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		won   []string
		c     = ctx(t)
		start = make(chan struct{})
	)
	for range n {
		wg.Go(func() {
			<-start
			var got string
			err := s.Update(c, func(tx store.Tx) error {
				got = ""
				held, err := tx.Tasks(store.TaskFilter{Held: "w-0"})
				if err != nil || len(held) > 0 {
					return err
				}
				queued, err := tx.Tasks(store.TaskFilter{States: []herd.TaskState{herd.TaskQueued}, Limit: 1})
				if err != nil || len(queued) == 0 {
					return err
				}
				task := queued[0]
				task.State, task.Session = herd.TaskAssigned, "w-0"
				got = task.ID
				return tx.PutTask(task)
			})
			mu.Lock()
			defer mu.Unlock()
			if err != nil && errs.KindOf(err) != errs.Conflict {
				t.Errorf("[concurrent assign] unexpected error: %v", err)
			}
			if err == nil && got != "" {
				won = append(won, got)
			}
		})
	}
	close(start)
	wg.Wait()
	if len(won) != 1 {
		t.Fatalf("[concurrent assign] expected one assignment, got %v", won)
	}
	var held []herd.Task
	view(t, s, func(tx store.Tx) (err error) { held, err = tx.Tasks(store.TaskFilter{Held: "w-0"}); return err })
	if len(held) != 1 || held[0].ID != won[0] {
		t.Errorf("[concurrent assign] expected %s held, got %+v", won[0], held)
	}
}
