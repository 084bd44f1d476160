// Package metrics exports the daemon's Prometheus metrics, on a registry of its own, with /debug/pprof beside them.
package metrics

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"herd/internal/frontdoor"
)

// Session is what the sessions gauge counts of one session.
type Session struct {
	Role     string
	State    string
	Activity string
}

// Metrics holds every metric herd exports. A nil *Metrics is valid and
// records nothing, so callers need no "metrics enabled?" checks.
type Metrics struct {
	reg *prometheus.Registry

	restarts      *prometheus.CounterVec
	crashes       *prometheus.CounterVec
	stalls        *prometheus.CounterVec
	escalations   *prometheus.CounterVec
	notifications *prometheus.CounterVec
	probeDuration *prometheus.HistogramVec
	probeTimeouts *prometheus.CounterVec
	tickDuration  prometheus.Histogram
	usageTokens   *prometheus.CounterVec
	usageCost     *prometheus.CounterVec
}

// New registers herd's metrics, and the Go runtime's and the process's,
// on a new registry. snapshot is called on every scrape for the sessions
// gauge; it must be safe to call from any goroutine.
func New(snapshot func() []Session) *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		restarts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "herd", Name: "restarts_total",
			Help: "Sessions relaunched after a crash, by role.",
		}, []string{"role"}),
		crashes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "herd", Name: "crashes_total",
			Help: "Incarnations that died unasked, by reason (exit_code, signal, pane_gone, process_gone, ...).",
		}, []string{"reason"}),
		stalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "herd", Name: "stalls_total",
			Help: "Sessions that became stalled, by role.",
		}, []string{"role"}),
		escalations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "herd", Name: "escalations_total",
			Help: "Escalation episodes opened, by reason.",
		}, []string{"reason"}),
		notifications: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "herd", Name: "notifications_total",
			Help: "Notification delivery attempts, by channel and result (delivered, failed).",
		}, []string{"channel", "result"}),
		probeDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "herd", Name: "probe_duration_seconds",
			Help:    "Duration of one probe of the runtime, by runtime kind.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}, []string{"runtime"}),
		probeTimeouts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "herd", Name: "probe_timeouts_total",
			Help: "Probes that timed out (their sessions became unknown), by runtime kind.",
		}, []string{"runtime"}),
		tickDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "herd", Name: "tick_duration_seconds",
			Help:    "Duration of one supervisor tick: probe, decide, act.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}),
		usageTokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "herd", Name: "usage_tokens_total",
			Help: "Tokens the agents of this host recorded, as the usage ledger read them, by role, model and kind (input, output, cache_read, cache_write).",
		}, []string{"role", "model", "kind"}),
		usageCost: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "herd", Name: "usage_cost_usd_total",
			Help: "What the tokens of usage_tokens_total cost in USD (the agent's own figure, else the price table's), by role and model.",
		}, []string{"role", "model"}),
	}
	m.reg.MustRegister(
		m.restarts, m.crashes, m.stalls, m.escalations, m.notifications,
		m.probeDuration, m.probeTimeouts, m.tickDuration, m.usageTokens, m.usageCost,
		&sessionsCollector{snapshot: snapshot},
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return m
}

// Registry is the registry every metric is on.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Restart counts one relaunch after a crash.
func (m *Metrics) Restart(role string) {
	if m != nil {
		m.restarts.WithLabelValues(role).Inc()
	}
}

// Crash counts one death, by its reason.
func (m *Metrics) Crash(reason string) {
	if m != nil {
		m.crashes.WithLabelValues(reason).Inc()
	}
}

// Stall counts one session becoming stalled.
func (m *Metrics) Stall(role string) {
	if m != nil {
		m.stalls.WithLabelValues(role).Inc()
	}
}

// Escalation counts one escalation episode opened.
func (m *Metrics) Escalation(reason string) {
	if m != nil {
		m.escalations.WithLabelValues(reason).Inc()
	}
}

// Notification counts one delivery attempt on channel (command, webhook,
// desktop, ntfy, slack, ...).
func (m *Metrics) Notification(channel string, delivered bool) {
	if m == nil {
		return
	}
	result := "failed"
	if delivered {
		result = "delivered"
	}
	m.notifications.WithLabelValues(channel, result).Inc()
}

// Probe records one probe of runtime kind rt that took d; timedOut counts
// it among the timeouts as well.
func (m *Metrics) Probe(rt string, d time.Duration, timedOut bool) {
	if m == nil {
		return
	}
	m.probeDuration.WithLabelValues(rt).Observe(d.Seconds())
	if timedOut {
		m.probeTimeouts.WithLabelValues(rt).Inc()
	}
}

// Usage counts tokens and cost the usage ledger read of role's agents.
func (m *Metrics) Usage(role, model string, input, output, cacheRead, cacheWrite int64, costUSD float64) {
	if m == nil {
		return
	}
	for _, k := range []struct {
		kind string
		n    int64
	}{{"input", input}, {"output", output}, {"cache_read", cacheRead}, {"cache_write", cacheWrite}} {
		if k.n > 0 {
			m.usageTokens.WithLabelValues(role, model, k.kind).Add(float64(k.n))
		}
	}
	if costUSD > 0 {
		m.usageCost.WithLabelValues(role, model).Add(costUSD)
	}
}

// Tick records one supervisor tick that took d.
func (m *Metrics) Tick(d time.Duration) {
	if m != nil {
		m.tickDuration.Observe(d.Seconds())
	}
}

// CountLiveReads exports herd_live_set_reads_total from reads, the count of
// the reads of the store that filled the live set (status.Manager's
// LiveReads): with the set written through it moves only for hints, for
// writes around the daemon's store and for the set's age backstop. Called
// once, before the daemon runs.
func (m *Metrics) CountLiveReads(reads func() uint64) {
	if m == nil {
		return
	}
	m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Namespace: "herd", Name: "live_set_reads_total",
		Help: "Reads of the store that filled the in-memory live set (hints, writes around the daemon's store, the age backstop).",
	}, func() float64 { return float64(reads()) }))
}

// sessionsCollector reports herd_sessions from a snapshot taken at scrape
// time, so the gauge is never stale and needs no bookkeeping on each
// state change.
type sessionsCollector struct {
	snapshot func() []Session
}

var sessionsDesc = prometheus.NewDesc("herd_sessions",
	"Sessions by role, state and activity, at scrape time.",
	[]string{"role", "state", "activity"}, nil)

func (c *sessionsCollector) Describe(ch chan<- *prometheus.Desc) { ch <- sessionsDesc }

func (c *sessionsCollector) Collect(ch chan<- prometheus.Metric) {
	if c.snapshot == nil {
		return
	}
	counts := map[Session]int{}
	for _, s := range c.snapshot() {
		counts[s]++
	}
	for s, n := range counts {
		ch <- prometheus.MustNewConstMetric(sessionsDesc, prometheus.GaugeValue, float64(n), s.Role, s.State, s.Activity)
	}
}

// Handler serves /metrics (Prometheus text) and /debug/pprof/.
func (m *Metrics) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg}))
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}

// limits bound a scrape: a profile (/debug/pprof/profile, 30s by
// default) is the longest reply.
var limits = frontdoor.Limits{
	ReadHeader: 5 * time.Second, Read: 10 * time.Second, Write: 2 * time.Minute, Idle: time.Minute,
	MaxHeaderBytes: 32 << 10, MaxBody: 64 << 10,
}

// Run serves Handler on ln until ctx is done, then shuts down, giving
// in-flight scrapes a moment to finish.
func (m *Metrics) Run(ctx context.Context, ln net.Listener) error {
	srv := limits.Server(m.Handler())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	err := srv.Shutdown(sctx)
	if serr := <-errc; !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	return err
}
