package bench

import (
	"strings"
	"testing"
	"time"
)

// TestSoakViolations: the soak's bounds catch a leak of memory, of fds and
// of store rows, pass a steady daemon, and refuse a run too short to say.
func TestSoakViolations(t *testing.T) {
	// 800 events a minute, retention keeping the last 2 minutes'.
	steady := func(i int) soakSample {
		at := time.Duration(i) * 30 * time.Second
		return soakSample{at: at, rssKB: 30 << 10, fds: 20, dbBytes: 5 << 20, events: int64(i) * 400, rows: min(i*400, 1700)}
	}
	tests := []struct {
		name   string
		n      int
		change func(i int, s *soakSample)
		want   string // a word of the one violation; "" for none
	}{
		{"steady", 20, nil, ""},
		{"rss leak", 20, func(i int, s *soakSample) { s.rssKB += int64(i) * 1 << 10 }, "RSS grows"},
		{"rss high", 20, func(i int, s *soakSample) { s.rssKB = 200 << 10 }, "RSS 200 MB"},
		{"fd leak", 20, func(i int, s *soakSample) { s.fds += i * 2 }, "open fds"},
		{"store leak", 20, func(i int, s *soakSample) { s.dbBytes += int64(i) << 20 }, "store grew"},
		{"no retention", 20, func(i int, s *soakSample) { s.rows = i * 400 }, "events kept"},
		{"too short for the store", 6, nil, "before the 2m0s retention"},
		{"too few", 3, nil, "too few"},
	}
	for _, tt := range tests {
		var samples []soakSample
		for i := range tt.n {
			s := steady(i)
			if tt.change != nil {
				tt.change(i, &s)
			}
			samples = append(samples, s)
		}
		got := soakViolations(samples, soakRetention)
		switch {
		case tt.want == "" && len(got) != 0:
			t.Errorf("[%s] expected no violation … got %q", tt.name, got)
		case tt.want != "" && (len(got) != 1 || !strings.Contains(got[0], tt.want)):
			t.Errorf("[%s] expected one violation with %q … got %q", tt.name, tt.want, got)
		}
	}
}
