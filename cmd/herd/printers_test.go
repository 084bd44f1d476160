package main

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"herd"
	"herd/internal/api"
	"herd/internal/selector"
)

func sessionsFixture() []api.SessionView {
	started := time.Now().Add(-90 * time.Second)
	return []api.SessionView{
		{Name: "worker-0", Role: "worker", State: herd.StateRunning, RuntimeKind: herd.RuntimeTmux, Runtime: herd.Alive, Process: herd.Alive, Activity: herd.ActivityWorking, StartedAt: &started, Host: "h1", PID: 42, Usage: api.Usage{InputTokens: 42, OutputTokens: 7, CostUSD: 0.000385}},
		{Name: "worker-1", Role: "worker", State: herd.StateStalled, RuntimeKind: herd.RuntimeTmux, Runtime: herd.Alive, Process: herd.Alive, Activity: herd.ActivityUnknown, Escalated: true, Archived: true, Host: "h1"},
		{Name: "batch-0", Role: "batch", State: herd.StateFailed, RuntimeKind: herd.RuntimeExec, Runtime: herd.Dead, Process: herd.Dead, Activity: herd.ActivityIdle, Host: "h2"},
	}
}

func TestFilterSessions(t *testing.T) {
	views := sessionsFixture()
	for _, tc := range []struct {
		names       []string
		sel         string
		want        string
		wantMissing string
	}{
		{nil, "", "worker-0 worker-1 batch-0", ""},
		{[]string{"batch-0"}, "", "batch-0", ""},
		{[]string{"batch-0", "nosuch-0", "nosuch-0"}, "", "batch-0", "nosuch-0"},
		{nil, "role=worker", "worker-0 worker-1", ""},
		{nil, "role=worker,state!=running", "worker-1", ""},
		{nil, "runtime=exec", "batch-0", ""},
		{nil, "host=h1,activity=working", "worker-0", ""},
		{[]string{"batch-0"}, "role=worker", "", ""},
	} {
		sel, err := selector.Parse(tc.sel, sessionLabelKeys)
		if err != nil {
			t.Fatal(err)
		}
		kept, missing := filterSessions(views, tc.names, sel)
		if got := strings.Join(sessionNames(kept), " "); got != tc.want {
			t.Errorf("[%v %q] expected %q, got %q", tc.names, tc.sel, tc.want, got)
		}
		if got := strings.Join(missing, " "); got != tc.wantMissing {
			t.Errorf("[%v %q] expected missing %q, got %q", tc.names, tc.sel, tc.wantMissing, got)
		}
	}
}

func TestPrintSessions(t *testing.T) {
	var b bytes.Buffer
	if err := printSessions(&b, sessionsFixture(), printOpts{wide: true, now: time.Now()}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 4 {
		t.Fatalf("expected a header and 3 rows, got %q", b.String())
	}
	header := strings.Fields(lines[0])
	for _, col := range []string{"RUNTIME", "PANE", "PROCESS", "COST"} {
		n := 0
		for _, h := range header {
			if h == col {
				n++
			}
		}
		if n != 1 {
			t.Errorf("[header] expected column %s once, got %q", col, lines[0])
		}
	}
	for i, want := range map[int][]string{
		1: {"worker-0", "running", "tmux", "alive", "42", "1m30s", "$0.0004"},
		2: {"worker-1", "stalled!,ARCHIVED"},
		3: {"batch-0", "failed", "exec", "-"},
	} {
		fields := strings.Fields(lines[i])
		for _, w := range want {
			found := false
			for _, f := range fields {
				found = found || f == w
			}
			if !found {
				t.Errorf("[row %d] expected field %q in %q", i, w, lines[i])
			}
		}
	}
	b.Reset()
	printSessions(&b, sessionsFixture()[:1], printOpts{noHeaders: true, now: time.Now()})
	if strings.Contains(b.String(), "NAME") || !strings.HasPrefix(b.String(), "worker-0") {
		t.Errorf("[no headers] expected one bare row, got %q", b.String())
	}
}

func TestListingRender(t *testing.T) {
	empty := listing{kind: "session", items: []api.SessionView{}, print: func(w io.Writer, o printOpts) error { return nil }}
	for _, tc := range []struct {
		output, wantOut, wantInfo string
	}{
		{"", "", "No sessions found.\n"},
		{"wide", "", "No sessions found.\n"},
		{"json", "[]\n", ""},
		{"yaml", "[]\n", ""},
		{"name", "", ""},
	} {
		var out, info bytes.Buffer
		if err := empty.render(&out, &info, getFlags{output: tc.output}); err != nil {
			t.Fatal(err)
		}
		if out.String() != tc.wantOut || info.String() != tc.wantInfo {
			t.Errorf("[-o %q] expected out %q info %q, got %q %q", tc.output, tc.wantOut, tc.wantInfo, out.String(), info.String())
		}
	}
	views := sessionsFixture()[:2]
	l := listing{kind: "session", items: views, names: sessionNames(views)}
	var out bytes.Buffer
	l.render(&out, &out, getFlags{output: "name"})
	if out.String() != "session/worker-0\nsession/worker-1\n" {
		t.Errorf("[-o name] got %q", out.String())
	}
	if err := (listing{kind: "role", missing: []string{"a", "b"}}).err(); err == nil || err.Error() != "role a, b not found" {
		t.Errorf("[missing] expected 'role a, b not found', got %v", err)
	}
}

func TestWatchLoopPrintsOnChange(t *testing.T) {
	keys := []string{"a", "a", "b", "b", "b", "c"}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	i := 0
	var out bytes.Buffer
	err := watchLoop(ctx, &out, nil, time.Millisecond, func() ([]byte, func(io.Writer) error, error) {
		k := keys[i]
		i++
		if i == len(keys) {
			cancel()
		}
		return []byte(k), func(w io.Writer) error { _, err := io.WriteString(w, "table "+k+"\n"); return err }, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := "table a\n\ntable b\n\ntable c\n"; out.String() != want {
		t.Errorf("expected one table per change and no terminal codes %q, got %q", want, out.String())
	}
}

// writeCounter counts the writes it receives, as write(2) calls on stdout.
type writeCounter struct{ n, bytes int }

func (c *writeCounter) Write(p []byte) (int, error) {
	c.n++
	c.bytes += len(p)
	return len(p), nil
}

// TestPrintSessionsFewWrites: a table of 1000 sessions reaches its writer
// in a few large writes, not cell by cell.
func TestPrintSessionsFewWrites(t *testing.T) {
	var views []api.SessionView
	for i := range 1000 {
		v := sessionsFixture()[i%3]
		v.Name = herd.SessionName("w", i)
		views = append(views, v)
	}
	for _, wide := range []bool{false, true} {
		var c writeCounter
		if err := printSessions(&c, views, printOpts{wide: wide, now: time.Now()}); err != nil {
			t.Fatal(err)
		}
		if max := c.bytes/(64<<10) + 1; c.n > max {
			t.Errorf("[wide=%v] expected at most %d writes for %d bytes, got %d", wide, max, c.bytes, c.n)
		}
	}
}

func TestUsageFlags(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		fl      usageFlags
		since   time.Time
		wantErr string
	}{
		{usageFlags{by: "session"}, time.Time{}, ""},
		{usageFlags{by: "day", since: "7d"}, now.Add(-7 * 24 * time.Hour), ""},
		{usageFlags{by: "model", since: "90m"}, now.Add(-90 * time.Minute), ""},
		{usageFlags{by: "colour"}, time.Time{}, `--by "colour"`},
		{usageFlags{by: "role", since: "-1h"}, time.Time{}, "more than 0"},
		{usageFlags{by: "role", since: "yesterday"}, time.Time{}, "want a duration"},
		{usageFlags{by: "role", output: "yaml"}, time.Time{}, "unknown output format"},
		{usageFlags{by: "role", session: "bad name!"}, time.Time{}, "--session"},
	} {
		q, err := tc.fl.query(now)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("[%+v] expected an error with %q, got %v", tc.fl, tc.wantErr, err)
			}
			continue
		}
		if err != nil || !q.Since.Equal(tc.since) {
			t.Errorf("[%+v] expected since %v, got %v %v", tc.fl, tc.since, q.Since, err)
		}
	}
}

func TestPrintUsage(t *testing.T) {
	var b bytes.Buffer
	rep := api.UsageReport{By: "model", Lines: []api.UsageLine{
		{Key: "claude-opus-4-8", Usage: api.Usage{InputTokens: 1_500_000, OutputTokens: 7, CostUSD: 7.5}},
		{Key: "gpt-5", Usage: api.Usage{InputTokens: 950, CacheReadTokens: 12_345, CostUSD: 0.000385}},
	}, Total: api.Usage{InputTokens: 1_500_950, OutputTokens: 7, CacheReadTokens: 12_345, CostUSD: 7.500385}}
	if err := printUsage(&b, rep); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	want := [][]string{
		{"MODEL", "INPUT", "OUTPUT", "CACHE", "READ", "CACHE", "WRITE", "COST"},
		{"claude-opus-4-8", "1.50M", "7", "0", "0", "$7.50"},
		{"gpt-5", "950", "0", "12.3k", "0", "$0.0004"},
		{"TOTAL", "1.50M", "7", "12.3k", "0", "$7.50"},
	}
	if len(lines) != len(want) {
		t.Fatalf("expected %d lines, got %q", len(want), b.String())
	}
	for i, w := range want {
		if got := strings.Fields(lines[i]); strings.Join(got, " ") != strings.Join(w, " ") {
			t.Errorf("[line %d] expected %q, got %q", i, w, got)
		}
	}
}
