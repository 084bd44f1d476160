package execrt

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// TestFollowerAcrossRotations: a reader polling at least once per rotation
// reads every byte written, in order, with no gap; one that falls two
// rotations behind is told of the gap; a truncation (Cap) restarts at the
// file's start.
func TestFollowerAcrossRotations(t *testing.T) {
	const capBytes = 1000
	tests := []struct {
		name       string
		writes     int // lines written between polls
		wantGap    bool
		wantWhole  bool // every byte read, in order
		pollMax    int64
		totalLines int
	}{
		{"poll after every line", 1, false, true, 1 << 20, 400},
		{"poll every 20 lines (under one rotation)", 20, false, true, 1 << 20, 400},
		{"poll every 60 lines (past one rotation)", 60, false, true, 1 << 20, 400},
		{"poll every 150 lines (two rotations behind)", 150, true, false, 1 << 20, 450},
		{"small polls fall behind a rotation", 40, true, false, 100, 400},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "x.stdout")
			w := &RotatingFile{Path: path, MaxBytes: capBytes}
			defer w.Close()
			fo := &Follower{Path: path, Window: 1 << 20}
			defer fo.Close()
			var written, read bytes.Buffer
			gap := false
			for i := 0; i < tt.totalLines; i++ {
				line := fmt.Sprintf("line %05d\n", i) // 11 bytes: rotations fall inside lines
				if _, err := w.Write([]byte(line)); err != nil {
					t.Fatal(err)
				}
				written.WriteString(line)
				if (i+1)%tt.writes == 0 {
					b, g, err := fo.Poll(tt.pollMax)
					if err != nil {
						t.Fatal(err)
					}
					read.Write(b)
					gap = gap || g
				}
			}
			for {
				b, g, err := fo.Poll(tt.pollMax)
				if err != nil {
					t.Fatal(err)
				}
				gap = gap || g
				if len(b) == 0 {
					break
				}
				read.Write(b)
			}
			if gap != tt.wantGap {
				t.Errorf("[%s] expected gap %v … got %v", tt.name, tt.wantGap, gap)
			}
			if whole := bytes.Equal(read.Bytes(), written.Bytes()); whole != tt.wantWhole {
				t.Errorf("[%s] expected everything read in order: %v … got %v (%d of %d bytes)", tt.name, tt.wantWhole, whole, read.Len(), written.Len())
			}
			if !bytes.HasSuffix(read.Bytes(), []byte(fmt.Sprintf("line %05d\n", tt.totalLines-1))) {
				t.Errorf("[%s] expected the last line read … got %q", tt.name, read.Bytes()[max(0, read.Len()-22):])
			}
		})
	}
}

func TestFollowerStartsInWindow(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.stdout")
	fo := &Follower{Path: path, Window: 10}
	if b, gap, err := fo.Poll(100); b != nil || gap || err != nil {
		t.Errorf("[missing file] expected nothing … got %q %v %v", b, gap, err)
	}
	if err := os.WriteFile(path, []byte("old output\nrecent\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	b, gap, err := fo.Poll(100)
	if err != nil || !gap || string(b) != "ut\nrecent\n" {
		t.Errorf("[window] expected the last 10 bytes with a gap … got %q %v %v", b, gap, err)
	}
	// Cap truncates under the reader: it starts again at the beginning.
	if err := os.WriteFile(path, []byte("new\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, _, err := fo.Poll(100); err != nil || string(b) != "new\n" {
		t.Errorf("[truncated] expected the new content … got %q %v", b, err)
	}
	fo.Close()
}
