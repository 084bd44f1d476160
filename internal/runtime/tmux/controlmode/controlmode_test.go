package controlmode

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestBlocksToCalls: the blocks of a stream go to the oldest pending
// call until its end word: several commands' blocks, an %error, an
// if-shell's extra block; blocks of the attach command (flags 0) and
// blocks with no call pending belong to none.
func TestBlocksToCalls(t *testing.T) {
	type block struct {
		head   string
		lines  []string
		failed bool
	}
	tests := []struct {
		name   string
		calls  int
		blocks []block
		want   []string // per call: output, then "|" and the %error lines
		done   int
	}{
		{"one listing", 1, []block{{"1 10 1", []string{"a\t%1", "b\t%2"}, false}, {"1 11 1", []string{"end-1"}, false}},
			[]string{"a\t%1\nb\t%2\n|"}, 1},
		{"attach block ignored", 1, []block{{"1 9 0", []string{"x"}, false}, {"1 10 1", []string{"123"}, false}, {"1 11 1", []string{"end-1"}, false}},
			[]string{"123\n|"}, 1},
		{"error then the line's end", 2, []block{
			{"1 10 1", []string{"can't find session: x"}, true}, {"1 11 1", []string{"end-1"}, false},
			{"1 12 1", nil, false}, {"1 13 1", []string{"end-2"}, false}},
			[]string{"|can't find session: x", "|"}, 2},
		{"two commands and an if-shell's", 1, []block{{"1 10 1", []string{"42"}, false}, {"1 11 1", nil, false}, {"1 12 1", nil, false}, {"1 13 1", []string{"end-1"}, false}},
			[]string{"42\n|"}, 1},
		{"still pending", 2, []block{{"1 10 1", nil, false}, {"1 11 1", []string{"end-1"}, false}, {"1 12 1", []string{"partial"}, false}},
			[]string{"|", ""}, 1},
		{"an end word of another call is output", 1, []block{{"1 10 1", []string{"end-2"}, false}, {"1 11 1", []string{"end-1"}, false}},
			[]string{"end-2\n|"}, 1},
	}
	for _, tt := range tests {
		cn := &Conn{}
		var reqs []*request
		for i := range tt.calls {
			r := &request{end: fmt.Sprintf("end-%d", i+1), done: make(chan struct{})}
			reqs = append(reqs, r)
			cn.pending = append(cn.pending, r)
		}
		for _, b := range tt.blocks {
			cn.block(b.head, b.lines, b.failed)
		}
		done := 0
		for i, r := range reqs {
			select {
			case <-r.done:
				done++
				got := string(r.out) + "|" + strings.Join(r.stderr, "\n")
				if got != tt.want[i] {
					t.Errorf("[%s] call %d: expected %q … got %q", tt.name, i, tt.want[i], got)
				}
				if (len(r.stderr) > 0) != errors.Is(r.err, ErrControl) {
					t.Errorf("[%s] call %d: expected an error with the %%error lines … got %v", tt.name, i, r.err)
				}
			default:
			}
		}
		if done != tt.done || len(cn.pending) != tt.calls-tt.done {
			t.Errorf("[%s] expected %d calls answered … got %d (%d pending)", tt.name, tt.done, done, len(cn.pending))
		}
	}
	// No call pending: a block is nobody's, and no call later gets it.
	cn := &Conn{}
	cn.block("1 1 1", []string{"x"}, false)
	r := &request{end: "end-1", done: make(chan struct{})}
	cn.pending = append(cn.pending, r)
	cn.block("1 2 1", []string{"end-1"}, false)
	if len(r.out) != 0 || r.err != nil {
		t.Errorf("expected an empty answer … got %q, %v", r.out, r.err)
	}
}

// TestBlocksOutOfOrder: the end word of a later call while an earlier one
// is pending means the answers crossed: the connection is reported
// broken and the pending call gets nothing of it.
func TestBlocksOutOfOrder(t *testing.T) {
	cn := &Conn{token: "tok"}
	r := &request{end: "tok-1", done: make(chan struct{})}
	cn.pending = append(cn.pending, r)
	if err := cn.block("1 10 1", []string{"keep\t%1"}, false); err != nil {
		t.Fatalf("expected output taken … got %v", err)
	}
	err := cn.block("1 11 1", []string{"tok-2"}, false)
	if !errors.Is(err, ErrClosed) {
		t.Errorf("expected the connection broken … got %v", err)
	}
	select {
	case <-r.done:
		t.Error("expected the call not answered")
	default:
	}
}
