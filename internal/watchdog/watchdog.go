// Package watchdog follows each live agent's activity — hook reports
// (ApplyReport, from the API and the spool), its output, its screen, its
// transcript — and reports what it saw to the writer (status.Activity,
// Stalled, StallWarning, Unstalled); it marks a silent agent stalled with
// /proc diagnostics, warns again, and asks slots to kill a stalled agent
// only when stallpolicy says that is safe and the role allows it.
//
// The daemon runs it (Run: a tick every second, plus the hook ingestion);
// the API hands it hook reports. It never writes a session itself, never
// signals a process, and never judges an idle or waiting agent stalled.
package watchdog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"herd"
	"herd/internal/agents"
	"herd/internal/cgroup"
	"herd/internal/config"
	"herd/internal/diag"
	"herd/internal/loop"
	"herd/internal/proc"
	"herd/internal/runtime"
	"herd/internal/runtime/execrt"
	"herd/internal/slots"
	"herd/internal/spool"
	"herd/internal/stallpolicy"
	"herd/internal/status"
)

// Listings gives the last tmux listing the prober took (*prober.Prober
// in the daemon): the watchdog lists nothing itself.
type Listings interface {
	// Last returns the last good tmux snapshot (empty before the first):
	// window_activity tells output times, and the agent's own pane is
	// the one captured.
	Last() runtime.Snapshot
}

// Screens captures tmux panes (*tmux.Runtime in the daemon).
type Screens interface {
	// CapturePane returns the visible text of pane paneID ("%3"); an
	// error leaves the pane's memory as it was.
	CapturePane(ctx context.Context, paneID string) ([]byte, error)
}

// Outputs locates the captured output of exec agents (*execrt.Runtime in
// the daemon).
type Outputs interface {
	// Paths returns the stdout and stderr files of an incarnation.
	Paths(session, incarnation string) (stdout, stderr string)
	// Flushed returns a channel closed once every byte the agent of
	// incarnation inc wrote is in its files; nil when there is nothing to
	// wait for.
	Flushed(inc string) <-chan struct{}
	// LogCap is the size each output file is capped at.
	LogCap() int64
}

// Options configure the watchdog.
type Options struct {
	Status *status.Manager
	// Prober's last tmux listing tells output times and the agent's pane.
	Prober Listings
	// Slots kills a stalled agent safe to kill.
	Slots *slots.Slots
	// Tmux captures the panes of agents whose screen is read.
	Tmux Screens
	// Exec locates exec agents' output files.
	Exec Outputs
	// Config gives [watchdog] and [probe].
	Config *config.Config
	// Live, when set, is read instead of Config: a reload applies a new
	// [watchdog] table at the next tick.
	Live     *config.Live
	Proc     proc.FS
	BootID   string
	StateDir string
	// Contain measures incarnations' trees for memory_max where the
	// kernel does not enforce it; nil checks no memory.
	Contain *cgroup.Containment
	Log     *slog.Logger
}

// Watchdog is the watchdog of this host's live sessions.
type Watchdog struct {
	o         Options
	st        *status.Manager
	collector diag.Collector
	// kills tracks the stall kills under way, waited for by Run.
	kills loop.Group
	// spool ingests hook reports spooled while no daemon answered.
	spool *spool.Ingester

	// tick holds the containers of Tick, reused from one tick to the
	// next (only Tick uses them, under tickMu).
	tickMu sync.Mutex
	tick   struct {
		items   []watchItem
		roles   map[string]herd.Role
		current map[string]bool
		// gen is the live set's generation the copies below are of
		// (see status.ListingSince).
		gen      uint64
		roleList []herd.Role
		live     []status.Live
	}

	mu sync.Mutex // guards the fields below
	// incs maps an incarnation id to what was seen of it.
	incs map[string]*incWatch
	// memKills holds the incarnations whose memory_max kill is under way.
	memKills map[string]bool
	// exeStats holds, by path, the agent binaries last stat'ed (see
	// fileAt).
	exeStats map[string]exeStat
}

// New returns the watchdog; Run starts it.
func New(o Options) *Watchdog {
	w := &Watchdog{o: o, st: o.Status, collector: diag.Collector{Root: o.Proc.Root, Logger: o.Log}, incs: map[string]*incWatch{}}
	w.kills.Log = o.Log
	w.spool = w.newIngester()
	// What the watchdog saw of an incarnation goes into its summary
	// when it ends.
	o.Status.SetWitness(w)
	return w
}

// maxPersistEvery bounds how stale the stored last_activity_at of a busy
// session may be; between writes the watchdog works from memory.
const maxPersistEvery = 30 * time.Second

// Run tracks each live session's output and activity every probe
// interval, marks silent ones stalled (with /proc diagnostics), warns
// again every stall_repeat, and kills a stalled agent only when that is
// safe and allowed. Agent hook reports spooled to files while the daemon
// was away are ingested alongside.
func (w *Watchdog) Run(ctx context.Context) {
	defer w.kills.Wait()
	var g loop.Group
	g.Log = w.o.Log
	defer g.Wait()
	g.Go("spool", func() { w.spool.Run(ctx) })
	every := w.cfg().Probe.Interval
	loop.Loop{Name: "watchdog", Log: w.o.Log, Every: every, First: every}.Run(ctx, func(ctx context.Context) time.Duration {
		w.Tick(ctx, time.Now())
		return 0
	})
}

// watchItem is one live session with its current incarnation and memory.
type watchItem struct {
	status.Live
	m *incWatch
}

func (w *Watchdog) wdConfig() stallpolicy.Config {
	c := w.cfg().Watchdog
	return stallpolicy.Config{StallAfter: c.StallAfter, StallRepeat: c.StallRepeat, LivenessTimeout: c.LivenessTimeout, AutoKill: c.StallAutoKill}
}

// Tick is one round over this host's live sessions. Only sessions
// that are stalled or close to it are sampled in /proc.
func (w *Watchdog) Tick(ctx context.Context, now time.Time) {
	tickCtx, cancel := context.WithTimeout(ctx, w.cfg().Probe.Interval+w.cfg().Probe.Timeout)
	defer cancel()
	// The tick's containers are kept from one tick to the next: an idle
	// fleet's ticks allocate nothing per session.
	w.tickMu.Lock()
	defer w.tickMu.Unlock()
	t := &w.tick
	// The roles come with the live set (memory): no read of the roles
	// table every tick. The copy is kept while nothing changed: a quiet
	// fleet's tick copies nothing.
	roleList, _, live, gen, changed, err := w.st.ListingSince(tickCtx, t.gen)
	if err != nil {
		switch {
		case ctx.Err() != nil: // a shutdown is no error
		case errors.Is(err, context.DeadlineExceeded):
			// A busy machine: the store did not answer within the
			// tick. Nothing is lost; the next tick reads again.
			w.o.Log.Warn("watchdog: tick skipped: the store did not answer within the tick", "err", err)
		default:
			w.o.Log.Error("watchdog: read store", "err", err)
		}
		return
	}
	if changed {
		t.gen, t.roleList, t.live = gen, roleList, live
	}
	roleList, live = t.roleList, t.live
	if t.roles == nil {
		t.roles, t.current = map[string]herd.Role{}, map[string]bool{}
	}
	clear(t.roles)
	clear(t.current)
	for _, r := range roleList {
		t.roles[r.Name] = r
	}
	items := t.items[:0]
	for _, it := range live {
		items = append(items, watchItem{Live: it, m: w.watchFor(it.S, it.Inc)})
		t.current[it.Inc.ID] = true
	}
	t.items = items
	defer clear(t.items) // the items are the tick's; the copy above is kept until a change
	roles := t.roles
	w.gc(t.current)
	w.agentKinds(items, roles)
	w.watchTmux(tickCtx, items, now)
	w.watchTranscripts(items, now)
	for i := range items {
		if tickCtx.Err() != nil {
			return
		}
		w.watchOne(tickCtx, &items[i], now)
	}
	if len(items) == 0 {
		return
	}
	w.watchMemory(tickCtx, items, roles)
	w.watchBinaries(tickCtx, items, roles)
}

// watchOne folds new output into one session's memory, persists what
// changed, and acts on the stall classification. it is the tick's own
// (not copied: a tick allocates nothing per quiet session).
func (w *Watchdog) watchOne(ctx context.Context, it *watchItem, now time.Time) {
	m := it.m
	if it.Inc.RuntimeKind != herd.RuntimeTmux && w.outputDue(m, now) {
		w.notePoll(m, now, w.pollOutput(m, now))
	}
	w.persistActivity(ctx, it)

	cfg := w.wdConfig()
	m.mu.Lock()
	in := stallpolicy.Input{
		State: it.S.State, Activity: m.activityLocked(), InTool: m.hook.InTool,
		LastActivity: m.lastActivity, StalledSince: it.S.StateSince, LastWarnAt: m.lastWarn,
		LastSampleAt: sampledAt(m.prev), KillBaseAt: sampledAt(m.killBase),
	}
	prev, base := m.prev, m.killBase
	m.mu.Unlock()
	v := stallpolicy.Classify(cfg, in, now)
	if v.Action == stallpolicy.Unstall {
		w.unstall(ctx, *it, now)
		return
	}
	if v.Action == stallpolicy.None && !v.Sample && !v.KillBase && !v.KillCheck {
		return
	}

	// One sample per tick: against the kill window's base at a kill check,
	// else against the previous sample.
	from := prev
	if v.KillCheck {
		from = base
	}
	sample, sampleErr := w.sampleTree(it.Inc, from, now)
	kill, why := false, ""
	m.mu.Lock()
	if sampleErr == nil {
		m.prev = &sample
		if v.KillBase {
			m.killBase = &sample
		}
	}
	if v.KillCheck {
		facts := stallpolicy.Facts{Sampled: sampleErr == nil}
		if sampleErr == nil {
			facts.CPU, facts.TCPEstablished = diag.CPUProgress(sample), sample.TCPEstablished
			m.killBase = &sample // the next check measures the next window
		}
		kill, why = stallpolicy.SafeToKill(cfg, facts)
		m.killWhy = why
	}
	m.mu.Unlock()
	if v.KillCheck && !kill {
		w.o.Log.Info("stalled agent not killed", "session", it.S.Name, "why", why)
	}

	var got *diag.Diagnostics
	if sampleErr == nil {
		got = &sample
	}
	switch v.Action {
	case stallpolicy.Stall:
		w.stall(ctx, *it, v, got, sampleErr, now)
	case stallpolicy.Warn:
		w.warn(ctx, *it, v, got, sampleErr, now)
	}
	if kill && got != nil {
		it := *it // the kill outlives the tick
		w.kills.Go("stall kill", func() { w.stallKill(ctx, it, *got, why) })
	}
}

func sampledAt(s *diag.Diagnostics) time.Time {
	if s == nil {
		return time.Time{}
	}
	return s.SampledAt
}

// sampleTree collects /proc diagnostics of an incarnation's agent tree,
// after verifying the agent's identity (a reused pid is never sampled).
func (w *Watchdog) sampleTree(inc herd.Incarnation, prev *diag.Diagnostics, now time.Time) (diag.Diagnostics, error) {
	id := inc.AgentIdentity()
	if id.Zero() {
		return diag.Diagnostics{}, fmt.Errorf("watchdog: no agent process known yet")
	}
	if axis := w.o.Proc.Check(id, w.o.BootID); axis != herd.Alive {
		return diag.Diagnostics{}, fmt.Errorf("watchdog: agent pid %d is %s", id.PID, axis)
	}
	s, err := w.collector.Collect(id.PID, prev, now)
	if err != nil {
		return diag.Diagnostics{}, err
	}
	if id.StartTime != 0 && s.StartTime != id.StartTime {
		return diag.Diagnostics{}, fmt.Errorf("watchdog: pid %d was reused", id.PID)
	}
	s.Cgroup = w.cgroupUsage(inc.ID)
	return s, nil
}

// pollOutput reads what an exec agent appended to its stdout and stderr
// files, and keeps the files capped.
func (w *Watchdog) pollOutput(m *incWatch, now time.Time) (got bool) {
	m.tailMu.Lock()
	defer m.tailMu.Unlock()
	m.mu.Lock()
	ended := m.ended
	m.mu.Unlock()
	if ended {
		return false
	}
	if m.stdout == nil {
		out, errPath := w.o.Exec.Paths(m.session, m.id)
		m.stdout, m.stderr = &execrt.Tailer{Path: out}, &execrt.Tailer{Path: errPath}
	}
	m.mu.Lock()
	kind := m.kind
	m.mu.Unlock()
	onOut := func(b []byte, at time.Time) {
		got = true
		sig := agents.ParseLine(kind, b, at)
		m.tracker.Observe(sig, at)
		if !sig.Progress {
			return // a retry notice: the agent is not moving on
		}
		m.mu.Lock()
		m.noteActivityLocked(at)
		m.mu.Unlock()
	}
	onErr := func(b []byte, at time.Time) {
		got = true
		m.tracker.ObserveStderr(string(b), at)
	}
	capBytes := w.o.Exec.LogCap()
	for _, f := range []struct {
		t    *execrt.Tailer
		line func([]byte, time.Time)
	}{{m.stdout, onOut}, {m.stderr, onErr}} {
		lost := f.t.Lost
		if err := f.t.Poll(now, f.line); err != nil {
			w.o.Log.Debug("watchdog: read output", "session", m.session, "err", err)
			continue
		}
		if err := f.t.CapFile(capBytes, now, f.line); err != nil {
			w.o.Log.Warn("watchdog: cap output file", "path", f.t.Path, "err", err)
		}
		if f.t.Lost > lost {
			w.o.Log.Warn("watchdog: agent output came faster than it is read; bytes skipped", "session", m.session, "path", f.t.Path, "skipped", f.t.Lost-lost, "skipped_total", f.t.Lost)
		}
	}
	return got
}

// maxOutputGap bounds the spacing of the output polls of a quiet exec
// agent.
const maxOutputGap = 5 * time.Second

// outputDue reports whether an exec agent's output files are read this
// tick: every tick while it writes; once quiet, at a spacing that doubles
// up to maxOutputGap (and a quarter of its stall threshold), so a silent
// fleet is not read a thousand files a second.
func (w *Watchdog) outputDue(m *incWatch, now time.Time) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return !now.Before(m.outNext)
}

// notePoll spaces the next output poll after one that found output (got)
// or none.
func (w *Watchdog) notePoll(m *incWatch, now time.Time, got bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if got {
		m.outGap, m.outNext = 0, time.Time{}
		return
	}
	limit := min(maxOutputGap, stallpolicy.Threshold(w.wdConfig(), m.hook.InTool)/4)
	m.outGap = min(max(2*m.outGap, w.o.Config.Probe.Interval), limit)
	m.outNext = now.Add(m.outGap)
}

// cfg is the configuration in force.
func (w *Watchdog) cfg() *config.Config {
	if w.o.Live != nil {
		return w.o.Live.Load()
	}
	return w.o.Config
}
