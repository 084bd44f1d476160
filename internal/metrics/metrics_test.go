package metrics

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// serve runs m on a loopback listener and returns its base URL.
func serve(t *testing.T, m *Metrics) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := m.Run(ctx, ln); err != nil {
			t.Errorf("run: %v", err)
		}
	}()
	t.Cleanup(func() { cancel(); wg.Wait() })
	return "http://" + ln.Addr().String()
}

func get(t *testing.T, url string) (string, int) {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b), resp.StatusCode
}

// labelsOf renders a metric's labels as "k=v,k=v" in their order.
func labelsOf(m *dto.Metric) string {
	var parts []string
	for _, l := range m.GetLabel() {
		parts = append(parts, l.GetName()+"="+l.GetValue())
	}
	return strings.Join(parts, ",")
}

func TestScrape(t *testing.T) {
	var mu sync.Mutex
	sessions := []Session{
		{Role: "worker", State: "running", Activity: "working"},
		{Role: "worker", State: "running", Activity: "working"},
		{Role: "worker", State: "stalled", Activity: "unknown"},
		{Role: "batch", State: "failed", Activity: "idle"},
	}
	m := New(func() []Session { mu.Lock(); defer mu.Unlock(); return sessions })
	m.Restart("worker")
	m.Restart("worker")
	m.Crash("exit_code")
	m.Crash("pane_gone")
	m.Stall("worker")
	m.Escalation("stalled")
	m.Notification("webhook", true)
	m.Notification("webhook", false)
	m.Probe("tmux", 3*time.Millisecond, false)
	m.Probe("tmux", 2*time.Second, true)
	m.Tick(40 * time.Millisecond)
	m.CountLiveReads(func() uint64 { return 7 })
	m.Usage("worker", "claude-opus-4-8", 42, 7, 0, 3, 0.25)
	m.Usage("worker", "claude-opus-4-8", 8, 0, 0, 0, 0.5)

	base := serve(t, m)
	body, code := get(t, base+"/metrics")
	if code != http.StatusOK {
		t.Fatalf("expected 200, got %d: %s", code, body)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("the Prometheus text parser rejected the scrape: %v\n%s", err, body)
	}
	value := func(name, labels string) (float64, bool) {
		f, ok := families[name]
		if !ok {
			return 0, false
		}
		for _, mt := range f.GetMetric() {
			if labelsOf(mt) != labels {
				continue
			}
			switch {
			case mt.Counter != nil:
				return mt.Counter.GetValue(), true
			case mt.Gauge != nil:
				return mt.Gauge.GetValue(), true
			case mt.Histogram != nil:
				return float64(mt.Histogram.GetSampleCount()), true
			}
		}
		return 0, false
	}
	for _, tc := range []struct {
		name, labels string
		want         float64
	}{
		{"herd_sessions", "activity=working,role=worker,state=running", 2},
		{"herd_sessions", "activity=unknown,role=worker,state=stalled", 1},
		{"herd_sessions", "activity=idle,role=batch,state=failed", 1},
		{"herd_restarts_total", "role=worker", 2},
		{"herd_crashes_total", "reason=exit_code", 1},
		{"herd_crashes_total", "reason=pane_gone", 1},
		{"herd_stalls_total", "role=worker", 1},
		{"herd_escalations_total", "reason=stalled", 1},
		{"herd_notifications_total", "channel=webhook,result=delivered", 1},
		{"herd_notifications_total", "channel=webhook,result=failed", 1},
		{"herd_probe_duration_seconds", "runtime=tmux", 2},
		{"herd_probe_timeouts_total", "runtime=tmux", 1},
		{"herd_tick_duration_seconds", "", 1},
		{"herd_live_set_reads_total", "", 7},
		{"herd_usage_tokens_total", "kind=input,model=claude-opus-4-8,role=worker", 50},
		{"herd_usage_tokens_total", "kind=output,model=claude-opus-4-8,role=worker", 7},
		{"herd_usage_tokens_total", "kind=cache_write,model=claude-opus-4-8,role=worker", 3},
		{"herd_usage_cost_usd_total", "model=claude-opus-4-8,role=worker", 0.75},
	} {
		got, ok := value(tc.name, tc.labels)
		if !ok || got != tc.want {
			t.Errorf("[%s{%s}] expected %v, got %v (present %v)", tc.name, tc.labels, tc.want, got, ok)
		}
	}
	if _, ok := families["go_goroutines"]; !ok {
		t.Errorf("expected the Go runtime's metrics too")
	}
	if f := families["herd_tick_duration_seconds"]; f.GetType() != dto.MetricType_HISTOGRAM {
		t.Errorf("expected the tick duration to be a histogram, got %v", f.GetType())
	}

	// The gauge follows the snapshot at each scrape.
	mu.Lock()
	sessions = sessions[:1]
	mu.Unlock()
	body, _ = get(t, base+"/metrics")
	if strings.Contains(body, `state="stalled"`) || !strings.Contains(body, `herd_sessions{activity="working",role="worker",state="running"} 1`) {
		t.Errorf("expected the gauge to follow the snapshot, got:\n%s", grep(body, "herd_sessions"))
	}

	if body, code := get(t, base+"/debug/pprof/"); code != http.StatusOK || !strings.Contains(body, "goroutine") {
		t.Errorf("expected the pprof index, got %d", code)
	}
	if _, code := get(t, base+"/debug/pprof/goroutine?debug=1"); code != http.StatusOK {
		t.Errorf("expected a goroutine profile, got %d", code)
	}
}

func grep(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

func TestNilRecordsNothing(t *testing.T) {
	var m *Metrics
	m.Restart("w")
	m.Crash("x")
	m.Stall("w")
	m.Escalation("x")
	m.Notification("c", true)
	m.Probe("tmux", time.Second, true)
	m.Tick(time.Second)
	m.CountLiveReads(func() uint64 { return 1 })
	m.Usage("w", "m", 1, 1, 1, 1, 1)
}

func TestRunStopsWithContext(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- New(nil).Run(ctx, ln) }()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("expected a clean stop, got %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
	if _, err := net.DialTimeout("tcp", ln.Addr().String(), time.Second); err == nil {
		t.Errorf("expected the listener closed")
	}
}
