package execrt

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// writeFlood writes one line of size bytes ending in tail, as an agent
// printing a huge line does.
func writeFlood(t *testing.T, path string, size int, tail string) {
	t.Helper()
	b := bytes.Repeat([]byte{'x'}, size-len(tail))
	if err := os.WriteFile(path, append(b, tail...), 0o600); err != nil {
		t.Fatal(err)
	}
}

// allocated returns the bytes fn allocated on the heap.
func allocated(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestCapKeepsLastBytes checks the rotated copy holds at most the cap, and
// that it is the end of the file (where an agent's error is).
func TestCapKeepsLastBytes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.stdout")
	const capBytes = 64 << 10
	writeFlood(t, path, 3*capBytes, "the error\n")
	from, err := Cap(path, capBytes)
	if err != nil {
		t.Fatal(err)
	}
	if from != 2*capBytes {
		t.Errorf("expected the rotated copy to start at offset %d, got %d", 2*capBytes, from)
	}
	rotated, err := os.ReadFile(path + ".1")
	if err != nil {
		t.Fatal(err)
	}
	if len(rotated) != capBytes || !strings.HasSuffix(string(rotated), "the error\n") {
		t.Errorf("expected the last %d bytes in the rotated copy, got %d ending %q", capBytes, len(rotated), rotated[max(0, len(rotated)-10):])
	}
	if info, _ := os.Stat(path); info.Size() != 0 {
		t.Errorf("expected the file truncated, size %d", info.Size())
	}
	if from, err := Cap(path, capBytes); err != nil || from != 0 {
		t.Errorf("[under the cap] expected nothing done, got %d %v", from, err)
	}
}

// TestReadTailBounded checks ReadTail reads from the end and at most its
// byte bound, whatever the number of lines asked for: one flooding line
// must not be read (nor sent) whole.
func TestReadTailBounded(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "flood.stdout")
	writeFlood(t, path+".1", 8<<20, "rotated\n")
	writeFlood(t, path, MaxReadAllBytes+(4<<20), "the error\n")

	var got []byte
	alloc := allocated(func() {
		var err error
		if got, err = ReadTail(path, 1); err != nil {
			t.Fatal(err)
		}
	})
	if len(got) != MaxTailBytes || !strings.HasSuffix(string(got), "the error\n") {
		t.Errorf("[tail 1] expected the last %d bytes of the flood line, got %d ending %q", MaxTailBytes, len(got), got[max(0, len(got)-10):])
	}
	// Process-wide: a margin that still tells a bounded read from the
	// 36 MiB a whole read costs.
	if alloc > 6*MaxTailBytes {
		t.Errorf("[tail 1] expected at most %d bytes allocated, got %d", 6*MaxTailBytes, alloc)
	}
	all, err := ReadTail(path, 0)
	if err != nil || len(all) != MaxReadAllBytes || !strings.HasSuffix(string(all), "the error\n") {
		t.Errorf("[all] expected the last %d bytes, got %d %v", MaxReadAllBytes, len(all), err)
	}

	// Many short lines: whole lines only, as many as the bound holds.
	lines := filepath.Join(dir, "lines.stdout")
	var buf bytes.Buffer
	for i := 0; buf.Len() < 3*MaxTailBytes; i++ {
		fmt.Fprintf(&buf, "line %07d\n", i)
	}
	if err := os.WriteFile(lines, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	last := buf.String()[strings.LastIndex(strings.TrimSuffix(buf.String(), "\n"), "\n")+1:]
	for _, n := range []int{3, 1 << 20} {
		got, err := ReadTail(lines, n)
		if err != nil {
			t.Fatal(err)
		}
		count := strings.Count(string(got), "\n")
		want := min(n, MaxTailBytes/len(last))
		if len(got) > MaxTailBytes || count != want || !strings.HasSuffix(string(got), last) {
			t.Errorf("[tail %d] expected %d whole lines ending %q, got %d lines, %d bytes", n, want, last, count, len(got))
		}
		if first, _, _ := strings.Cut(string(got), "\n"); !strings.HasPrefix(first, "line ") || len(first) != len(last)-1 {
			t.Errorf("[tail %d] expected a whole first line, got %q", n, first)
		}
	}
}

// TestReadTailWindowAtLineStart: regression — when the byte bound fell
// exactly on a line start, that whole line was dropped as if cut.
func TestReadTailWindowAtLineStart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lines.stdout")
	var buf bytes.Buffer
	for i := range 70000 {
		fmt.Fprintf(&buf, "line %010d\n", i) // 16 bytes: the bound holds whole lines exactly
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := ReadTail(path, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	if n, want := strings.Count(string(got), "\n"), MaxTailBytes/16; n != want {
		t.Errorf("expected %d lines (the bound holds them whole), got %d", want, n)
	}
	// The same boundary between the rotated copy and the current file.
	cur := buf.Bytes()[buf.Len()-16*100:]
	rot := buf.Bytes()[:buf.Len()-16*100]
	if err := os.WriteFile(path+".1", rot, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, cur, 0o600); err != nil {
		t.Fatal(err)
	}
	if got, _ := ReadTail(path, 1<<30); strings.Count(string(got), "\n") != MaxTailBytes/16 {
		t.Errorf("[rotated] expected %d lines, got %d", MaxTailBytes/16, strings.Count(string(got), "\n"))
	}
}
