package tasks

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestRunCheck(t *testing.T) {
	t.Parallel()
	m := &Manager{o: Options{Dir: t.TempDir()}, log: slog.Default()}
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "child.pid")
	for _, c := range []struct {
		name    string
		argv    []string
		timeout time.Duration
		exit    int
		passed  bool
		tail    string
		err     string
	}{
		{"passes", []string{"sh", "-c", "echo all good"}, 10 * time.Second, 0, true, "all good\n", ""},
		{"fails", []string{"sh", "-c", "echo broken >&2; exit 3"}, 10 * time.Second, 3, false, "broken\n", ""},
		{"long output keeps its end", []string{"sh", "-c", "yes line | head -n 5000; echo THE END"}, 10 * time.Second, 0, true, "THE END\n", ""},
		{"no such command", []string{"no-such-command-herd"}, 10 * time.Second, -1, false, "", "no-such-command-herd"},
		// A check that hangs, with a child of its own: both ended at
		// the time limit.
		{"hangs", []string{"sh", "-c", "sleep 300 & echo $! > " + pidFile + "; wait"}, 500 * time.Millisecond, -1, false, "", "timed out"},
	} {
		t.Run(c.name, func(t *testing.T) {
			log := filepath.Join(m.o.Dir, c.name+".log")
			start := time.Now()
			res := m.run(context.Background(), "t-1-check", dir, c.argv, c.timeout, log)
			if res.Exit != c.exit || res.Passed() != c.passed {
				t.Errorf("expected exit %d passed %v, got %+v", c.exit, c.passed, res)
			}
			if !strings.HasSuffix(res.Tail, c.tail) || len(res.Tail) > tailBytes {
				t.Errorf("expected a tail ending %q of at most %d bytes, got %d bytes ending %q", c.tail, tailBytes, len(res.Tail), res.Tail[max(0, len(res.Tail)-40):])
			}
			if c.err != "" && (res.Err == nil || !strings.Contains(res.Err.Error(), c.err)) {
				t.Errorf("expected an error saying %q, got %v", c.err, res.Err)
			}
			if c.exit >= 0 {
				b, err := os.ReadFile(log)
				if err != nil || !strings.HasSuffix(string(b), c.tail) {
					t.Errorf("expected the whole output in %s, got %d bytes (%v)", log, len(b), err)
				}
			}
			if c.name == "hangs" {
				if d := time.Since(start); d > 3*checkGrace {
					t.Errorf("expected the check ended soon after its limit, took %s", d)
				}
				b, _ := os.ReadFile(pidFile)
				var pid int
				if _, err := fmt.Sscan(strings.TrimSpace(string(b)), &pid); err != nil || pid <= 0 {
					t.Fatalf("no child pid: %q", b)
				}
				deadline := time.Now().Add(5 * time.Second)
				for syscall.Kill(pid, 0) == nil && time.Now().Before(deadline) {
					time.Sleep(50 * time.Millisecond)
				}
				if syscall.Kill(pid, 0) == nil {
					t.Errorf("expected the check's child %d ended with it", pid)
				}
			}
		})
	}
}

func TestTailBuffer(t *testing.T) {
	b := &tailBuffer{max: 8}
	for _, w := range []string{"abc", "defgh", "ij", "0123456789xyz"} {
		b.Write([]byte(w))
	}
	if got := b.String(); got != "56789xyz" {
		t.Errorf("expected the last 8 bytes, got %q", got)
	}
	b = &tailBuffer{max: 8}
	b.Write([]byte("abc"))
	b.Write([]byte("defgh"))
	b.Write([]byte("ij"))
	if got := b.String(); got != "cdefghij" {
		t.Errorf("expected cdefghij, got %q", got)
	}
}
