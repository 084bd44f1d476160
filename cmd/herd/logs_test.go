package main

import (
	"strings"
	"testing"
)

func TestNewOutput(t *testing.T) {
	ticks := func(n int) string { return "start\n" + strings.Repeat("tick\n", n) }
	numbered := func(from, to int) string {
		var b strings.Builder
		for i := from; i <= to; i++ {
			b.WriteString("line-" + string(rune('a'+i%26)) + strings.Repeat("x", i) + "\n")
		}
		return b.String()
	}
	for _, tc := range []struct {
		name, prev, cur, want string
	}{
		{"first read: everything", "", "a\nb\n", "a\nb\n"},
		{"grown", "a\nb\n", "a\nb\nc\n", "c\n"},
		{"nothing new", "a\nb\n", "a\nb\n", ""},
		{"repeated lines are all new", ticks(3), ticks(7), "tick\ntick\ntick\ntick\n"},
		{"history cut at its start", numbered(0, 30), numbered(10, 33), numbered(31, 33)},
		{"new incarnation: everything", "old-1\nold-2\n", "new-1\n", "new-1\n"},
		{"a line's end is not a line", "1\n2\n3\n4\n5\n6\n7\n8\n9\n", "x2\n3\n4\n5\n6\n7\n8\n9\nc\n", "x2\n3\n4\n5\n6\n7\n8\n9\nc\n"},
	} {
		if got := string(newOutput([]byte(tc.prev), []byte(tc.cur))); got != tc.want {
			t.Errorf("[%s] expected %q, got %q", tc.name, tc.want, got)
		}
	}
}
