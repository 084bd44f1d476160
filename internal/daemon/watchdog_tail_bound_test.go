package daemon

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"herd/internal/execrt"
)

// heapAllocated returns the bytes fn allocated on the heap.
func heapAllocated(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// appendFile appends b to path, as the agent does (O_APPEND).
func appendFile(t *testing.T, path string, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
}

// TestTailerFloodBounded reproduces an agent printing one huge line: a
// watchdog tick (poll, then capFile) must read at most a few poll bounds,
// the rotated copy must hold at most the cap, and what was skipped counts
// as lost. The tailer then follows the capped file at the next line.
func TestTailerFloodBounded(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out")
	appendFile(t, path, nil)
	var lines int
	var last string
	collect := func(b []byte, _ time.Time) { lines, last = lines+1, string(b) }
	tl := &tailer{path: path}
	now := time.Now()
	tl.poll(now, collect) // started on an empty file: follows from 0

	const flood = 32 << 20
	appendFile(t, path, append(bytes.Repeat([]byte{'x'}, flood-1), '\n'))
	capBytes := int64(maxPollRead)
	alloc := heapAllocated(func() {
		if err := tl.poll(now, collect); err != nil {
			t.Fatal(err)
		}
		if err := tl.capFile(capBytes, now, collect); err != nil {
			t.Fatal(err)
		}
	})
	// Process-wide: a wide margin that still tells a bounded read from
	// the 32 MiB a whole read costs.
	if alloc > 14*maxPollRead {
		t.Errorf("[flood] expected at most %d bytes allocated, got %d", 14*maxPollRead, alloc)
	}
	if info, err := os.Stat(path + ".1"); err != nil || info.Size() > capBytes {
		t.Errorf("[flood] expected the rotated copy under %d bytes, got %v %v", capBytes, info.Size(), err)
	}
	// Two polls and one bounded read of the rotated copy: the rest is lost.
	if want := int64(flood - 3*maxPollRead); tl.lost != want {
		t.Errorf("[flood] expected %d bytes counted lost, got %d", want, tl.lost)
	}
	if lines == 0 {
		t.Error("[flood] expected the cut line to count")
	}
	appendFile(t, path, []byte("next\n"))
	lines = 0
	tl.poll(now, collect)
	if lines != 1 || last != "next" {
		t.Errorf("[after flood] expected the next line only, got %d ending %q", lines, last)
	}
}

// TestTailerRotationReadsRest checks a rotation under a burst larger than
// one poll but within the cap loses no line: the unread part is read from
// the rotated copy, at the right offset.
func TestTailerRotationReadsRest(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out")
	appendFile(t, path, nil)
	var got []string
	collect := func(b []byte, _ time.Time) { got = append(got, string(b)) }
	tl := &tailer{path: path}
	now := time.Now()
	tl.poll(now, collect)

	var buf bytes.Buffer
	var want []string
	for i := 0; buf.Len()+len("line 0000000\n") <= 3*maxPollRead; i++ {
		want = append(want, fmt.Sprintf("line %07d", i))
		buf.WriteString(want[i] + "\n")
	}
	appendFile(t, path, buf.Bytes())
	tl.poll(now, collect)
	if err := tl.capFile(2*maxPollRead, now, collect); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) || got[0] != want[0] || got[len(got)-1] != want[len(want)-1] || tl.lost != 0 {
		t.Errorf("expected %d lines, none lost, got %d (lost %d bytes)", len(want), len(got), tl.lost)
	}

	// A burst beyond a poll's read from the rotated copy: the rest is lost
	// (counted), the line cut by the loss still counts, and the tailer
	// goes on at the next line, which starts the capped file.
	got = nil
	appendFile(t, path, bytes.Repeat(buf.Bytes(), 2))
	tl.poll(now, collect)
	if err := tl.capFile(4*maxPollRead, now, collect); err != nil {
		t.Fatal(err)
	}
	appendFile(t, path, []byte("next\n"))
	tl.poll(now, collect)
	if want := int64(2*buf.Len() - 3*maxPollRead); tl.lost != want {
		t.Errorf("[burst] expected %d bytes lost, got %d", want, tl.lost)
	}
	for i, l := range got[:len(got)-2] {
		if !strings.HasPrefix(l, "line ") || len(l) != len(want[0]) {
			t.Fatalf("[burst] expected whole lines before the loss, line %d is %q", i, l)
		}
	}
	if n := len(got); n < 2 || len(got[n-2]) >= len(want[0]) || got[n-1] != "next" {
		t.Errorf("[burst] expected the cut line then the next one, got %q", got[max(0, n-2):])
	}
}

// TestLogsTailBounded reproduces `herd logs flood-0 --tail 1` on an agent
// that printed one huge line: the daemon reads and sends at most
// execrt.MaxTailBytes, the end of that line.
func TestLogsTailBounded(t *testing.T) {
	e := newWDEnv(t)
	out, _ := e.d.exec.Paths(wdSession, "inc-1")
	if err := os.MkdirAll(filepath.Dir(out), 0o700); err != nil {
		t.Fatal(err)
	}
	appendFile(t, out, append(bytes.Repeat([]byte{'x'}, 24<<20), "the error\n"...))
	h := e.d.routes()
	rec := httptest.NewRecorder()
	alloc := heapAllocated(func() {
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/sessions/"+wdSession+"/logs?tail=1", nil))
	})
	body := rec.Body.String()
	if rec.Code != http.StatusOK || len(body) != execrt.MaxTailBytes || !strings.HasSuffix(body, "the error\n") {
		t.Errorf("expected 200 and the last %d bytes, got %d and %d bytes", execrt.MaxTailBytes, rec.Code, len(body))
	}
	// Process-wide, with the daemon's loops running: a wide margin that
	// still tells a bounded read from the 24 MiB a whole read costs.
	if alloc > 10*execrt.MaxTailBytes {
		t.Errorf("expected at most %d bytes allocated, got %d", 10*execrt.MaxTailBytes, alloc)
	}
}
