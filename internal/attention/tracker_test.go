package attention

import (
	"context"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"herd"
	"herd/internal/config"
	"herd/internal/store"
	"herd/internal/store/sqlite"
)

func openStore(t *testing.T) store.Store {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "herd.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// put writes a session (and an event) as the state writer would.
func put(t *testing.T, st store.Store, s herd.Session, evs ...*herd.Event) {
	t.Helper()
	err := st.Update(context.Background(), func(tx store.Tx) error {
		if err := tx.PutSession(s); err != nil {
			return err
		}
		for _, e := range evs {
			if err := tx.AppendEvent(e); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func notified(t *testing.T, st store.Store, session string) []herd.Event {
	t.Helper()
	var evs []herd.Event
	err := st.View(context.Background(), func(tx store.Tx) (err error) {
		evs, err = tx.Events(store.EventFilter{Session: session, Kind: herd.EventNotified})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func session(state herd.State, activity herd.Activity) herd.Session {
	return herd.Session{Name: "w-0", Role: "w", Host: "h", Incarnation: "i1", RuntimeKind: herd.RuntimeTmux,
		State: state, Activity: activity, StateSince: time.Now().UTC()}
}

// withNotify is the default config with [notify] n.
func withNotify(n config.Notify) *config.Config {
	cfg := config.Default()
	cfg.Notify = n
	return cfg
}

func newTracker(st store.Store, cfg config.Notify) *Tracker {
	t := New(Options{Store: st, Host: "h", Config: withNotify(cfg), Log: slog.New(slog.DiscardHandler)})
	t.Tick, t.BackoffMin, t.BackoffMax = 20*time.Millisecond, 30*time.Millisecond, 100*time.Millisecond
	return t
}

// flush makes, one after the other, every delivery attempt due, then looks
// again at now so the readers see the outcome: what Run's workers do.
func (t *Tracker) flush(ctx context.Context, now time.Time) error {
	t.mu.Lock()
	var due []job
	for key, ep := range t.open {
		for name, d := range ep.Channels {
			if !d.Done && !d.Next.After(time.Now()) {
				due = append(due, job{key, name})
			}
		}
	}
	t.mu.Unlock()
	for _, j := range due {
		t.deliver(ctx, j)
	}
	return t.look(ctx, now)
}

func run(t *testing.T, n *Tracker) context.CancelFunc {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { n.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return cancel
}

func TestNotifiesOncePerEpisodeAndRetries(t *testing.T) {
	st := openStore(t)
	hook, hookGot := recorder(t, http.StatusInternalServerError, http.StatusBadGateway)
	ntfy, ntfyGot := recorder(t)
	put(t, st, session(herd.StateRunning, herd.ActivityWaiting), &herd.Event{
		Time: time.Now().UTC(), Host: "h", Session: "w-0", Incarnation: "i1", Kind: herd.EventActivity,
		Reason: "hook", Data: map[string]any{"tool": "Bash"}})
	n := newTracker(st, config.Notify{Webhook: hook.URL, Ntfy: ntfy.URL})
	run(t, n)

	waitFor(t, "both channels notified", func() bool { return len(notified(t, st, "w-0")) == 2 })
	if !n.Notified("w-0") {
		t.Error("expected an open notification while the session waits")
	}
	if len(hookGot) != 3 || len(ntfyGot) != 1 {
		t.Errorf("expected the webhook tried 3 times (2 failures) and ntfy once, got %d and %d", len(hookGot), len(ntfyGot))
	}
	for _, ev := range notified(t, st, "w-0") {
		if ev.Reason != string(RuleWaiting) || !strings.Contains(ev.Message, "permission to use Bash") {
			t.Errorf("expected a waiting notification naming the tool, got %+v", ev)
		}
		if ev.Data["channel"] == ChannelWebhook && ev.Data["attempts"] != float64(3) {
			t.Errorf("expected the webhook's event to say 3 attempts, got %v", ev.Data["attempts"])
		}
	}
	d := n.Describe("w-0")
	if d == nil || d.Need != "waiting" || d.Action != "herd attach w-0" || !d.Channels[ChannelWebhook].Delivered ||
		d.Channels[ChannelWebhook].Attempts != 3 || !d.Channels[ChannelNtfy].Delivered {
		t.Errorf("expected describe to show both channels delivered (webhook after 3 tries), got %+v", d)
	}
	// Nothing more while the episode lasts, even across a restart.
	n2 := newTracker(st, config.Notify{Webhook: hook.URL, Ntfy: ntfy.URL})
	if err := n2.look(context.Background(), time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := n2.flush(context.Background(), time.Now()); err != nil {
		t.Fatal(err)
	}
	if !n2.Notified("w-0") || len(notified(t, st, "w-0")) != 2 {
		t.Errorf("expected a restarted notifier to remember the episode (open, 2 events), got open=%v, %d events", n2.Notified("w-0"), len(notified(t, st, "w-0")))
	}

	// The need clears, then comes back: a new episode, a new notification.
	put(t, st, session(herd.StateRunning, herd.ActivityWorking))
	n.Kick()
	waitFor(t, "the episode closed", func() bool { return !n.Notified("w-0") })
	put(t, st, session(herd.StateStalled, herd.ActivityWorking))
	n.Kick()
	waitFor(t, "the stall notified", func() bool { return len(notified(t, st, "w-0")) == 4 })
	last := notified(t, st, "w-0")[3]
	if last.Reason != string(RuleStalled) || last.Data["action"] != "herd restart w-0" {
		t.Errorf("expected a stalled notification with herd restart, got %+v", last)
	}
}

func TestDebounceSkipsShortNeeds(t *testing.T) {
	st := openStore(t)
	hook, got := recorder(t)
	put(t, st, session(herd.StateRunning, herd.ActivityWaiting))
	n := newTracker(st, config.Notify{Webhook: hook.URL, After: time.Hour})
	ctx := context.Background()
	look := func(at time.Time) {
		t.Helper()
		if err := n.look(ctx, at); err != nil {
			t.Fatal(err)
		}
	}
	t0 := time.Now()
	look(t0)
	put(t, st, session(herd.StateRunning, herd.ActivityIdle))
	look(t0.Add(2 * time.Hour))
	if err := n.flush(ctx, t0.Add(2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if len(got) != 0 || n.Notified("w-0") {
		t.Errorf("expected a need shorter than after to notify nobody, got %d requests", len(got))
	}
	// One that lasts past after does, not a moment before.
	put(t, st, session(herd.StateRunning, herd.ActivityWaiting))
	look(t0.Add(3 * time.Hour))
	look(t0.Add(4*time.Hour - time.Nanosecond))
	if err := n.flush(ctx, t0.Add(4*time.Hour-time.Nanosecond)); err != nil {
		t.Fatal(err)
	}
	if len(got) != 0 || n.Notified("w-0") {
		t.Errorf("expected nothing before the debounce ends, got %d requests", len(got))
	}
	look(t0.Add(4 * time.Hour))
	if err := n.flush(ctx, t0.Add(4*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || !n.Notified("w-0") {
		t.Errorf("expected one notification once the need lasted past after, got %d", len(got))
	}
}

func TestNoChannelNoEpisode(t *testing.T) {
	st := openStore(t)
	put(t, st, session(herd.StateFailed, herd.ActivityUnknown))
	n := newTracker(st, config.Notify{})
	if err := n.look(context.Background(), time.Now()); err != nil {
		t.Fatal(err)
	}
	if n.Notified("w-0") {
		t.Error("expected no open notification with no channel configured")
	}
	if !n.Escalated("w-0") {
		t.Error("expected the failed session escalated all the same")
	}
	hook, got := recorder(t)
	n.Reconfigure(withNotify(config.Notify{Webhook: hook.URL}))
	if err := n.look(context.Background(), time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := n.flush(context.Background(), time.Now()); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || !n.Notified("w-0") {
		t.Errorf("expected a reload adding a channel to notify the failed session, got %d requests", len(got))
	}
	// A reload taking the channel away closes the episode.
	n.Reconfigure(withNotify(config.Notify{}))
	if err := n.look(context.Background(), time.Now()); err != nil {
		t.Fatal(err)
	}
	if n.Notified("w-0") || !n.Escalated("w-0") {
		t.Errorf("expected no notification left once no channel is configured, and the escalation kept; got notified=%v escalated=%v",
			n.Notified("w-0"), n.Escalated("w-0"))
	}
}

// TestLoopWokenByReload: a reload adding a channel takes effect at
// once, and from then on the loop looks every tick: a session failing
// later is notified without a kick.
func TestLoopWokenByReload(t *testing.T) {
	st := openStore(t)
	put(t, st, session(herd.StateRunning, herd.ActivityIdle))
	n := newTracker(st, config.Notify{})
	run(t, n)
	hook, got := recorder(t)
	n.Reconfigure(withNotify(config.Notify{Webhook: hook.URL}))
	put(t, st, session(herd.StateFailed, herd.ActivityUnknown)) // no kick: found by the tick
	select {
	case <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("expected the failed session notified within the tick after a reload")
	}
	waitFor(t, "the notified event", func() bool { return len(notified(t, st, "w-0")) == 1 })
}

// TestEscalationDeliversPendingOnly: an escalation's command runs once
// (here it fails: recorded, not run again) while its webhook is retried
// until it answers 2xx; each gets the escalated event.
func TestEscalationDeliversPendingOnly(t *testing.T) {
	st := openStore(t)
	hook, got := recorder(t, http.StatusServiceUnavailable, http.StatusServiceUnavailable)
	runs := filepath.Join(t.TempDir(), "runs")
	cfg := config.Default()
	cfg.Escalation.Command = []string{"sh", "-c", `cat >> "$1"; echo >> "$1"; exit 3`, "notifier", runs}
	cfg.Escalation.Webhook = hook.URL
	n := New(Options{Store: st, Host: "h", Config: cfg, Log: slog.New(slog.DiscardHandler)})
	n.BackoffMin, n.BackoffMax = time.Millisecond, time.Millisecond
	put(t, st, session(herd.StateFailed, herd.ActivityUnknown))
	ctx := context.Background()
	if err := n.look(ctx, time.Now()); err != nil {
		t.Fatal(err)
	}
	key := Key(TrackEscalation, "w-0", RuleFailed)
	waitFor(t, "the webhook delivered", func() bool {
		if err := n.flush(ctx, time.Now()); err != nil {
			t.Fatal(err)
		}
		return !n.Open()[0].Owed()
	})
	if len(got) != 3 {
		t.Errorf("[webhook] expected 3 requests (2 failures, then delivered), got %d", len(got))
	}
	b, _ := os.ReadFile(runs)
	if lines := strings.Split(strings.TrimSpace(string(b)), "\n"); len(lines) != 1 || !strings.Contains(lines[0], `"kind":"escalated"`) {
		t.Errorf("[command] expected one run with the escalated event on stdin, got %q", b)
	}
	var open []Episode
	for _, ep := range n.Open() {
		if Key(ep.Track, ep.Session, ep.Rule) == key {
			open = append(open, ep)
		}
	}
	if len(open) != 1 {
		t.Fatalf("expected the escalation open, got %+v", n.Open())
	}
	want := map[string]*Delivery{
		ChannelCommand: {Done: true, Attempts: 1, LastError: open[0].Channels[ChannelCommand].LastError},
		ChannelWebhook: {Done: true, Attempts: 3},
	}
	if diff := cmp.Diff(want, open[0].Channels); diff != "" || !strings.Contains(want[ChannelCommand].LastError, "exit status 3") {
		t.Errorf("[episode] (-expected +got):\n%s\nlast error %q", diff, want[ChannelCommand].LastError)
	}
	if open[0].Owed() || open[0].EventID == 0 {
		t.Errorf("[episode] expected delivered with its event id, got %+v", open[0])
	}
}

// TestOpen: the inbox lists every open, fired episode of both tracks,
// named and sorted; copies, so a caller cannot change the tracker's.
func TestOpen(t *testing.T) {
	st := openStore(t)
	hook, _ := recorder(t)
	put(t, st, session(herd.StateRunning, herd.ActivityWaiting))
	failed := session(herd.StateFailed, herd.ActivityUnknown)
	failed.Name = "w-1"
	put(t, st, failed)
	n := newTracker(st, config.Notify{Webhook: hook.URL})
	if err := n.look(context.Background(), time.Now()); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, ep := range n.Open() {
		got = append(got, Key(ep.Track, ep.Session, ep.Rule))
		if ep.Track == TrackNotify && (ep.Message == nil || ep.Message.Session != ep.Session) {
			t.Errorf("[%s] expected the notification's message, got %+v", ep.Session, ep.Message)
		}
	}
	// w-0 waits, but not yet past waiting_after: no escalation.
	want := []string{"escalation/w-1/failed", "notify/w-0/waiting", "notify/w-1/failed"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("[open] (-expected +got):\n%s", diff)
	}
	eps := n.Open()
	eps[1].Channels[ChannelWebhook].Done = true
	eps[1].Message.Title = "changed"
	if d := n.Describe("w-0"); d == nil || d.Title != "w-0 needs permission" || d.Channels[ChannelWebhook].Delivered {
		t.Errorf("[copies] expected the tracker's episode unchanged, got %+v", d)
	}
}

// TestSessionMovedToAnotherHost: when a session moves to another host
// (failover), the host it left forgets its episode without touching the
// row the new host now owns: the new incarnation is told once.
func TestSessionMovedToAnotherHost(t *testing.T) {
	st := openStore(t)
	hook, got := recorder(t)
	tracker := func(host string) *Tracker {
		return New(Options{Store: st, Host: host, Config: withNotify(config.Notify{Webhook: hook.URL}), Log: slog.New(slog.DiscardHandler)})
	}
	a, b := tracker("a"), tracker("b")
	s := session(herd.StateFailed, herd.ActivityUnknown)
	s.Host = "a"
	put(t, st, s)
	ctx := context.Background()
	step := func(trs ...*Tracker) {
		t.Helper()
		for _, tr := range trs {
			if err := tr.look(ctx, time.Now()); err != nil {
				t.Fatal(err)
			}
			if err := tr.flush(ctx, time.Now()); err != nil {
				t.Fatal(err)
			}
		}
	}
	step(a)
	if len(got) != 1 || !a.Notified("w-0") {
		t.Fatalf("[on a] expected one notification, got %d", len(got))
	}
	s.Host, s.Incarnation = "b", "i2"
	put(t, st, s)
	step(b, a, b, a, b)
	if len(got) != 2 || !b.Notified("w-0") || a.Notified("w-0") {
		t.Errorf("[moved to b] expected one more notification, by b; got %d requests, notified on a %v, on b %v",
			len(got), a.Notified("w-0"), b.Notified("w-0"))
	}
	if evs := notified(t, st, "w-0"); len(evs) != 2 || evs[1].Host != "b" || evs[1].Incarnation != "i2" {
		t.Errorf("[events] expected the second notified event from b of i2, got %+v", evs)
	}
}
