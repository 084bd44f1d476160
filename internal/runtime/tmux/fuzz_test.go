package tmux

import (
	"strings"
	"testing"
)

// FuzzParsePanes: any listing a tmux server (or something in its place)
// prints is parsed without a panic; a row is never given a session it
// did not name, and a good row keeps its pid.
func FuzzParsePanes(f *testing.F) {
	for _, s := range []string{
		"w-0\t%1\t123\t0\t\t\t0\t1700000000\t1700000000\t99\n",
		"w-0\t%1\tabc\t0\t\t\t0\t\t\t\n", "\t\t\t\n", "garbage", "w-0\t%1\t123\t1\t137\t9\t2\t1\t1\t99\nx\n", "\xff\t%2\t1\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, out string) {
		for _, p := range ParsePanes([]byte(out)) {
			if p.Session != "" && !strings.Contains(out, p.Session) {
				t.Fatalf("a row named %q, which the listing never printed: %q", p.Session, out)
			}
			if p.Err == nil && p.PID <= 0 {
				t.Fatalf("a row read as good without a pid: %+v from %q", p, out)
			}
		}
	})
}
