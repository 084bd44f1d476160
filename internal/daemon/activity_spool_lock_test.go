package daemon

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"herd"
	"herd/internal/api"
	"herd/internal/spool"

	"golang.org/x/sys/unix"
)

// spoolLog collects the daemon's log for a test to read.
type spoolLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *spoolLog) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *spoolLog) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// spoolEnv is a wdEnv whose log is kept, with one report spooled.
func spoolEnv(t *testing.T) (*wdEnv, *spoolLog, string) {
	t.Helper()
	logs := &spoolLog{}
	e := newWDEnvLog(t, logs)
	rep := api.ActivityReport{Session: wdSession, Incarnation: "inc-1", Payload: []byte(hook("PermissionRequest")), At: e.at(time.Second)}
	if err := spool.Append(spool.Dir(e.dir), rep); err != nil {
		t.Fatal(err)
	}
	return e, logs, spool.Dir(e.dir)
}

// ingestWithin runs ingestAll and fails the test if it has not returned
// within limit: ingestion must never hang.
func ingestWithin(t *testing.T, e *wdEnv, ctx context.Context, limit time.Duration) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.d.watchdog.IngestAll(ctx)
	}()
	select {
	case <-done:
	case <-time.After(limit):
		t.Fatalf("expected ingestion to return within %v; it is blocked", limit)
	}
}

// holdLock takes the exclusive lock of path through its own open file,
// as a `herd hook` process stopped while writing does.
func holdLock(t *testing.T, path string) (release func()) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() }) // also frees an ingestion stuck before the fix
	return func() { f.Close() }
}

// TestSpoolIngestLockHeld checks a writer holding the spool lock does not
// block ingestion: the file is left for the next rescan, with the reason
// logged, and ingested once the lock is free.
func TestSpoolIngestLockHeld(t *testing.T) {
	e, logs, dir := spoolEnv(t)
	release := holdLock(t, filepath.Join(dir, wdSession+spoolSuffix))

	start := time.Now()
	ingestWithin(t, e, context.Background(), 10*ingestLockWait)
	if took := time.Since(start); took < ingestLockWait {
		t.Errorf("[held] expected a wait of %v for the writer, returned after %v", ingestLockWait, took)
	}
	left, _ := os.ReadDir(dir)
	if len(left) != 1 || !strings.Contains(left[0].Name(), spoolSuffix+ingestSuffix) {
		t.Fatalf("[held] expected the taken file left, got %v", left)
	}
	if !strings.Contains(logs.String(), "left for the next rescan") || !strings.Contains(logs.String(), "held by a writer") {
		t.Errorf("[held] expected the reason logged, got %q", logs.String())
	}
	if s, _ := e.session(t); s.Activity == herd.ActivityWaiting {
		t.Errorf("[held] expected nothing applied yet, got %s", s.Activity)
	}

	release()
	ingestWithin(t, e, context.Background(), 10*ingestLockWait)
	if s, _ := e.session(t); s.Activity != herd.ActivityWaiting {
		t.Errorf("[released] expected the report applied (waiting), got %s", s.Activity)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("[released] expected an empty spool dir, got %v", left)
	}
}

// TestSpoolIngestLockCancelled checks the wait for the lock ends with the
// context (the daemon shutting down), not only at its deadline.
func TestSpoolIngestLockCancelled(t *testing.T) {
	e, logs, dir := spoolEnv(t)
	holdLock(t, filepath.Join(dir, wdSession+spoolSuffix))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	ingestWithin(t, e, ctx, 10*ingestLockWait)
	if !strings.Contains(logs.String(), "context canceled") {
		t.Errorf("expected the wait ended by the context, got %q", logs.String())
	}
	if left, _ := os.ReadDir(dir); len(left) != 1 {
		t.Errorf("expected the file left for the next start, got %v", left)
	}
}

// TestSpoolIngestFIFO checks a FIFO named like a spool file (fresh or
// taken over) is ignored instead of blocking the open, and does not keep
// the real spool files from being ingested.
func TestSpoolIngestFIFO(t *testing.T) {
	e, logs, dir := spoolEnv(t)
	fifos := []string{filepath.Join(dir, "fifo-0"+spoolSuffix), filepath.Join(dir, "fifo-1"+spoolSuffix+ingestSuffix+"-x")}
	for _, p := range fifos {
		if err := unix.Mkfifo(p, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		// Frees an ingestion stuck in open before the fix: a writer comes.
		for _, p := range fifos {
			if f, err := os.OpenFile(p, os.O_WRONLY|unix.O_NONBLOCK, 0); err == nil {
				f.Close()
			}
		}
	})
	ingestWithin(t, e, context.Background(), 10*ingestLockWait)
	if s, _ := e.session(t); s.Activity != herd.ActivityWaiting {
		t.Errorf("expected the regular spool file ingested (waiting), got %s", s.Activity)
	}
	for _, p := range fifos {
		if info, err := os.Lstat(p); err != nil || info.Mode()&os.ModeNamedPipe == 0 {
			t.Errorf("expected %s left in place, got %v", filepath.Base(p), err)
		}
	}
	if n := strings.Count(logs.String(), "not a regular file"); n != 2 {
		t.Errorf("expected both FIFOs logged as not regular files, got %d in %q", n, logs.String())
	}
}

// The spool's file names and lock wait, as the watchdog writes them.
const (
	spoolSuffix    = ".jsonl"
	ingestSuffix   = ".ingest"
	ingestLockWait = time.Second
)
