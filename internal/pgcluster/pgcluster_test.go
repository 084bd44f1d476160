package pgcluster

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"herd/internal/testenv"
)

func TestVersion(t *testing.T) {
	cases := []struct {
		dir  string
		want int
	}{
		{"/usr/lib/postgresql/15/bin", 15},
		{"/usr/lib/postgresql/9/bin", 9},
		{"/usr/lib/postgresql/17/bin", 17},
		{"/usr/lib/postgresql/devel/bin", 0},
	}
	for _, c := range cases {
		if got := version(c.dir); got != c.want {
			t.Errorf("[%s] expected %d, got %d", c.dir, c.want, got)
		}
	}
}

// TestStartStop starts a real cluster, checks who runs it and that it
// serves queries, then stops it and expects its directory gone.
func TestStartStop(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := Start(ctx)
	if errors.Is(err, ErrNoBinaries) {
		testenv.Require(t, "PostgreSQL", err.Error(), testenv.InstallPostgres)
	}
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	defer func() {
		if !stopped {
			_ = c.Stop(context.Background())
		}
	}()

	conn, err := pgx.Connect(ctx, c.DSN("postgres"))
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	var one int
	var listen string
	if err := conn.QueryRow(ctx, "SELECT 1, current_setting('listen_addresses')").Scan(&one, &listen); err != nil {
		t.Fatalf("query: %v", err)
	}
	_ = conn.Close(ctx)
	if one != 1 || listen != "" {
		t.Errorf("[server] expected 1 and no TCP listener, got %d and %q", one, listen)
	}
	if os.Geteuid() == 0 {
		if uid := processUID(t, c.cmd.Process.Pid); uid != nobody {
			t.Errorf("[server uid] expected %d, got %d", nobody, uid)
		}
	}

	if err := c.Stop(ctx); err != nil {
		t.Fatalf("stop: %v", err)
	}
	stopped = true
	if _, err := os.Stat(c.dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("[directory after stop] expected it gone, got %v", err)
	}
	select {
	case <-c.exited:
	default:
		t.Errorf("[server after stop] expected it exited")
	}
}

// processUID is the real uid of pid, from /proc.
func processUID(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, "Uid:"); ok {
			f := strings.Fields(rest)
			uid, err := strconv.Atoi(f[0])
			if err != nil {
				t.Fatal(err)
			}
			return uid
		}
	}
	t.Fatalf("no Uid line in /proc/%d/status", pid)
	return -1
}

func TestFindBinaries(t *testing.T) {
	root := t.TempDir()
	mk := func(dir string, names ...string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Join(root, dir), 0o755); err != nil {
			t.Fatal(err)
		}
		for _, n := range names {
			if err := os.WriteFile(filepath.Join(root, dir, n), []byte("#!/bin/sh\n"), 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	mk("9/bin", "initdb", "postgres")
	mk("14/bin", "initdb", "postgres")
	mk("16/bin", "initdb") // no server binary: not usable
	mk("path", "initdb")   // initdb alone in PATH
	t.Setenv("PATH", filepath.Join(root, "path"))
	defer func(old string) { debianBins = old }(debianBins)

	debianBins = filepath.Join(root, "*", "bin")
	got, err := findBinaries()
	if want := filepath.Join(root, "14", "bin"); err != nil || got != want {
		t.Errorf("[newest complete version] expected %s, got %s, %v", want, got, err)
	}

	debianBins = filepath.Join(root, "none", "*", "bin")
	if got, err := findBinaries(); !errors.Is(err, ErrNoBinaries) {
		t.Errorf("[nothing usable] expected ErrNoBinaries, got %q, %v", got, err)
	}

	mk("path", "postgres")
	if got, err := findBinaries(); err != nil || got != filepath.Join(root, "path") {
		t.Errorf("[both in PATH] expected %s, got %s, %v", filepath.Join(root, "path"), got, err)
	}
}
