package execrt

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"testing"
	"time"
)

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

// TestTailer checks the output tailer: partial lines wait for their end,
// a capped (rotated) file loses no line, and an adopted file is read from
// its last window only, at a line start.
func TestTailer(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out")
	write := func(s string) {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		f.WriteString(s)
		f.Close()
	}
	var got []string
	collect := func(b []byte, _ time.Time) { got = append(got, string(b)) }
	tl := &Tailer{Path: path}
	now := time.Now()
	if err := tl.Poll(now, collect); err != nil || len(got) != 0 {
		t.Fatalf("[missing file] expected nothing, got %v, %v", got, err)
	}
	write("one\ntw")
	tl.Poll(now, collect)
	write("o\nthree\n")
	tl.Poll(now, collect)
	write("four\nfive\n")
	if err := tl.CapFile(5, now, collect); err != nil {
		t.Fatal(err)
	}
	write("six\n")
	tl.Poll(now, collect)
	want := []string{"one", "two", "three", "four", "five", "six"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("[rotation] expected %v, got %v", want, got)
	}

	big := filepath.Join(dir, "big")
	var buf bytes.Buffer
	for i := 0; buf.Len() < 3*adoptWindow; i++ {
		fmt.Fprintf(&buf, "line %d\n", i)
	}
	if err := os.WriteFile(big, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	got = nil
	(&Tailer{Path: big}).Poll(now, collect)
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(got) == 0 || len(got) > adoptWindow/6 || got[len(got)-1] != lines[len(lines)-1] {
		t.Fatalf("[adopt] expected the last window's lines, got %d ending %q", len(got), got[len(got)-1])
	}
	if !strings.HasPrefix(got[0], "line ") || !strings.Contains(buf.String(), "\n"+got[0]+"\n") {
		t.Errorf("[adopt] expected whole lines, first is %q", got[0])
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
	tl := &Tailer{Path: path}
	now := time.Now()
	tl.Poll(now, collect) // started on an empty file: follows from 0

	const flood = 32 << 20
	appendFile(t, path, append(bytes.Repeat([]byte{'x'}, flood-1), '\n'))
	capBytes := int64(maxPollRead)
	alloc := heapAllocated(func() {
		if err := tl.Poll(now, collect); err != nil {
			t.Fatal(err)
		}
		if err := tl.CapFile(capBytes, now, collect); err != nil {
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
	if want := int64(flood - 3*maxPollRead); tl.Lost != want {
		t.Errorf("[flood] expected %d bytes counted lost, got %d", want, tl.Lost)
	}
	if lines == 0 {
		t.Error("[flood] expected the cut line to count")
	}
	appendFile(t, path, []byte("next\n"))
	lines = 0
	tl.Poll(now, collect)
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
	tl := &Tailer{Path: path}
	now := time.Now()
	tl.Poll(now, collect)

	var buf bytes.Buffer
	var want []string
	for i := 0; buf.Len()+len("line 0000000\n") <= 3*maxPollRead; i++ {
		want = append(want, fmt.Sprintf("line %07d", i))
		buf.WriteString(want[i] + "\n")
	}
	appendFile(t, path, buf.Bytes())
	tl.Poll(now, collect)
	if err := tl.CapFile(2*maxPollRead, now, collect); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) || got[0] != want[0] || got[len(got)-1] != want[len(want)-1] || tl.Lost != 0 {
		t.Errorf("expected %d lines, none lost, got %d (lost %d bytes)", len(want), len(got), tl.Lost)
	}

	// A burst beyond a poll's read from the rotated copy: the rest is lost
	// (counted), the line cut by the loss still counts, and the tailer
	// goes on at the next line, which starts the capped file.
	got = nil
	appendFile(t, path, bytes.Repeat(buf.Bytes(), 2))
	tl.Poll(now, collect)
	if err := tl.CapFile(4*maxPollRead, now, collect); err != nil {
		t.Fatal(err)
	}
	appendFile(t, path, []byte("next\n"))
	tl.Poll(now, collect)
	if want := int64(2*buf.Len() - 3*maxPollRead); tl.Lost != want {
		t.Errorf("[burst] expected %d bytes lost, got %d", want, tl.Lost)
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

// heapAllocated returns the bytes fn allocated on the heap.
func heapAllocated(fn func()) uint64 {
	var before, after goruntime.MemStats
	goruntime.ReadMemStats(&before)
	fn()
	goruntime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestTailerFollowsRenameRotation: regression — the capture process
// rotates a full file by renaming it to .1 and starting a new one; the
// tailer read the new file from the old offset's "truncation" and lost the
// lines written just before the rotation.
func TestTailerFollowsRenameRotation(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out")
	var got []string
	collect := func(b []byte, _ time.Time) { got = append(got, string(b)) }
	tl := &Tailer{Path: path}
	now := time.Now()
	appendFile(t, path, []byte("one\ntwo\n"))
	tl.Poll(now, collect)
	appendFile(t, path, []byte("three\nfo"))
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	appendFile(t, path+".1", []byte("ur\n"))
	appendFile(t, path, []byte("five\n"))
	if err := tl.Poll(now, collect); err != nil {
		t.Fatal(err)
	}
	appendFile(t, path, []byte("six\n"))
	tl.Poll(now, collect)
	want := []string{"one", "two", "three", "four", "five", "six"}
	if fmt.Sprint(got) != fmt.Sprint(want) || tl.Lost != 0 {
		t.Errorf("expected %v and nothing lost … got %v, lost %d", want, got, tl.Lost)
	}

	// Rotated twice between polls: the middle file is gone; what follows
	// is read from a line start.
	got = nil
	appendFile(t, path, []byte("seven\n"))
	os.Rename(path, path+".1")
	appendFile(t, path, []byte("eight\n"))
	os.Rename(path, path+".1")
	appendFile(t, path, []byte("nine\n"))
	tl.Poll(now, collect)
	if fmt.Sprint(got) != fmt.Sprint([]string{"nine"}) {
		t.Errorf("[twice] expected only the newest file's line … got %v", got)
	}
}

// TestTailerQuietFile: polls of a file that did not change read nothing;
// a file of the same size put in its place (a rotation) is still read
// from its start, and bytes appended after quiet polls are read.
func TestTailerQuietFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out")
	tl := &Tailer{Path: path}
	var got []string
	collect := func(b []byte, _ time.Time) { got = append(got, string(b)) }
	now := time.Now()
	// Not written yet: nothing read, nothing capped.
	if err := tl.Poll(now.Add(-time.Second), collect); err != nil {
		t.Fatal(err)
	}
	if err := tl.CapFile(1, now.Add(-time.Second), collect); err != nil || len(got) != 0 {
		t.Fatalf("[absent] expected nothing, got %q (%v)", got, err)
	}
	appendFile(t, path, []byte("one\n"))
	for i := range 3 {
		if err := tl.Poll(now.Add(time.Duration(i)*time.Second), collect); err != nil {
			t.Fatal(err)
		}
	}
	if strings.Join(got, ",") != "one" {
		t.Fatalf("[quiet] expected one line once, got %q", got)
	}
	// Same size, another file: the capture process rotated it.
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	appendFile(t, path, []byte("two\n"))
	if err := tl.Poll(now.Add(3*time.Second), collect); err != nil {
		t.Fatal(err)
	}
	appendFile(t, path, []byte("three\n"))
	if err := tl.Poll(now.Add(4*time.Second), collect); err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, ",") != "one,two,three" {
		t.Errorf("[rotated, appended] expected one,two,three, got %q", got)
	}
	if err := tl.CapFile(1, now.Add(4*time.Second), collect); err != nil {
		t.Fatal(err)
	}
	if info, err := os.Stat(path); err != nil || info.Size() != 0 {
		t.Errorf("[cap after a poll] expected the file capped to empty, got %v (%v)", info, err)
	}
}
