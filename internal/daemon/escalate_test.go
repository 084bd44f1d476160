package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"herd"
	"herd/internal/api"
	"herd/internal/attention"
	"herd/internal/config"
	"herd/internal/herdtest"
	"herd/internal/store"
	"herd/internal/store/sqlite"
)

// escEnv is one in-process daemon on its own state dir and store.
type escEnv struct {
	dir    string
	cfg    *config.Config
	st     store.Store
	d      *Daemon
	client *api.Client
	stop   func()
}

// escConfig returns a config for a test daemon of dir: fast probes, a
// private tmux socket, a tmux binary that fails (no tmux is needed).
func escConfig() *config.Config {
	cfg := testConfig()
	cfg.Daemon.Host = "esc-test"
	cfg.Probe.Interval = 100 * time.Millisecond
	cfg.Probe.Timeout = time.Second
	return cfg
}

// escDir returns a short temp dir (unix socket paths are limited).
func escDir(t *testing.T) string {
	dir, err := os.MkdirTemp("", "herd-esc")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// escStart starts a daemon on dir with cfg; tune adjusts its attention tracker
// before it runs. The daemon stops at cleanup (or by env.stop).
func escStart(t *testing.T, dir string, cfg *config.Config, tune func(a *attention.Tracker)) *escEnv {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	st, err := sqlite.Open(ctx, filepath.Join(dir, "herd.db"))
	if err != nil {
		t.Fatal(err)
	}
	ln, release, err := Listen(dir)
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	d, err := New(Options{StateDir: dir, Config: cfg, Store: st, Logger: logger, StopGrace: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if tune != nil {
		tune(d.attention)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		d.Run(ctx, ln)
	}()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			select {
			case <-done:
			case <-time.After(20 * time.Second):
				t.Error("[shutdown] expected the daemon to stop, it did not")
			}
			release()
			st.Close()
		})
	}
	t.Cleanup(stop)
	env := &escEnv{dir: dir, cfg: cfg, st: st, d: d, client: api.NewClient(SocketPath(dir)), stop: stop}
	if _, err := env.client.Ping(ctx, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	return env
}

// escRole is an exec role running argv in dir.
func escRole(name, dir, policy string, argv ...string) herd.Role {
	return herd.Role{
		Name: name, Replicas: 1, Command: argv, Workdir: dir, Runtime: herd.RuntimeExec,
		Agent: herd.AgentGeneric,
		Restart: herd.RestartPolicy{Policy: policy, InitialBackoff: time.Second, MaxBackoff: time.Second,
			ResetAfter: time.Minute, MaxRestarts: 1},
	}
}

func escPut(t *testing.T, st store.Store, fn func(tx store.Tx) error) {
	t.Helper()
	if err := st.Update(context.Background(), fn); err != nil {
		t.Fatal(err)
	}
}

// escWait polls cond until it holds or the deadline passes.
func escWait(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	herdtest.WaitFor(t, "["+what+"]", timeout, cond)
}

func escSession(t *testing.T, st store.Store, name string) (s herd.Session, ok bool) {
	err := st.View(context.Background(), func(tx store.Tx) (err error) {
		s, err = tx.Session(name)
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		return s, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return s, true
}

func escEvents(t *testing.T, st store.Store, session string) []herd.Event {
	var evs []herd.Event
	err := st.View(context.Background(), func(tx store.Tx) (err error) {
		evs, err = tx.Events(store.EventFilter{Session: session, Kind: herd.EventEscalated})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

func escEpisode(t *testing.T, st store.Store, key string) (ep attention.Episode, ok bool) {
	err := st.View(context.Background(), func(tx store.Tx) error {
		raw, found, err := tx.KV(key)
		if err != nil || !found {
			return err
		}
		ok = true
		ep, err = attention.Decode(raw)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return ep, ok
}

// escAgent returns argv of an agent that runs until file is removed.
func escAgent(t *testing.T, dir, name string) []string {
	file := filepath.Join(dir, name+".run")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(file) }) // agents outlive the daemon: let them go
	return []string{"sh", "-c", `while [ -e "$1" ]; do sleep 0.05; done`, "agent", file}
}

// TestEscalationOnTimeWhileTmuxHangs: with every tmux call hanging (so the
// probe loop is stuck in its listing), an exec agent set waiting still
// escalates on time, and the session shows as escalated.
func TestEscalationOnTimeWhileTmuxHangs(t *testing.T) {
	dir := escDir(t)
	hang := filepath.Join(dir, "hang")
	calls := filepath.Join(dir, "tmux-calls")
	script := filepath.Join(dir, "tmux")
	body := fmt.Sprintf("#!/bin/sh\necho $$ >> '%s'\nwhile [ -e '%s' ]; do sleep 0.05; done\nexit 1\n", calls, hang)
	if err := os.WriteFile(script, []byte(body), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(hang, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(hang) })

	cfg := escConfig()
	cfg.Tmux.Binary = script
	cfg.Probe.Timeout = time.Minute // a tmux call hangs this long
	cfg.Escalation.WaitingAfter = time.Second
	env := escStart(t, dir, cfg, nil)
	escPut(t, env.st, func(tx store.Tx) error {
		return tx.PutRole(escRole("agent", dir, herd.PolicyAlways, escAgent(t, dir, "agent")...))
	})
	escWait(t, "agent running", 10*time.Second, func() bool {
		s, ok := escSession(t, env.st, "agent-0")
		return ok && s.State == herd.StateRunning
	})

	// A tmux session record makes the prober list tmux: the listing hangs.
	now := time.Now().UTC()
	escPut(t, env.st, func(tx store.Tx) error {
		if err := tx.PutRole(herd.Role{Name: "pane", Replicas: 1, Command: []string{"sleep", "1"}, Workdir: dir,
			Runtime: herd.RuntimeTmux, Agent: herd.AgentGeneric, Restart: cfg.Restart}); err != nil {
			return err
		}
		if err := tx.PutIncarnation(herd.Incarnation{ID: "pane-inc", Session: "pane-0", Host: cfg.Daemon.Host,
			RuntimeKind: herd.RuntimeTmux, Argv: []string{"sleep", "1"}, Workdir: dir, StartedAt: now}); err != nil {
			return err
		}
		return tx.PutSession(herd.Session{Name: "pane-0", Role: "pane", Host: cfg.Daemon.Host, State: herd.StateRunning,
			Incarnation: "pane-inc", RuntimeKind: herd.RuntimeTmux, Runtime: herd.Alive, Process: herd.Unknown,
			Activity: herd.ActivityUnknown, StartedAt: &now, StateSince: now})
	})
	escWait(t, "tmux called and hanging", 10*time.Second, func() bool {
		b, _ := os.ReadFile(calls)
		return len(b) > 0
	})

	// The agent starts waiting for input.
	var waitingAt time.Time
	escPut(t, env.st, func(tx store.Tx) error {
		s, err := tx.Session("agent-0")
		if err != nil {
			return err
		}
		waitingAt = time.Now().UTC()
		s.Activity = herd.ActivityWaiting
		s.LastActivityAt = &waitingAt
		return tx.PutSession(s)
	})
	var ev herd.Event
	escWait(t, "escalated event", 10*time.Second, func() bool {
		evs := escEvents(t, env.st, "agent-0")
		if len(evs) > 0 {
			ev = evs[0]
		}
		return len(evs) > 0
	})
	late := ev.Time.Sub(waitingAt)
	if late < cfg.Escalation.WaitingAfter || late > cfg.Escalation.WaitingAfter+time.Second {
		t.Errorf("[on time] expected the escalation %s after waiting began (+ one tick), got %s", cfg.Escalation.WaitingAfter, late)
	}
	if ev.Reason != "waiting" || ev.Data["threshold"] != "1s" || ev.Host != cfg.Daemon.Host {
		t.Errorf("[event] expected reason waiting, threshold 1s, host %s; got %+v", cfg.Daemon.Host, ev)
	}
	// The listing that started before is still hanging: the escalation did
	// not wait for it.
	b, _ := os.ReadFile(calls)
	pid, _ := strconv.Atoi(strings.Fields(string(b))[0])
	if syscall.Kill(pid, 0) != nil {
		t.Errorf("[hung tmux] expected the first tmux call (pid %d) still hanging at escalation time", pid)
	}

	var views []api.SessionView
	escWait(t, "session shown escalated", 5*time.Second, func() bool {
		if err := env.client.Do(context.Background(), http.MethodGet, "/v1/sessions", nil, nil, &views); err != nil {
			t.Fatal(err)
		}
		for _, v := range views {
			if v.Name == "agent-0" {
				return v.Escalated
			}
		}
		return false
	})
	if !env.d.attention.Escalated("agent-0") || env.d.attention.Escalated("pane-0") {
		t.Error("[escalated] expected agent-0 escalated and pane-0 not")
	}

	// Answered: the episode ends and the rule re-arms.
	escPut(t, env.st, func(tx store.Tx) error {
		s, err := tx.Session("agent-0")
		if err != nil {
			return err
		}
		s.Activity = herd.ActivityWorking
		return tx.PutSession(s)
	})
	escWait(t, "escalation cleared", 5*time.Second, func() bool { return !env.d.attention.Escalated("agent-0") })
	if _, ok := escEpisode(t, env.st, attention.Key(attention.TrackEscalation, "agent-0", attention.RuleWaiting)); ok {
		t.Error("[re-armed] expected the delivered, closed episode row gone, it is still stored")
	}
	if n := len(escEvents(t, env.st, "agent-0")); n != 1 {
		t.Errorf("[one fire] expected 1 escalated event, got %d", n)
	}
}

// escFailing starts a role whose agent exits 3 under policy never: the
// session fails at once, which escalates at once.
func escFailing(t *testing.T, env *escEnv, name string) {
	t.Helper()
	escPut(t, env.st, func(tx store.Tx) error {
		return tx.PutRole(escRole(name, env.dir, herd.PolicyNever, "sh", "-c", "exit 3"))
	})
	escWait(t, name+" failed", 10*time.Second, func() bool {
		s, ok := escSession(t, env.st, name+"-0")
		return ok && s.State == herd.StateFailed
	})
}

// TestEscalationCommandTimeout: a notifier command that outlives its
// timeout is killed with its process group and recorded; the API answers
// fast meanwhile.
func TestEscalationCommandTimeout(t *testing.T) {
	dir := escDir(t)
	pidFile := filepath.Join(dir, "notifier.pids")
	payload := filepath.Join(dir, "payload")
	cfg := escConfig()
	cfg.Escalation.Command = []string{"sh", "-c",
		`cat > "$2"; sleep 60 & echo $$ $! > "$1.tmp"; mv "$1.tmp" "$1"; wait`, "notify", pidFile, payload}
	const timeout = 1500 * time.Millisecond
	env := escStart(t, dir, cfg, func(a *attention.Tracker) { a.Timeout = timeout })
	escFailing(t, env, "crash")

	escWait(t, "notifier started", 10*time.Second, func() bool {
		_, err := os.Stat(pidFile)
		return err == nil
	})
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		pid, _ := strconv.Atoi(f)
		pids = append(pids, pid)
	}
	// While the notifier hangs, the daemon answers.
	for range 5 {
		start := time.Now()
		if _, err := env.client.Ping(context.Background(), 5*time.Second); err != nil {
			t.Fatal(err)
		}
		if took := time.Since(start); took > 500*time.Millisecond {
			t.Errorf("[responsive] expected /v1/health within 500ms while the notifier hangs, took %s", took)
		}
	}
	if syscall.Kill(pids[0], 0) != nil {
		t.Fatal("[responsive] expected the notifier still running during the health checks; it already ended")
	}

	key := attention.Key(attention.TrackEscalation, "crash-0", attention.RuleFailed)
	var ep attention.Episode
	escWait(t, "command outcome recorded", 10*time.Second, func() bool {
		ep, _ = escEpisode(t, env.st, key)
		return ep.Channels["command"] != nil && ep.Channels["command"].Attempts > 0
	})
	if cmd := ep.Channels["command"]; !strings.Contains(cmd.LastError, "timed out") || !cmd.Done || ep.Owed() {
		t.Errorf("[recorded] expected a timeout error, delivered (the command runs once); got %+v %+v", ep, cmd)
	}
	for _, pid := range pids {
		escWait(t, fmt.Sprintf("notifier pid %d killed", pid), 5*time.Second, func() bool {
			return escGone(pid)
		})
	}
	var ev herd.Event
	if raw, err := os.ReadFile(payload); err != nil || json.Unmarshal(raw, &ev) != nil {
		t.Fatalf("[stdin] expected the event JSON on the command's stdin, got %q (%v)", raw, err)
	}
	if ev.Kind != herd.EventEscalated || ev.Reason != "failed" || ev.Session != "crash-0" || ev.ID != ep.EventID {
		t.Errorf("[stdin] expected the escalated event %d of crash-0, got %+v", ep.EventID, ev)
	}
}

// escGone reports whether pid is gone or a zombie.
func escGone(pid int) bool {
	if errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
		return true
	}
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return true
	}
	rest := string(b[strings.LastIndexByte(string(b), ')')+1:])
	f := strings.Fields(rest)
	return len(f) > 0 && f[0] == "Z"
}

// escHook is a loopback webhook that fails its next failures requests.
type escHook struct {
	srv      *httptest.Server
	mu       sync.Mutex // guards the fields below
	failures int
	requests int
	ok       int
	bodies   []herd.Event
}

func newEscHook(t *testing.T, failures int) *escHook {
	h := &escHook{failures: failures}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var ev herd.Event
		json.NewDecoder(r.Body).Decode(&ev)
		h.mu.Lock()
		defer h.mu.Unlock()
		h.requests++
		if h.failures > 0 {
			h.failures--
			http.Error(w, "try later", http.StatusServiceUnavailable)
			return
		}
		h.ok++
		h.bodies = append(h.bodies, ev)
	}))
	t.Cleanup(h.srv.Close)
	return h
}

func (h *escHook) counts() (requests, ok int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.requests, h.ok
}

func escFastDelivery(a *attention.Tracker) {
	a.Tick = 20 * time.Millisecond
	a.BackoffMin = 50 * time.Millisecond
	a.BackoffMax = 200 * time.Millisecond
	a.Timeout = 2 * time.Second
}

// TestEscalationWebhookRetries: a webhook failing twice then succeeding
// gets three requests in all and exactly one successful delivery.
func TestEscalationWebhookRetries(t *testing.T) {
	dir := escDir(t)
	hook := newEscHook(t, 2)
	cfg := escConfig()
	cfg.Escalation.Webhook = hook.srv.URL
	env := escStart(t, dir, cfg, escFastDelivery)
	escFailing(t, env, "crash")

	key := attention.Key(attention.TrackEscalation, "crash-0", attention.RuleFailed)
	var ep attention.Episode
	escWait(t, "delivered", 10*time.Second, func() bool {
		ep, _ = escEpisode(t, env.st, key)
		return ep.FiredAt != nil && !ep.Owed()
	})
	// Many timer periods and backoffs later, nothing more is sent.
	deadline := time.Now().Add(500 * time.Millisecond)
	for time.Now().Before(deadline) {
		if n, _ := hook.counts(); n > 3 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if n, ok := hook.counts(); n != 3 || ok != 1 {
		t.Fatalf("[webhook] expected 3 requests and 1 success, got %d and %d", n, ok)
	}
	if hk := ep.Channels["webhook"]; hk == nil || hk.Attempts != 3 || hk.LastError != "" || !hk.Done || !ep.Fired() {
		t.Errorf("[episode] expected 3 attempts, no error, webhook done, still open; got %+v %+v", ep, hk)
	}
	hook.mu.Lock()
	got := hook.bodies[0]
	hook.mu.Unlock()
	if got.ID != ep.EventID || got.Kind != herd.EventEscalated || got.Reason != "failed" {
		t.Errorf("[payload] expected escalated event %d, got %+v", ep.EventID, got)
	}
	if n := len(escEvents(t, env.st, "crash-0")); n != 1 {
		t.Errorf("[one fire] expected 1 escalated event, got %d", n)
	}
}

// TestEscalationSurvivesRestart: an escalation not delivered before a
// restart is delivered after it, and none is fired twice.
func TestEscalationSurvivesRestart(t *testing.T) {
	dir := escDir(t)
	down := newEscHook(t, 1<<30) // never accepts
	cfg := escConfig()
	cfg.Escalation.Webhook = down.srv.URL
	env := escStart(t, dir, cfg, escFastDelivery)
	escFailing(t, env, "crash")
	key := attention.Key(attention.TrackEscalation, "crash-0", attention.RuleFailed)
	escWait(t, "first attempts failed", 10*time.Second, func() bool {
		ep, _ := escEpisode(t, env.st, key)
		return ep.Channels["webhook"] != nil && ep.Channels["webhook"].Attempts >= 2 && ep.Owed()
	})
	env.stop()

	up := newEscHook(t, 0)
	cfg2 := escConfig()
	cfg2.Escalation.Webhook = up.srv.URL
	env2 := escStart(t, dir, cfg2, escFastDelivery)
	escWait(t, "delivered after restart", 10*time.Second, func() bool {
		ep, _ := escEpisode(t, env2.st, key)
		return ep.FiredAt != nil && !ep.Owed()
	})
	escWait(t, "shown escalated after restart", 5*time.Second, func() bool { return env2.d.attention.Escalated("crash-0") })
	env2.stop()

	// A third start finds it delivered: nothing is sent, nothing fires.
	again := newEscHook(t, 0)
	cfg3 := escConfig()
	cfg3.Escalation.Webhook = again.srv.URL
	env3 := escStart(t, dir, cfg3, escFastDelivery)
	escWait(t, "shown escalated after second restart", 5*time.Second, func() bool { return env3.d.attention.Escalated("crash-0") })
	env3.stop()

	if n, ok := up.counts(); n != 1 || ok != 1 {
		t.Errorf("[after restart] expected exactly 1 successful request, got %d requests, %d ok", n, ok)
	}
	if n, _ := again.counts(); n != 0 {
		t.Errorf("[second restart] expected no request, got %d", n)
	}
	st, err := sqlite.Open(context.Background(), filepath.Join(dir, "herd.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if n := len(escEvents(t, st, "crash-0")); n != 1 {
		t.Errorf("[no re-fire] expected 1 escalated event over three daemons, got %d", n)
	}
}

// TestEscalationDeletedSessionStillDelivered: an escalation still owed
// when its session is deleted is delivered later, then forgotten.
func TestEscalationDeletedSessionStillDelivered(t *testing.T) {
	dir := escDir(t)
	hook := newEscHook(t, 1<<30)
	cfg := escConfig()
	cfg.Escalation.Webhook = hook.srv.URL
	env := escStart(t, dir, cfg, escFastDelivery)
	escFailing(t, env, "crash")
	key := attention.Key(attention.TrackEscalation, "crash-0", attention.RuleFailed)
	escWait(t, "first attempt failed", 10*time.Second, func() bool {
		ep, _ := escEpisode(t, env.st, key)
		return ep.Channels["webhook"] != nil && ep.Channels["webhook"].Attempts >= 1
	})
	escPut(t, env.st, func(tx store.Tx) error { return tx.DeleteRole("crash") })
	escWait(t, "episode closed", 5*time.Second, func() bool {
		ep, ok := escEpisode(t, env.st, key)
		return ok && !ep.Open && !env.d.attention.Escalated("crash-0")
	})

	hook.mu.Lock()
	hook.failures = 0
	hook.mu.Unlock()
	escWait(t, "delivered and forgotten", 10*time.Second, func() bool {
		_, ok := escEpisode(t, env.st, key)
		return !ok
	})
	if _, ok := hook.counts(); ok != 1 {
		t.Errorf("[delivered] expected 1 successful request, got %d", ok)
	}
	var index string
	env.st.View(context.Background(), func(tx store.Tx) (err error) {
		index, _, err = tx.KV(attention.IndexKey(cfg.Daemon.Host))
		return err
	})
	if index != "[]" && index != "null" {
		t.Errorf("[index] expected an empty index, got %s", index)
	}
}
