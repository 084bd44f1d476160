package storetest

import (
	"context"
	"testing"

	"herd/internal/store"
)

// EventTaskData are the data of events written before the task column,
// and which task each names: only a string "task" counts.
var EventTaskData = []string{`{"task":"t-3","by":"ana"}`, `{"task":7}`, `{}`, `{"note":"\"task\":\"t-3\""}`, `{"task":"t-4"}`}

// CheckEventTask checks a store migrated past the task column from one
// holding EventTaskData: each task's story is read through the column.
func CheckEventTask(t *testing.T, s store.Store) {
	t.Helper()
	for task, want := range map[string]int{"t-3": 1, "t-4": 1, "t-7": 0} {
		err := s.View(context.Background(), func(tx store.Tx) error {
			evs, err := tx.Events(store.EventFilter{Task: task})
			if len(evs) != want {
				t.Errorf("[%s] expected %d event(s), got %d", task, want, len(evs))
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}
