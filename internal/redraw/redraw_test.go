package redraw

import (
	"bytes"
	"os"
	"testing"
)

func TestFrame(t *testing.T) {
	for _, tc := range []struct {
		name   string
		text   string
		height int
		first  bool
		want   string
	}{
		{"first clears", "a\nb\n", 24, true, "\033[H\033[2Ja\033[K\nb\033[K\n\033[J"},
		{"next overwrites", "a\nb\n", 24, false, "\033[Ha\033[K\nb\033[K\n\033[J"},
		{"height unknown", "a\nb\nc\n", 0, false, "\033[Ha\033[K\nb\033[K\nc\033[K\n\033[J"},
		{"fits exactly", "a\nb\nc\n", 4, false, "\033[Ha\033[K\nb\033[K\nc\033[K\n\033[J"},
		{"cut to the screen", "a\nb\nc\nd\ne\n", 4, false, "\033[Ha\033[K\nb\033[K\n... 3 more lines (a taller window shows them)\033[K\n\033[J"},
		{"no final newline", "a", 24, false, "\033[Ha\033[K\n\033[J"},
	} {
		if got := Frame(tc.text, tc.height, tc.first); got != tc.want {
			t.Errorf("[%s] expected %q, got %q", tc.name, tc.want, got)
		}
	}
}

func TestOf(t *testing.T) {
	if Of(&bytes.Buffer{}) != nil {
		t.Errorf("[buffer] expected no terminal")
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if Of(w) != nil {
		t.Errorf("[pipe] expected no terminal")
	}
}
