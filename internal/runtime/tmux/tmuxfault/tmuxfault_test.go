package tmuxfault

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// stream is a control client's output: the attach command's block, a
// notification, a listing call and a launch call, each ended by its word.
const stream = `%begin 1 263 0
%end 1 263 0
%session-changed $1 _herd
%begin 1 269 1
_herd	%0	1
keep	%1	2
%end 1 269 1
%begin 1 270 1
herd-ctl-x-1
%end 1 270 1
%begin 1 271 1
4242
%end 1 271 1
%begin 1 272 1
herd-ctl-x-2
%end 1 272 1
`

// TestRead: the stream splits into units (lines outside calls alone, each
// call's answer up to its end word), and the listing faults change the
// answer blocks only, each logged.
func TestRead(t *testing.T) {
	tests := []struct {
		mode  string
		want  []string // the units, lines joined by "|"
		fault string
	}{
		{"", []string{
			"%begin 1 263 0|%end 1 263 0", "%session-changed $1 _herd",
			"%begin 1 269 1|_herd\t%0\t1|keep\t%1\t2|%end 1 269 1|%begin 1 270 1|herd-ctl-x-1|%end 1 270 1",
			"%begin 1 271 1|4242|%end 1 271 1|%begin 1 272 1|herd-ctl-x-2|%end 1 272 1"}, ""},
		{Garble, []string{
			"%begin 1 263 0|%end 1 263 0", "%session-changed $1 _herd",
			"%begin 1 269 1|" + noiseRow + "|_herd\t%0\t1|" + noiseRow + "|keep\t%1\t2|%end 1 269 1|%begin 1 270 1|herd-ctl-x-1|%end 1 270 1",
			"%begin 1 271 1|4242|%end 1 271 1|%begin 1 272 1|herd-ctl-x-2|%end 1 272 1"}, Garble},
		{Truncate, []string{
			"%begin 1 263 0|%end 1 263 0", "%session-changed $1 _herd",
			"%begin 1 269 1|_herd\t%0\t|keep\t%1\t2|%end 1 269 1|%begin 1 270 1|herd-ctl-x-1|%end 1 270 1",
			"%begin 1 271 1|4242|%end 1 271 1|%begin 1 272 1|herd-ctl-x-2|%end 1 272 1"}, Truncate},
		{Empty, []string{
			"%begin 1 263 0|%end 1 263 0", "%session-changed $1 _herd",
			"%begin 1 269 1|%end 1 269 1|%begin 1 270 1|herd-ctl-x-1|%end 1 270 1",
			"%begin 1 271 1|4242|%end 1 271 1|%begin 1 272 1|herd-ctl-x-2|%end 1 272 1"}, Empty},
		{Lie + " 7", []string{
			"%begin 1 263 0|%end 1 263 0", "%session-changed $1 _herd",
			"%begin 1 269 1|_herd\t%0\t1|keep\t%1\t2|%end 1 269 1|%begin 1 270 1|herd-ctl-x-1|%end 1 270 1",
			"%begin 1 271 1|7|%end 1 271 1|%begin 1 272 1|herd-ctl-x-2|%end 1 272 1"}, Lie},
	}
	for _, tt := range tests {
		dir := t.TempDir()
		p := &proxy{mode: filepath.Join(dir, "mode"), log: filepath.Join(dir, "log")}
		if tt.mode != "" {
			if err := os.WriteFile(p.mode, []byte(tt.mode), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		units := make(chan unit, 16)
		p.read(strings.NewReader(stream), units)
		var got []string
		for u := range units {
			got = append(got, strings.Join(u.lines, "|"))
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("[%q] expected units\n%q\n… got\n%q", tt.mode, tt.want, got)
		}
		n := Injected(p.log)
		if (tt.fault == "") != (len(n) == 0) || (tt.fault != "" && n[tt.fault] == 0) {
			t.Errorf("[%q] expected %q logged … got %v", tt.mode, tt.fault, n)
		}
	}
}
