package diag

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func ptr(v float64) *float64 { return &v }

func TestCPUDelta(t *testing.T) {
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	sample := func(pid int, start uint64, cpu float64, at time.Time) Diagnostics {
		return Diagnostics{PID: pid, StartTime: start, CPUSeconds: cpu, SampledAt: at}
	}
	cur := sample(10, 500, 3.0, t0.Add(4*time.Second))
	tests := []struct {
		name        string
		prev        *Diagnostics
		cur         Diagnostics
		wantDelta   *float64
		wantPercent *float64
	}{
		{"no previous sample", nil, cur, nil, nil},
		{"previous of another pid", new(sample(11, 500, 1.0, t0)), cur, nil, nil},
		{"previous of a reused pid", new(sample(10, 499, 1.0, t0)), cur, nil, nil},
		{"previous decoded without identity", new(sample(0, 0, 1.0, t0)), cur, nil, nil},
		{"progress", new(sample(10, 500, 1.0, t0)), cur, ptr(2.0), ptr(50)},
		{"no progress", new(sample(10, 500, 3.0, t0)), cur, ptr(0), ptr(0)},
		{"tree lost cpu", new(sample(10, 500, 4.0, t0)), cur, nil, nil},
		{"same instant", new(sample(10, 500, 1.0, cur.SampledAt)), cur, ptr(2.0), nil},
		{"clock went back", new(sample(10, 500, 1.0, cur.SampledAt.Add(time.Second))), cur, ptr(2.0), nil},
	}
	for _, tt := range tests {
		d, p := cpuDelta(tt.prev, tt.cur)
		if diff := cmp.Diff(tt.wantDelta, d); diff != "" {
			t.Errorf("[%s] expected delta %s, got %s", tt.name, fmtPtr(tt.wantDelta), fmtPtr(d))
		}
		if diff := cmp.Diff(tt.wantPercent, p); diff != "" {
			t.Errorf("[%s] expected percent %s, got %s", tt.name, fmtPtr(tt.wantPercent), fmtPtr(p))
		}
	}
}

func TestCPUProgress(t *testing.T) {
	tests := []struct {
		name  string
		delta *float64
		want  Progress
	}{
		{"unknown", nil, ProgressUnknown},
		{"zero", ptr(0), ProgressNo},
		{"float noise", ptr(1e-12), ProgressNo},
		{"one tick", ptr(0.01), ProgressYes},
		{"plenty", ptr(12.5), ProgressYes},
	}
	for _, tt := range tests {
		if got := CPUProgress(Diagnostics{CPUDelta: tt.delta}); got != tt.want {
			t.Errorf("[%s] expected %q, got %q", tt.name, tt.want, got)
		}
	}
}

func TestSocketInode(t *testing.T) {
	tests := []struct {
		target string
		want   uint64
		ok     bool
	}{
		{"socket:[12345]", 12345, true},
		{"socket:[0]", 0, false},
		{"socket:[]", 0, false},
		{"socket:[12x]", 0, false},
		{"socket:[123", 0, false},
		{"pipe:[123]", 0, false},
		{"/tmp/socket:[1]", 0, false},
		{"", 0, false},
	}
	for _, tt := range tests {
		got, ok := socketInode(tt.target)
		if got != tt.want || ok != tt.ok {
			t.Errorf("[%q] expected %d %v, got %d %v", tt.target, tt.want, tt.ok, got, ok)
		}
	}
}

func TestCountEstablished(t *testing.T) {
	mine := map[uint64]struct{}{1: {}, 2: {}, 3: {}}
	tests := []struct {
		name        string
		table       string
		want, wantS int
	}{
		{"empty", "", 0, 0},
		{"header only", tcpHeader, 0, 0},
		{"mine and others", tcpHeader + tcpRow(0, "01", 1) + tcpRow(1, "01", 9) + tcpRow(2, "01", 2), 2, 0},
		{"non-established states", tcpHeader + tcpRow(0, "0A", 1) + tcpRow(1, "06", 2) + tcpRow(2, "08", 3), 0, 0},
		{"inode listed twice", tcpHeader + tcpRow(0, "01", 1) + tcpRow(1, "01", 1), 1, 0},
		{"no header", tcpRow(0, "01", 1), 1, 0},
		{"garbled", tcpHeader + "x\n" + tcpRow(1, "01", 3) + "   2: a:b c:d 01 0 0 0 0 0 -4\n", 1, 2},
		{"state out of range", tcpHeader + tcpRow(0, "101", 1), 0, 1},
	}
	for _, tt := range tests {
		n, skipped, err := countEstablished(strings.NewReader(tt.table), mine)
		if err != nil || n != tt.want || skipped != tt.wantS {
			t.Errorf("[%s] expected %d established, %d skipped, got %d, %d, err %v", tt.name, tt.want, tt.wantS, n, skipped, err)
		}
	}
}

func TestDiagnosticsJSONKeys(t *testing.T) {
	b, err := json.Marshal(Diagnostics{PID: 10, StartTime: 7, Children: []Child{{PID: 11, Comm: "sh"}}})
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	keys := slices.Sorted(maps.Keys(m))
	want := []string{"children", "cpu_delta", "cpu_percent", "cpu_seconds", "fds", "proc_state", "rss_bytes",
		"sampled_at", "tcp_established", "threads", "wchan"}
	if diff := cmp.Diff(want, keys); diff != "" {
		t.Errorf("[json keys] expected … got … (-want +got):\n%s", diff)
	}
	if !strings.Contains(string(b), `"children":[{"pid":11,"comm":"sh"}]`) || !strings.Contains(string(b), `"cpu_delta":null`) {
		t.Errorf("[json values] expected children objects and null delta, got %s", b)
	}
}
