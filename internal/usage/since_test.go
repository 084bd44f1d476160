package usage

import (
	"testing"
	"time"
)

func TestParseSince(t *testing.T) {
	for _, c := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"90m", 90 * time.Minute, true},
		{"24h", 24 * time.Hour, true},
		{"7d", 7 * 24 * time.Hour, true},
		{"0d", 0, false},
		{"-1h", 0, false},
		{"soon", 0, false},
		{"xd", 0, false},
		{"", 0, false},
	} {
		got, err := ParseSince(c.in)
		if (err == nil) != c.ok || (c.ok && got != c.want) {
			t.Errorf("[%q] expected %s ok=%v, got %s %v", c.in, c.want, c.ok, got, err)
		}
	}
}
