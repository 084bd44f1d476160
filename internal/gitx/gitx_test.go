package gitx

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestRunReportsStderrAndExit(t *testing.T) {
	dir := t.TempDir()
	var c Client
	_, err := c.Run(t.Context(), dir, "rev-parse", "--show-toplevel")
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("expected *Error outside a repository, got %v", err)
	}
	if !strings.Contains(e.Stderr, "not a git repository") || e.ExitCode() != 128 {
		t.Fatalf("expected stderr 'not a git repository' and exit 128, got %q exit %d", e.Stderr, e.ExitCode())
	}
	if !strings.Contains(err.Error(), dir) {
		t.Errorf("expected the error to name the directory %s, got %v", dir, err)
	}

	if _, err := c.Run(t.Context(), dir, "init", "-q"); err != nil {
		t.Fatalf("init: %v", err)
	}
	top, err := c.Line(t.Context(), dir, "rev-parse", "--show-toplevel")
	want, _ := filepath.EvalSymlinks(dir)
	if err != nil || top != want {
		t.Fatalf("expected toplevel %s, got %q (%v)", want, top, err)
	}
}

func TestExit(t *testing.T) {
	dir := t.TempDir()
	var c Client
	if _, err := c.Run(t.Context(), dir, "init", "-q"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "a"), []byte("a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Run(t.Context(), dir, "add", "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Run(t.Context(), dir, "commit", "-qm", "a"); err != nil {
		t.Fatalf("commit (identity comes from the wrapper): %v", err)
	}
	ok, err := c.Exit(t.Context(), dir, "diff", "--quiet")
	if err != nil || !ok {
		t.Fatalf("[clean] expected (true, nil), got (%v, %v)", ok, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "a"), []byte("b\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ok, err = c.Exit(t.Context(), dir, "diff", "--quiet")
	if err != nil || ok {
		t.Fatalf("[dirty] expected (false, nil), got (%v, %v)", ok, err)
	}
	if _, err := c.Exit(t.Context(), dir, "rev-parse", "--verify", "--quiet", "no-such-ref^{commit}"); err != nil {
		t.Fatalf("[missing ref] expected exit 1 as false, got %v", err)
	}
	if _, err := c.Exit(t.Context(), filepath.Join(dir, "missing"), "status"); err == nil {
		t.Fatal("[missing dir] expected an error")
	}
}

func TestTimeoutKillsCall(t *testing.T) {
	// A git alias runs through git's own shell, which is fine in a test: it
	// is the call that hangs, not something herd builds.
	dir := t.TempDir()
	c := Client{Timeout: 200 * time.Millisecond}
	start := time.Now()
	_, err := c.Run(t.Context(), dir, "-c", "alias.hang=!sleep 30", "hang")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("expected a deadline error, got %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("expected the call to end soon after its timeout, took %v", d)
	}
}

func TestEnvDropsRepositoryOverrides(t *testing.T) {
	t.Setenv("GIT_DIR", "/nonexistent")
	t.Setenv("GIT_TERMINAL_PROMPT", "1")
	e := env()
	for _, kv := range e {
		if strings.HasPrefix(kv, "GIT_DIR=") || kv == "GIT_TERMINAL_PROMPT=1" {
			t.Errorf("expected %s to be dropped", kv)
		}
	}
	dir := t.TempDir()
	var c Client
	if _, err := c.Run(t.Context(), dir, "init", "-q"); err != nil {
		t.Fatalf("expected init to ignore GIT_DIR, got %v", err)
	}
}
