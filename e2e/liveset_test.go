package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"herd"
	"herd/internal/api"
)

// TestLiveSetWrittenThrough: the daemon's writes (a scale-up, a stop, an
// archive, activity from hooks) reach its in-memory live set without a
// read of the store — herd_live_set_reads_total stays put through them
// and the ticks after them (one read at most: the set's 10 s age
// backstop) — and get sessions, served from that set, shows each at once.
func TestLiveSetWrittenThrough(t *testing.T) {
	// Alone: it counts the store reads of the daemon's rounds, which a
	// busy machine multiplies (a round that misses its deadline is read again).
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	e := newEnv(t, fastRestart+fmt.Sprintf("[probe]\ninterval = \"200ms\"\n[metrics]\nlisten = %q\n", addr))
	e.start()
	metric := func(name string) float64 {
		t.Helper()
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		parser := expfmt.NewTextParser(model.UTF8Validation)
		families, err := parser.TextToMetricFamilies(strings.NewReader(string(b)))
		if err != nil {
			t.Fatalf("scrape: %v", err)
		}
		f := families[name]
		if f == nil || len(f.GetMetric()) != 1 {
			t.Fatalf("expected one %s in the scrape", name)
		}
		m := f.GetMetric()[0]
		if h := m.GetHistogram(); h != nil {
			return float64(h.GetSampleCount())
		}
		return m.GetCounter().GetValue()
	}

	e.must("run", "w", "--runtime", "exec", "--", "sleep", "300")
	e.waitState("w-0", herd.StateRunning, 10*time.Second)
	reads := metric("herd_live_set_reads_total")

	e.must("scale", "w", "--replicas", "3")
	e.waitState("w-2", herd.StateRunning, 10*time.Second)
	e.must("stop", "w-1")
	if v, _ := e.session("w-1"); v.State != herd.StateStopped {
		t.Errorf("[after stop] expected w-1 stopped at once, got %s", v.State)
	}
	e.must("archive", "w-2")
	if v, _ := e.session("w-2"); !v.Archived {
		t.Errorf("[after archive] expected w-2 archived at once, got %+v", v)
	}
	// w-0's hook report, posted as `herd hook` posts it. From this
	// process (the user's): a process outside w-0's tree carrying its
	// incarnation marker, as a `herd hook` run from here would, is a
	// forged mark the daemon refuses.
	w0, _ := e.session("w-0")
	report := api.ActivityReport{Session: "w-0", Incarnation: w0.Incarnation, Event: "PreToolUse", At: time.Now(),
		Payload: []byte(`{"session_id":"s","hook_event_name":"PreToolUse","tool_name":"Bash"}`)}
	if err := api.NewClient(e.socket).Do(context.Background(), http.MethodPost, "/v1/activity", nil, report, nil); err != nil {
		t.Fatalf("hook report: %v", err)
	}
	e.waitFor("w-0 working", 5*time.Second, func() bool {
		v, _ := e.session("w-0")
		return v.Activity == herd.ActivityWorking
	})

	// Ten probe ticks after the writes.
	ticks := metric("herd_tick_duration_seconds")
	e.waitFor("ten ticks", 10*time.Second, func() bool { return metric("herd_tick_duration_seconds") >= ticks+10 })
	if got := metric("herd_live_set_reads_total") - reads; got > 1 {
		t.Errorf("expected the daemon's writes and the ticks after them to read the store at most once (the age backstop), got %v reads", got)
	}
	views := e.sessions()
	if len(views) != 3 {
		t.Fatalf("expected 3 sessions, got %d", len(views))
	}
	for _, want := range []struct {
		name  string
		state herd.State
	}{{"w-0", herd.StateRunning}, {"w-1", herd.StateStopped}, {"w-2", herd.StateRunning}} {
		if v, _ := e.session(want.name); v.State != want.state {
			t.Errorf("[%s] expected %s, got %s", want.name, want.state, v.State)
		}
	}
}
