package notify

import (
	"context"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"herd"
	"herd/internal/config"
	"herd/internal/herdtest"
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
	herdtest.WaitFor(t, what, 10*time.Second, cond)
}

func session(state herd.State, activity herd.Activity) herd.Session {
	return herd.Session{Name: "w-0", Role: "w", Host: "h", Incarnation: "i1", RuntimeKind: herd.RuntimeTmux,
		State: state, Activity: activity, StateSince: time.Now().UTC()}
}

func newNotifier(st store.Store, cfg config.Notify) *Notifier {
	return New(Options{Store: st, Host: "h", Config: cfg, Log: slog.New(slog.DiscardHandler),
		Tick: 20 * time.Millisecond, BackoffMin: 30 * time.Millisecond, BackoffMax: 100 * time.Millisecond})
}

func run(t *testing.T, n *Notifier) context.CancelFunc {
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
	n := newNotifier(st, config.Notify{Webhook: hook.URL, Ntfy: ntfy.URL})
	run(t, n)

	waitFor(t, "both channels notified", func() bool { return len(notified(t, st, "w-0")) == 2 })
	if !n.Open("w-0") {
		t.Error("expected an open notification while the session waits")
	}
	if len(hookGot) != 3 || len(ntfyGot) != 1 {
		t.Errorf("expected the webhook tried 3 times (2 failures) and ntfy once, got %d and %d", len(hookGot), len(ntfyGot))
	}
	for _, ev := range notified(t, st, "w-0") {
		if ev.Reason != string(NeedWaiting) || !strings.Contains(ev.Message, "permission to use Bash") {
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
	n2 := newNotifier(st, config.Notify{Webhook: hook.URL, Ntfy: ntfy.URL})
	if _, err := n2.Tick(context.Background(), time.Now()); err != nil {
		t.Fatal(err)
	}
	n2.start(context.Background(), time.Now())
	n2.deliveries.Wait()
	if !n2.Open("w-0") || len(notified(t, st, "w-0")) != 2 {
		t.Errorf("expected a restarted notifier to remember the episode (open, 2 events), got open=%v, %d events", n2.Open("w-0"), len(notified(t, st, "w-0")))
	}

	// The need clears, then comes back: a new episode, a new notification.
	put(t, st, session(herd.StateRunning, herd.ActivityWorking))
	n.Kick()
	waitFor(t, "the episode closed", func() bool { return !n.Open("w-0") })
	put(t, st, session(herd.StateStalled, herd.ActivityWorking))
	n.Kick()
	waitFor(t, "the stall notified", func() bool { return len(notified(t, st, "w-0")) == 4 })
	last := notified(t, st, "w-0")[3]
	if last.Reason != string(NeedStalled) || last.Data["action"] != "herd restart w-0" {
		t.Errorf("expected a stalled notification with herd restart, got %+v", last)
	}
}

func TestDebounceSkipsShortNeeds(t *testing.T) {
	st := openStore(t)
	hook, got := recorder(t)
	put(t, st, session(herd.StateRunning, herd.ActivityWaiting))
	n := newNotifier(st, config.Notify{Webhook: hook.URL, After: time.Hour})
	t0 := time.Now()
	if _, err := n.Tick(context.Background(), t0); err != nil {
		t.Fatal(err)
	}
	put(t, st, session(herd.StateRunning, herd.ActivityIdle))
	if _, err := n.Tick(context.Background(), t0.Add(2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	n.start(context.Background(), t0.Add(2*time.Hour))
	n.deliveries.Wait()
	if len(got) != 0 || n.Open("w-0") {
		t.Errorf("expected a need shorter than after to notify nobody, got %d requests", len(got))
	}
	// One that lasts past after does.
	put(t, st, session(herd.StateRunning, herd.ActivityWaiting))
	if _, err := n.Tick(context.Background(), t0.Add(3*time.Hour)); err != nil {
		t.Fatal(err)
	}
	wait, err := n.Tick(context.Background(), t0.Add(3*time.Hour+time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if wait < 58*time.Minute || wait > time.Hour {
		t.Errorf("expected the next look when the debounce ends (~59m), got %s", wait)
	}
	if _, err := n.Tick(context.Background(), t0.Add(4*time.Hour)); err != nil {
		t.Fatal(err)
	}
	n.start(context.Background(), t0.Add(4*time.Hour))
	n.deliveries.Wait()
	if len(got) != 1 || !n.Open("w-0") {
		t.Errorf("expected one notification once the need lasted past after, got %d", len(got))
	}
}

func TestNoChannelNoEpisode(t *testing.T) {
	st := openStore(t)
	put(t, st, session(herd.StateFailed, herd.ActivityUnknown))
	n := newNotifier(st, config.Notify{})
	if _, err := n.Tick(context.Background(), time.Now()); err != nil {
		t.Fatal(err)
	}
	if n.Open("w-0") {
		t.Error("expected no open notification with no channel configured")
	}
	hook, got := recorder(t)
	n.Reconfigure(config.Notify{Webhook: hook.URL})
	if _, err := n.Tick(context.Background(), time.Now()); err != nil {
		t.Fatal(err)
	}
	n.start(context.Background(), time.Now())
	n.deliveries.Wait()
	if len(got) != 1 || !n.Open("w-0") {
		t.Errorf("expected a reload adding a channel to notify the failed session, got %d requests", len(got))
	}
}

// TestIdleLoopWokenByReload: with no channel the loop sleeps its idle
// period; a reload adding a channel wakes it at once, and from then on it
// looks every tick: a session failing later is notified without a kick.
func TestIdleLoopWokenByReload(t *testing.T) {
	st := openStore(t)
	put(t, st, session(herd.StateRunning, herd.ActivityIdle))
	n := newNotifier(st, config.Notify{})
	run(t, n)
	hook, got := recorder(t)
	n.Reconfigure(config.Notify{Webhook: hook.URL})
	put(t, st, session(herd.StateFailed, herd.ActivityUnknown)) // no kick: found by the tick
	select {
	case <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("expected the failed session notified within the tick after a reload")
	}
	waitFor(t, "the notified event", func() bool { return len(notified(t, st, "w-0")) == 1 })
}
