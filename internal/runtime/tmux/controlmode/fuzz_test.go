package controlmode

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// FuzzControlStream: any output a control client (or something in its
// place) prints is read without a panic; the calls it answers are
// answered in the order they were written, each only by its own end word;
// what a call gets is lines the stream printed inside blocks of calls
// (flags 1); a broken stream is an ErrClosed; the client is taken as
// attached only when it said so for its session.
func FuzzControlStream(f *testing.F) {
	for _, s := range []string{
		"%begin 1 10 1\na\t%1\n%end 1 10 1\n%begin 1 11 1\ntok-1\n%end 1 11 1\n",
		"%session-changed $1 w-0\n%begin 1 9 0\nx\n%end 1 9 0\n",
		"%begin 1 10 1\ncan't find session: x\n%error 1 10 1\n%begin 1 11 1\ntok-1\n%end 1 11 1\n%begin 1 12 1\n%end 1 12 1\n%begin 1 13 1\ntok-2\n%end 1 13 1\n",
		"%begin 1 10 1\ntok-2\n%end 1 10 1\n",
		"%output %1 hello\\015\\012\n%begin 1 10 1\n%begin 1 11 1\n%end 1 10 1\n",
		"%begin 1 10 1\n42\n%end 1 10 2\n%end 1 10 1\n%exit\n",
		"%begin \n%end \n%begin  1\ntok-1\n%end  1\n",
	} {
		f.Add(s, uint8(2))
	}
	f.Fuzz(func(t *testing.T, stream string, calls uint8) {
		n := int(calls%4) + 1
		cn := &Conn{token: "tok", session: "w-0", attached: make(chan struct{})}
		var reqs []*request
		for i := range n {
			r := &request{end: fmt.Sprintf("tok-%d", i+1), done: make(chan struct{})}
			reqs = append(reqs, r)
			cn.pending = append(cn.pending, r)
		}
		err := cn.scan(strings.NewReader(stream))
		if err != nil && !errors.Is(err, ErrClosed) {
			t.Fatalf("a broken stream's error is not ErrClosed: %v", err)
		}
		lines := strings.Split(stream, "\n")
		answered := 0
		for i, r := range reqs {
			done := isClosed(r.done)
			if done {
				answered++
				if answered != i+1 {
					t.Fatalf("call %d answered before an earlier one: %q", i+1, stream)
				}
				if !slices.Contains(lines, r.end) {
					t.Fatalf("call %d answered without its end word %q in the stream: %q", i+1, r.end, stream)
				}
				if errors.Is(r.err, ErrControl) != r.failed || (r.err != nil && !errors.Is(r.err, ErrControl)) {
					t.Fatalf("call %d: error %v for failed=%v", i+1, r.err, r.failed)
				}
			}
			for _, l := range strings.Split(strings.TrimSuffix(string(r.out), "\n"), "\n") {
				if len(r.out) > 0 && !slices.Contains(lines, l) {
					t.Fatalf("call %d given a line the stream never printed: %q from %q", i+1, l, stream)
				}
			}
			for _, l := range r.stderr {
				if !slices.Contains(lines, l) {
					t.Fatalf("call %d given an error line the stream never printed: %q from %q", i+1, l, stream)
				}
			}
			if len(r.out) > len(stream) {
				t.Fatalf("call %d given %d bytes out of a stream of %d", i+1, len(r.out), len(stream))
			}
		}
		if len(cn.pending) != n-answered {
			t.Fatalf("%d calls answered, %d still pending of %d", answered, len(cn.pending), n)
		}
		if isClosed(cn.attached) && !slices.ContainsFunc(lines, func(l string) bool {
			return strings.HasPrefix(l, "%session-changed ") && strings.HasSuffix(l, " w-0")
		}) {
			t.Fatalf("attached without the session's notification: %q", stream)
		}
	})
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
