package postgres

import (
	"database/sql"
	"io/fs"
	"testing"

	"github.com/pressly/goose/v3"

	"herd/internal/store"
	"herd/internal/store/pgtest"
)

// TestMigrateEventTask: the events of a store from before the task
// column get it from their data when the store is opened (only a string
// "task" counts), and the task's story is then read through it.
func TestMigrateEventTask(t *testing.T) {
	dsn := pgtest.DSN(t)
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	sub, err := fs.Sub(migrations, "migrations")
	if err != nil {
		t.Fatal(err)
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, sub, goose.WithDisableGlobalRegistry(true))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(testCtx(t), 13); err != nil {
		t.Fatal(err)
	}
	for _, data := range []string{`{"task":"t-3","by":"ana"}`, `{"task":7}`, `{}`, `{"note":"\"task\":\"t-3\""}`, `{"task":"t-4"}`} {
		if _, err := db.Exec("INSERT INTO events (at, host, session, incarnation, kind, reason, message, data) VALUES (1, 'h', 'w-0', '', 'k', '', '', $1)", data); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()

	s, err := Open(testCtx(t), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for task, want := range map[string]int{"t-3": 1, "t-4": 1, "t-7": 0} {
		err := s.View(testCtx(t), func(tx store.Tx) error {
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
