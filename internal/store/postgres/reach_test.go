package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"herd/internal/store"
	"herd/internal/store/pgtest"
)

func TestUnreachable(t *testing.T) {
	cases := []struct {
		name string
		err  error
		want bool
	}{
		{"refused", &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}, true},
		{"socket gone", fmt.Errorf("dial: %w", syscall.ENOENT), true},
		{"eof", fmt.Errorf("read: %w", io.ErrUnexpectedEOF), true},
		{"admin shutdown", &pgconn.PgError{Code: "57P01"}, true},
		{"starting up", &pgconn.PgError{Code: "57P03"}, true},
		{"connection exception", &pgconn.PgError{Code: "08006"}, true},
		{"serialization", &pgconn.PgError{Code: "40001"}, false},
		{"unique violation", &pgconn.PgError{Code: "23505"}, false},
		{"not found", store.ErrNotFound, false},
		{"nil", nil, false},
	}
	for _, c := range cases {
		if got := unreachable(c.err); got != c.want {
			t.Errorf("[%s] expected %v, got %v", c.name, c.want, got)
		}
	}
}

// TestUnreachableErrKeepsCallersDeadline: an error once the caller's
// context is done is the caller's, not the server's absence.
func TestUnreachableErrKeepsCallersDeadline(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	err := fmt.Errorf("read: %w", io.EOF)
	if !errors.Is(unreachableErr(ctx, err), store.ErrUnreachable) {
		t.Fatal("expected an EOF marked unreachable")
	}
	cancel()
	if errors.Is(unreachableErr(ctx, err), store.ErrUnreachable) {
		t.Fatal("expected an error after the caller's cancel left unmarked")
	}
}

// TestCommitted: the server tells a committed transaction from one rolled
// back, by the id read before its COMMIT.
func TestCommitted(t *testing.T) {
	s := openDSN(t, pgtest.DSN(t))
	ctx := testCtx(t)
	xid := func(commit bool) string {
		tx, err := s.db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		var id string
		if err := tx.QueryRowContext(ctx, "SELECT txid_current()::text").Scan(&id); err != nil {
			t.Fatal(err)
		}
		if commit {
			err = tx.Commit()
		} else {
			err = tx.Rollback()
		}
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	for _, commit := range []bool{true, false} {
		id := xid(commit)
		got, err := s.Committed(ctx, id)
		if err != nil || got != commit {
			t.Errorf("[commit %v] expected %v, got %v, %v", commit, commit, got, err)
		}
	}
}
