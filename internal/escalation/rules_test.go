package escalation

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"herd"
)

var t0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

func at(d time.Duration) time.Time { return t0.Add(d) }

func ptr[T any](v T) *T { return &v }

func TestObserve(t *testing.T) {
	last := at(-time.Minute)
	base := herd.Session{Name: "w-0", Incarnation: "i1", State: herd.StateRunning, StateSince: at(-time.Hour)}
	with := func(f func(s *herd.Session)) herd.Session { s := base; f(&s); return s }
	cases := []struct {
		name string
		s    herd.Session
		r    Rule
		want Condition
	}{
		{"waiting with last activity", with(func(s *herd.Session) { s.Activity = herd.ActivityWaiting; s.LastActivityAt = &last }), RuleWaiting,
			Condition{Active: true, Incarnation: "i1", Since: last}},
		{"waiting without last activity", with(func(s *herd.Session) { s.Activity = herd.ActivityWaiting }), RuleWaiting,
			Condition{Active: true, Incarnation: "i1"}},
		{"waiting but stopped", with(func(s *herd.Session) { s.Activity = herd.ActivityWaiting; s.State = herd.StateStopped }), RuleWaiting,
			Condition{Incarnation: "i1"}},
		{"working", with(func(s *herd.Session) { s.Activity = herd.ActivityWorking }), RuleWaiting,
			Condition{Incarnation: "i1"}},
		{"stalled", with(func(s *herd.Session) { s.State = herd.StateStalled }), RuleStalled,
			Condition{Active: true, Incarnation: "i1", Since: at(-time.Hour), Exact: true}},
		{"running is not stalled", base, RuleStalled,
			Condition{Incarnation: "i1", Since: at(-time.Hour), Exact: true}},
		{"unknown", with(func(s *herd.Session) { s.State = herd.StateUnknown }), RuleUnknown,
			Condition{Active: true, Incarnation: "i1", Since: at(-time.Hour), Exact: true}},
		{"failed", with(func(s *herd.Session) { s.State = herd.StateFailed }), RuleFailed,
			Condition{Active: true, Incarnation: "i1", Since: at(-time.Hour), Exact: true}},
		{"bogus rule", base, Rule("bogus"),
			Condition{Incarnation: "i1", Since: at(-time.Hour), Exact: true}},
	}
	for _, c := range cases {
		if diff := cmp.Diff(c.want, Observe(c.s, c.r)); diff != "" {
			t.Errorf("[%s] condition (-expected +got):\n%s", c.name, diff)
		}
	}
}

func TestEvaluate(t *testing.T) {
	const th = 10 * time.Minute
	open := Episode{Open: true, Incarnation: "i1", Since: at(0)}
	fired := open
	fired.FiredAt = ptr(at(th))
	fired.EventID = 7
	fired.Delivered = true
	owed := fired
	owed.Delivered = false
	owed.Attempts = 2
	owed.LastError = "webhook: 500"
	owed.NextAttempt = ptr(at(time.Hour))

	firedAt := func(ep Episode, now time.Time) Episode {
		ep.FiredAt = &now
		ep.EventID, ep.Delivered, ep.Attempts, ep.NextAttempt, ep.LastError = 0, false, 0, nil, ""
		return ep
	}
	cases := []struct {
		name     string
		c        Condition
		ep       Episode
		now      time.Time
		th       time.Duration
		wantFire bool
		want     Episode
	}{
		{"clear, nothing stored", Condition{}, Episode{}, at(0), th, false, Episode{}},
		{"opens with hint", Condition{Active: true, Incarnation: "i1", Since: at(-time.Minute)}, Episode{}, at(0), th, false,
			Episode{Open: true, Incarnation: "i1", Since: at(-time.Minute)}},
		{"opens without hint", Condition{Active: true, Incarnation: "i1"}, Episode{}, at(0), th, false,
			Episode{Open: true, Incarnation: "i1", Since: at(0)}},
		{"future hint clamps to now", Condition{Active: true, Incarnation: "i1", Since: at(time.Hour)}, Episode{}, at(0), th, false,
			Episode{Open: true, Incarnation: "i1", Since: at(0)}},
		{"hint before last seen clear", Condition{Active: true, Incarnation: "i1", Since: at(-time.Hour), NotBefore: at(-time.Second)}, Episode{}, at(0), th, false,
			Episode{Open: true, Incarnation: "i1", Since: at(-time.Second)}},
		{"old hint fires at once", Condition{Active: true, Incarnation: "i1", Since: at(-th)}, Episode{}, at(0), th, true,
			firedAt(Episode{Open: true, Incarnation: "i1", Since: at(-th)}, at(0))},
		{"just below threshold", Condition{Active: true, Incarnation: "i1"}, open, at(th - time.Nanosecond), th, false, open},
		{"exactly at threshold", Condition{Active: true, Incarnation: "i1"}, open, at(th), th, true, firedAt(open, at(th))},
		{"past threshold", Condition{Active: true, Incarnation: "i1"}, open, at(2 * th), th, true, firedAt(open, at(2*th))},
		{"already fired", Condition{Active: true, Incarnation: "i1"}, fired, at(5 * th), th, false, fired},
		{"exact since unchanged", Condition{Active: true, Incarnation: "i1", Since: at(0), Exact: true}, fired, at(5 * th), th, false, fired},
		{"exact since later: new episode", Condition{Active: true, Incarnation: "i1", Since: at(th), Exact: true}, fired, at(th + time.Minute), th, false,
			func() Episode { e := fired; e.Since = at(th); e.FiredAt = nil; return e }()},
		{"exact future since kept, fires at once with zero threshold", Condition{Active: true, Incarnation: "i1", Since: at(time.Hour), Exact: true}, Episode{}, at(0), 0, true,
			firedAt(Episode{Open: true, Incarnation: "i1", Since: at(time.Hour)}, at(0))},
		{"new incarnation: new episode", Condition{Active: true, Incarnation: "i2"}, fired, at(th), th, false,
			func() Episode { e := fired; e.Incarnation = "i2"; e.Since = at(th); e.FiredAt = nil; return e }()},
		{"clears: closes", Condition{}, fired, at(th), th, false, func() Episode { e := fired; e.Open = false; return e }()},
		{"re-fire supersedes undelivered", Condition{Active: true, Incarnation: "i1"},
			func() Episode { e := owed; e.Open = false; return e }(), at(time.Hour), 0, true,
			firedAt(Episode{Open: true, Incarnation: "i1", Since: at(time.Hour)}, at(time.Hour))},
	}
	for _, c := range cases {
		fire, got := Evaluate(c.c, c.ep, c.now, c.th)
		if fire != c.wantFire {
			t.Errorf("[%s] expected fire %v, got %v", c.name, c.wantFire, fire)
		}
		if diff := cmp.Diff(c.want, got); diff != "" {
			t.Errorf("[%s] episode (-expected +got):\n%s", c.name, diff)
		}
	}
}

func TestKeep(t *testing.T) {
	cases := []struct {
		name string
		ep   Episode
		want bool
	}{
		{"zero", Episode{}, false},
		{"open", Episode{Open: true}, true},
		{"closed, delivered", Episode{EventID: 3, Delivered: true}, false},
		{"closed, owed", Episode{EventID: 3}, true},
		{"closed, never fired", Episode{Since: at(0)}, false},
	}
	for _, c := range cases {
		if got := c.ep.Keep(); got != c.want {
			t.Errorf("[%s] expected keep %v, got %v", c.name, c.want, got)
		}
	}
}

func TestKeys(t *testing.T) {
	for _, r := range Rules {
		s, got, ok := ParseKey(Key("worker-12", r))
		if !ok || s != "worker-12" || got != r {
			t.Errorf("[%s] expected worker-12 %s true, got %q %q %v", r, r, s, got, ok)
		}
	}
	for _, bad := range []string{"", "escalation/", "escalation/x", "escalation//waiting", "escalation/x/", "other/x/waiting", IndexKey("h")} {
		if _, _, ok := ParseKey(bad); ok {
			t.Errorf("[%q] expected not a key, got ok", bad)
		}
	}
}

func TestDecodeBad(t *testing.T) {
	if _, err := Decode("{not json"); err == nil {
		t.Error("[garbled episode] expected an error, got nil")
	}
	if _, err := DecodeIndex("[1,2]"); err == nil {
		t.Error("[garbled index] expected an error, got nil")
	}
	if keys, err := DecodeIndex(""); err != nil || keys != nil {
		t.Errorf("[empty index] expected nil nil, got %v %v", keys, err)
	}
	if _, err := (Episode{Since: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}).Encode(); err == nil {
		t.Error("[year 10000] expected an encode error, got nil")
	}
}

func TestDescribe(t *testing.T) {
	ep := Episode{Since: at(0)}
	msg, data := Describe(RuleWaiting, ep, 30*time.Minute, at(31*time.Minute))
	if msg != "agent waiting for input for 31m0s (waiting_after 30m0s)" {
		t.Errorf("[waiting message] got %q", msg)
	}
	want := map[string]any{"rule": "waiting", "threshold": "30m0s", "threshold_seconds": 1800.0,
		"for": "31m0s", "for_seconds": 1860.0, "since": "2030-01-02T03:04:05Z"}
	if diff := cmp.Diff(want, data); diff != "" {
		t.Errorf("[waiting data] (-expected +got):\n%s", diff)
	}
}

// episodes is a fake store of encoded episodes: every evaluation reads and
// writes through Encode/Decode, as the daemon does through kv rows.
type episodes map[Rule]string

// tick evaluates rule r for condition c at time.Now(), persisting the
// result; it reports whether the rule fired.
func (s episodes) tick(t *testing.T, r Rule, c Condition, th time.Duration) bool {
	t.Helper()
	var ep Episode
	if v, ok := s[r]; ok {
		var err error
		if ep, err = Decode(v); err != nil {
			t.Fatal(err)
		}
	}
	fire, next := Evaluate(c, ep, time.Now(), th)
	if fire {
		next.EventID = int64(len(s) + 100)
	}
	if !next.Keep() {
		delete(s, r)
		return fire
	}
	v, err := next.Encode()
	if err != nil {
		t.Fatal(err)
	}
	s[r] = v
	return fire
}

// TestTimeline drives one rule through a timeline in a synctest bubble,
// one evaluation per second as the daemon's timer does.
func TestTimeline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const th = 30 * time.Second
		store := episodes{}
		waiting := Condition{Active: true, Incarnation: "i1"}
		clear := Condition{Incarnation: "i1"}
		fires := func(c Condition, d time.Duration) (n int, first time.Duration) {
			start := time.Now()
			first = -1
			for end := start.Add(d); time.Now().Before(end); time.Sleep(time.Second) {
				if store.tick(t, RuleWaiting, c, th) {
					if n == 0 {
						first = time.Since(start)
					}
					n++
				}
			}
			return n, first
		}

		// Inclusive threshold: seen waiting at 0s, fires on the 30s tick.
		n, first := fires(waiting, 5*time.Minute)
		if n != 1 || first != th {
			t.Fatalf("[first episode] expected 1 fire at %s, got %d at %s", th, n, first)
		}

		// A restart reads the persisted state back: no second fire.
		restarted := episodes{RuleWaiting: store[RuleWaiting]}
		store = restarted
		if n, _ := fires(waiting, 5*time.Minute); n != 0 {
			t.Fatalf("[after restart] expected no fire, got %d", n)
		}
		ep, _ := Decode(store[RuleWaiting])
		if !ep.Fired() {
			t.Fatalf("[after restart] expected the episode open and fired, got %+v", ep)
		}

		// The condition clears: the episode closes.
		if n, _ := fires(clear, 10*time.Second); n != 0 {
			t.Fatalf("[cleared] expected no fire, got %d", n)
		}
		if ep, _ := Decode(store[RuleWaiting]); ep.Fired() {
			t.Fatalf("[cleared] expected the episode closed, got %+v", ep)
		}

		// Re-armed: a new episode fires again after a full threshold.
		n, first = fires(waiting, 2*time.Minute)
		if n != 1 || first != th {
			t.Fatalf("[second episode] expected 1 fire at %s, got %d at %s", th, n, first)
		}

		// Delivered and cleared: the row goes away entirely.
		ep, _ = Decode(store[RuleWaiting])
		ep.Delivered = true
		v, _ := ep.Encode()
		store[RuleWaiting] = v
		fires(clear, time.Second)
		if _, ok := store[RuleWaiting]; ok {
			t.Fatalf("[delivered and cleared] expected no row, got %s", store[RuleWaiting])
		}
	})
}

// TestRestartKeepsOwed: an escalation fired but not delivered survives a
// restart and the condition clearing, and is still due.
func TestRestartKeepsOwed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := episodes{}
		failed := Condition{Active: true, Incarnation: "i1", Since: time.Now(), Exact: true}
		if !store.tick(t, RuleFailed, failed, 0) {
			t.Fatal("[failed] expected an immediate fire, got none")
		}
		if store.tick(t, RuleFailed, failed, 0) {
			t.Fatal("[failed again] expected no second fire, got one")
		}
		time.Sleep(time.Minute)
		store = episodes{RuleFailed: store[RuleFailed]} // restart
		store.tick(t, RuleFailed, Condition{Incarnation: "i1"}, 0)
		ep, err := Decode(store[RuleFailed])
		if err != nil {
			t.Fatalf("[owed after clear] expected the row kept, got %v", err)
		}
		if !ep.Owed() || !Due(ep, time.Now()) || ep.Fired() {
			t.Fatalf("[owed after clear] expected owed, due, not fired; got %+v", ep)
		}
	})
}
