package gitx

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
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
	if _, err := c.Run(t.Context(), dir, "-c", "user.name=t", "-c", "user.email=t@localhost", "commit", "-qm", "a"); err != nil {
		t.Fatalf("commit: %v", err)
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

func TestEnv(t *testing.T) {
	t.Setenv("GIT_DIR", "/nonexistent")
	t.Setenv("GIT_TERMINAL_PROMPT", "1")
	t.Setenv("GIT_CONFIG_GLOBAL", "/somewhere/gitconfig")
	cases := []struct {
		isolated bool
		want     []string
		absent   []string
	}{
		{false, []string{"GIT_TERMINAL_PROMPT=0", "GIT_OPTIONAL_LOCKS=0", "LC_ALL=C", "GIT_CONFIG_GLOBAL=/somewhere/gitconfig"},
			[]string{"GIT_DIR=/nonexistent", "GIT_TERMINAL_PROMPT=1", "GIT_CONFIG_NOSYSTEM=1"}},
		{true, []string{"GIT_TERMINAL_PROMPT=0", "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=" + os.DevNull},
			[]string{"GIT_DIR=/nonexistent", "GIT_CONFIG_GLOBAL=/somewhere/gitconfig"}},
	}
	for _, c := range cases {
		e := env(c.isolated)
		for _, w := range c.want {
			if !slices.Contains(e, w) {
				t.Errorf("[isolated=%v] expected %s in the environment", c.isolated, w)
			}
		}
		for _, a := range c.absent {
			if slices.Contains(e, a) {
				t.Errorf("[isolated=%v] expected %s dropped", c.isolated, a)
			}
		}
	}
	dir := t.TempDir()
	c := Client{Isolated: true}
	if _, err := c.Run(t.Context(), dir, "init", "-q"); err != nil {
		t.Fatalf("expected init to ignore GIT_DIR, got %v", err)
	}
}

func TestIsolatedIgnoresGlobalConfig(t *testing.T) {
	// A global config that sets a value herd would see.
	global := filepath.Join(t.TempDir(), "gitconfig")
	if err := os.WriteFile(global, []byte("[herdtest]\n\tvalue = global\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GIT_CONFIG_GLOBAL", global)
	dir := t.TempDir()
	cases := []struct {
		isolated bool
		want     string
	}{{false, "global"}, {true, ""}}
	for _, c := range cases {
		cl := Client{Isolated: c.isolated}
		got, _ := cl.Line(t.Context(), dir, "config", "--get", "herdtest.value")
		if got != c.want {
			t.Errorf("[isolated=%v] expected %q, got %q", c.isolated, c.want, got)
		}
	}
}
