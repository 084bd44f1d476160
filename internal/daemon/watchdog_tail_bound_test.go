package daemon

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"herd/internal/runtime/execrt"
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
	h := e.d.server.Handler()
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
