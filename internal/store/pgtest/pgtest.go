// Package pgtest gives tests a fresh PostgreSQL database each: on the server
// HERD_TEST_PG_DSN names, or on a private cluster started for the test binary.
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"herd/internal/pgcluster"
)

// EnvDSN names an existing server to test against instead of a private
// cluster. Its user needs the CREATEDB privilege.
const EnvDSN = "HERD_TEST_PG_DSN"

var (
	// mu guards the fields below, set once by Main.
	mu sync.Mutex
	// admin is the DSN of a database on the server tests use to create and
	// drop their own; empty when there is no server.
	admin string
	// unavailable says why there is no server (binaries missing).
	unavailable string
	// broken is why the server could not be started or reached.
	broken error
	// started is set when Main ran.
	started bool
)

// seq numbers the databases of this process.
var seq atomic.Int64

// Main runs the package's tests with a server available and returns the exit
// code; call it from TestMain: os.Exit(pgtest.Main(m)). With EnvDSN unset it
// starts a private cluster (package pgcluster) and removes it after the tests.
func Main(m *testing.M) int {
	mu.Lock()
	started = true
	var c *pgcluster.Cluster
	if dsn := os.Getenv(EnvDSN); dsn != "" {
		admin = dsn
	} else {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		var err error
		c, err = pgcluster.Start(ctx)
		cancel()
		switch {
		case errors.Is(err, pgcluster.ErrNoBinaries):
			unavailable = err.Error()
		case err != nil:
			broken = err
		default:
			admin = c.DSN("postgres")
		}
	}
	mu.Unlock()

	code := m.Run()

	if c != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := c.Stop(ctx); err != nil {
			fmt.Fprintf(os.Stderr, "pgtest: %v\n", err)
			if code == 0 {
				code = 1
			}
		}
	}
	return code
}

// DSN creates a new, empty database for t and returns its DSN; the database
// is dropped when t ends. Without a server t is skipped with the reason, or
// fails when the environment variable CI is set: there a missing PostgreSQL
// is a broken setup, not an optional test.
func DSN(t testing.TB) string {
	t.Helper()
	mu.Lock()
	adminDSN, why, err, ok := admin, unavailable, broken, started
	mu.Unlock()
	switch {
	case !ok:
		t.Fatal("pgtest: DSN called without pgtest.Main in TestMain")
	case err != nil:
		t.Fatalf("pgtest: %v", err)
	case adminDSN == "":
		if os.Getenv("CI") != "" {
			t.Fatalf("pgtest: no PostgreSQL on CI: %s (set %s or install postgresql)", why, EnvDSN)
		}
		t.Skipf("pgtest: no PostgreSQL: %s (set %s or install postgresql)", why, EnvDSN)
	}
	name := fmt.Sprintf("herd_test_%d_%d", os.Getpid(), seq.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// A natural-language collation where the server has ICU, so that a
	// query relying on the byte order of text shows up in tests.
	create := "CREATE DATABASE " + name + " TEMPLATE template0 ENCODING 'UTF8'"
	if err := adminExec(ctx, adminDSN, create+" LOCALE_PROVIDER icu ICU_LOCALE 'en-US' LOCALE 'C'"); err != nil {
		t.Logf("pgtest: no ICU collation (%v); using the server's default", err)
		if err := adminExec(ctx, adminDSN, create); err != nil {
			t.Fatalf("pgtest: create database: %v", err)
		}
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := adminExec(ctx, adminDSN, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("pgtest: drop database: %v", err)
		}
	})
	dsn, err := WithDatabase(adminDSN, name)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	return dsn
}

// adminExec runs one statement on a connection of its own.
func adminExec(ctx context.Context, dsn, stmt string) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close(context.Background()) }()
	_, err = conn.Exec(ctx, stmt)
	return err
}

// WithDatabase returns dsn (a URL or keyword/value form) naming database db
// instead of its own.
func WithDatabase(dsn, db string) (string, error) {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return "", fmt.Errorf("dsn: %w", err)
		}
		u.Path = "/" + db
		u.RawPath = ""
		return u.String(), nil
	}
	// In the keyword/value form a later keyword replaces an earlier one.
	return strings.TrimSpace(dsn) + " dbname=" + db, nil
}
