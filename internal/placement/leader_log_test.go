package placement

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// TestElectionFailuresLoggedOnce: an election that keeps failing (the
// store away; tried at every kick) is logged at its first failure, then
// once a minute, and its end once.
func TestElectionFailuresLoggedOnce(t *testing.T) {
	var buf bytes.Buffer
	l := NewLeader(Options{Log: slog.New(slog.NewTextHandler(&buf, nil))})
	t0 := time.Unix(1_000_000, 0)
	for i := range 600 { // 5 a second for two minutes
		l.electFailed(errors.New("store unreachable"), t0.Add(time.Duration(i)*200*time.Millisecond))
	}
	l.electAnswered(t0.Add(2 * time.Minute))
	l.electAnswered(t0.Add(3 * time.Minute))
	out := buf.String()
	if n := strings.Count(out, `msg="placement election"`); n != 2 {
		t.Errorf("expected the failing election logged twice in two minutes, got %d:\n%s", n, out)
	}
	if n := strings.Count(out, "answers again"); n != 1 {
		t.Errorf("expected its end logged once, got %d:\n%s", n, out)
	}
}
