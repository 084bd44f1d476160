package postgres

import (
	"database/sql"
	"io/fs"
	"testing"

	"github.com/pressly/goose/v3"

	"herd/internal/store/pgtest"
	"herd/internal/store/storetest"
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
	for _, data := range storetest.EventTaskData {
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
	storetest.CheckEventTask(t, s)
}
