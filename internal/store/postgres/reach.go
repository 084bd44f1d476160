package postgres

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"

	"herd/internal/store"
)

var _ store.CommitResolver = (*Store)(nil)

// unreachable reports whether err says the server cannot be reached: a
// connection refused, reset or closed, a socket gone, a timeout, or the
// server shutting down, crashed or still starting (SQLSTATE class 08,
// 57P01-57P03).
func unreachable(err error) bool {
	if err == nil {
		return false
	}
	for _, target := range []error{driver.ErrBadConn, io.EOF, io.ErrUnexpectedEOF, net.ErrClosed,
		syscall.ECONNREFUSED, syscall.ECONNRESET, syscall.EPIPE, syscall.ENOENT} {
		if errors.Is(err, target) {
			return true
		}
	}
	var ce *pgconn.ConnectError
	var ne net.Error
	if errors.As(err, &ce) || errors.As(err, &ne) || pgconn.Timeout(err) {
		return true
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return strings.HasPrefix(pe.Code, "08") || pe.Code == "57P01" || pe.Code == "57P02" || pe.Code == "57P03"
	}
	// pgx reports a connection it has closed after a failure so.
	return strings.Contains(err.Error(), "conn closed") || strings.Contains(err.Error(), "conn busy")
}

// unreachableErr marks err with store.ErrUnreachable when the server
// could not be reached. An error once ctx is done is the caller's deadline
// or cancellation, not the server's absence: it is left as it is.
func unreachableErr(ctx context.Context, err error) error {
	if err == nil || ctx.Err() != nil || errors.Is(err, store.ErrUnreachable) || !unreachable(err) {
		return err
	}
	return fmt.Errorf("%w: %w", store.ErrUnreachable, err)
}

// Committed reports whether transaction xid (a CommitUnknownError's)
// committed. A transaction the server reports still in progress, or too
// old to know, is an error: the caller asks again later.
func (s *Store) Committed(ctx context.Context, xid string) (bool, error) {
	var st sql.NullString
	if err := s.db.QueryRowContext(ctx, "SELECT txid_status($1::bigint)", xid).Scan(&st); err != nil {
		return false, unreachableErr(ctx, fmt.Errorf("postgres: transaction %s: %w", xid, err))
	}
	switch st.String {
	case "committed":
		return true, nil
	case "aborted":
		return false, nil
	}
	if !st.Valid {
		return false, fmt.Errorf("postgres: transaction %s: too old to know its outcome", xid)
	}
	return false, fmt.Errorf("postgres: transaction %s: %s", xid, st.String)
}
