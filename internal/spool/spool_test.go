package spool

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"herd/internal/api"
)

// report is a report of session s with event ev.
func report(s, ev string) api.ActivityReport {
	return api.ActivityReport{Session: s, Incarnation: "inc-1", Event: ev, Payload: []byte(`{"hook_event_name":"` + ev + `"}`),
		At: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
}

// line is the spooled line of a report.
func line(r api.ActivityReport) string {
	b, err := json.Marshal(r)
	if err != nil {
		panic(err)
	}
	return string(b) + "\n"
}

// collector records applied reports.
type collector struct {
	mu   sync.Mutex
	evs  []string
	fail map[string]bool // events refused
}

func (c *collector) apply(_ context.Context, r api.ActivityReport) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fail[r.Event] {
		return errors.New("refused")
	}
	c.evs = append(c.evs, r.Session+"/"+r.Event)
	return nil
}

func (c *collector) events() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.evs...)
}

// logBuf collects a log for a test to read.
type logBuf struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuf) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuf) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestIngestKeepsLinesAfterBadOnes: regression — a good report placed after
// an over-long line was dropped with every line after it (the scanner
// stopped for good at the first line over its buffer), so an agent's
// "waiting" never arrived. Every bad line is now skipped and counted, and
// every good line around it applied, in order.
func TestIngestKeepsLinesAfterBadOnes(t *testing.T) {
	good := func(ev string) string { return line(report("w-0", ev)) }
	long := `{"session":"w-0","event":"` + strings.Repeat("x", MaxLine) + `"}` + "\n"
	tests := []struct {
		name        string
		content     string
		want        []string
		wantSkipped int
	}{
		{"good only", good("a") + good("b"), []string{"w-0/a", "w-0/b"}, 0},
		{"over-long line then a good one", long + good("PermissionRequest"), []string{"w-0/PermissionRequest"}, 1},
		{"good, over-long, good", good("a") + long + good("b"), []string{"w-0/a", "w-0/b"}, 1},
		{"two over-long lines in a row", long + long + good("b"), []string{"w-0/b"}, 2},
		{"over-long line with no newline at the end", good("a") + strings.TrimSuffix(long, "\n"), []string{"w-0/a"}, 1},
		{"garbled line then a good one", "{not json\n" + good("b"), []string{"w-0/b"}, 1},
		{"binary garbage then a good one", "\x00\xff\xfe\n" + good("b"), []string{"w-0/b"}, 1},
		{"blank lines are not reports", "\n\n" + good("a") + "\n", []string{"w-0/a"}, 0},
		{"truncated last line (a writer killed mid-write)", good("a") + good("b")[:20], []string{"w-0/a"}, 1},
		{"a last good line with no newline", good("a") + strings.TrimSuffix(good("b"), "\n"), []string{"w-0/a", "w-0/b"}, 0},
		{"refused report then a good one", good("refuse") + good("b"), []string{"w-0/b"}, 1},
		{"a line exactly at the limit is read", good("a") + `{"session":"w-0","event":"` + strings.Repeat("y", MaxLine-len(`{"session":"w-0","event":""}`)) + `"}` + "\n" + good("b"),
			[]string{"w-0/a", "w-0/" + strings.Repeat("y", MaxLine-len(`{"session":"w-0","event":""}`)), "w-0/b"}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "w-0"+Suffix), []byte(tt.content), 0o600); err != nil {
				t.Fatal(err)
			}
			c := &collector{fail: map[string]bool{"refuse": true}}
			logs := &logBuf{}
			in := &Ingester{Dir: dir, Apply: c.apply, Log: slog.New(slog.NewTextHandler(logs, nil))}
			r, err := in.IngestAll(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			got := c.events()
			for i := range got {
				if len(got[i]) > 60 {
					got[i] = got[i][:60]
				}
			}
			want := append([]string(nil), tt.want...)
			for i := range want {
				if len(want[i]) > 60 {
					want[i] = want[i][:60]
				}
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("[%s] applied reports (-want +got):\n%s", tt.name, diff)
			}
			if r.Skipped != tt.wantSkipped || r.Applied != len(tt.want) || r.Files != 1 {
				t.Errorf("[%s] expected %d applied, %d skipped, 1 file … got %+v", tt.name, len(tt.want), tt.wantSkipped, r)
			}
			if tt.wantSkipped > 0 && !strings.Contains(logs.String(), "skipped") {
				t.Errorf("[%s] expected the skipped lines logged … got %q", tt.name, logs.String())
			}
			if left, _ := os.ReadDir(dir); len(left) != 0 {
				t.Errorf("[%s] expected the file removed … got %v", tt.name, left)
			}
		})
	}
}

// TestAppendThenIngest: reports appended by many writers while ingestion
// runs are each applied exactly once, in order per writer.
func TestAppendThenIngest(t *testing.T) {
	dir := t.TempDir()
	c := &collector{}
	const writers, each = 8, 50
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				if err := Append(dir, report(fmt.Sprintf("w-%d", w), fmt.Sprintf("e%03d", i))); err != nil {
					t.Errorf("append: %v", err)
				}
			}
		})
	}
	stop := make(chan struct{})
	ingested := make(chan struct{})
	go func() {
		defer close(ingested)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := Ingest(context.Background(), dir, func(r api.ActivityReport) error { return c.apply(context.Background(), r) }); err != nil {
				t.Errorf("ingest: %v", err)
				return
			}
		}
	}()
	wg.Wait()
	close(stop)
	<-ingested
	if _, err := Ingest(context.Background(), dir, func(r api.ActivityReport) error { return c.apply(context.Background(), r) }); err != nil {
		t.Fatal(err)
	}
	per := map[string][]string{}
	for _, e := range c.events() {
		s, ev, _ := strings.Cut(e, "/")
		per[s] = append(per[s], ev)
	}
	for w := range writers {
		got := per[fmt.Sprintf("w-%d", w)]
		if len(got) != each {
			t.Errorf("[w-%d] expected %d reports applied once each … got %d", w, each, len(got))
			continue
		}
		for i, ev := range got {
			if ev != fmt.Sprintf("e%03d", i) {
				t.Errorf("[w-%d] expected report %d in order … got %s", w, i, ev)
				break
			}
		}
	}
}

func TestAppendRefuses(t *testing.T) {
	dir := t.TempDir()
	if err := unix.Mkfifo(filepath.Join(dir, "fifo-0"+Suffix), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/passwd", filepath.Join(dir, "link-0"+Suffix)); err != nil {
		t.Fatal(err)
	}
	full := filepath.Join(dir, "full-0"+Suffix)
	if err := os.WriteFile(full, bytes.Repeat([]byte("x"), MaxFile-10), 0o600); err != nil {
		t.Fatal(err)
	}
	huge := report("big-0", "x")
	huge.Payload = bytes.Repeat([]byte("p"), MaxLine)
	tests := []struct {
		name string
		rep  api.ActivityReport
		want string
	}{
		{"invalid session name", report("../x", "a"), "invalid session name"},
		{"report over the line limit", huge, "line limit"},
		{"a FIFO where the file should be", report("fifo-0", "a"), "fifo-0"},
		{"a symlink where the file should be", report("link-0", "a"), "link-0"},
		{"a full file", report("full-0", "a"), "full"},
	}
	for _, tt := range tests {
		start := time.Now()
		err := Append(dir, tt.rep)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("[%s] expected an error with %q … got %v", tt.name, tt.want, err)
		}
		if took := time.Since(start); took > 2*time.Second {
			t.Errorf("[%s] expected Append to return at once … took %v", tt.name, took)
		}
	}
}

// TestIngestLockHeldAndNonRegular: a file a writer holds locked is left
// for later, with the reason; a FIFO named like a spool file is ignored
// without blocking and warned about once, not at every rescan.
func TestIngestLockHeldAndNonRegular(t *testing.T) {
	dir := t.TempDir()
	if err := Append(dir, report("w-0", "a")); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"fifo-0" + Suffix, "fifo-1" + Suffix + ingestSuffix + "-x"} {
		if err := unix.Mkfifo(filepath.Join(dir, name), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	f, err := os.OpenFile(filepath.Join(dir, "w-0"+Suffix), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	c := &collector{}
	logs := &logBuf{}
	in := &Ingester{Dir: dir, Apply: c.apply, Log: slog.New(slog.NewTextHandler(logs, nil))}
	r, err := in.IngestAll(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if r.Left != 1 || r.Applied != 0 || !strings.Contains(logs.String(), "held by a writer") {
		t.Errorf("[held] expected the file left with the reason … got %+v, %q", r, logs.String())
	}
	f.Close()
	for range 3 {
		if _, err := in.IngestAll(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if got := c.events(); len(got) != 1 || got[0] != "w-0/a" {
		t.Errorf("[released] expected the report applied once … got %v", got)
	}
	if n := strings.Count(logs.String(), "not a regular file"); n != 2 {
		t.Errorf("expected each FIFO warned about once over four passes … got %d warnings", n)
	}
}

// TestRunIngestsOnNotification: the loop ingests a file as soon as it is
// written, long before its rescan.
func TestRunIngestsOnNotification(t *testing.T) {
	dir := t.TempDir()
	c := &collector{}
	in := &Ingester{Dir: dir, Apply: c.apply, RescanEvery: time.Hour}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		in.Run(ctx)
	}()
	defer func() {
		cancel()
		<-done
	}()
	deadline := time.Now().Add(10 * time.Second)
	for i := 0; len(c.events()) == 0; i++ {
		if time.Now().After(deadline) {
			t.Fatal("expected the report ingested on notification")
		}
		if i%50 == 0 { // the watcher may not be set up yet: write again
			if err := Append(dir, report("w-0", "a")); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
}
