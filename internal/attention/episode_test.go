package attention

import (
	"errors"
	"strings"
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
	fired.Channels = map[string]*Delivery{"webhook": {Done: true, Attempts: 1}}
	owed := fired
	owed.Channels = map[string]*Delivery{"webhook": {Attempts: 2, LastError: "webhook: 500", Next: at(time.Hour)}}
	owed.Message = &Message{Title: "old"}

	firedAt := func(ep Episode, now time.Time) Episode {
		ep.FiredAt = &now
		ep.EventID, ep.Message, ep.Channels = 0, nil, nil
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
	delivered := map[string]*Delivery{"webhook": {Done: true}}
	owed := map[string]*Delivery{"webhook": {Done: true}, "command": {Attempts: 1}}
	cases := []struct {
		name     string
		ep       Episode
		keepOwed bool
		want     bool
	}{
		{"zero", Episode{}, true, false},
		{"open", Episode{Open: true}, true, true},
		{"open, owed not kept", Episode{Open: true}, false, true},
		{"closed, delivered", Episode{EventID: 3, FiredAt: ptr(at(0)), Channels: delivered}, true, false},
		{"closed, no channel", Episode{EventID: 3, FiredAt: ptr(at(0))}, true, false},
		{"closed, owed", Episode{EventID: 3, FiredAt: ptr(at(0)), Channels: owed}, true, true},
		{"closed, owed, goes with the need", Episode{FiredAt: ptr(at(0)), Channels: owed}, false, false},
		{"closed, never fired", Episode{Since: at(0), Channels: owed}, true, false},
	}
	for _, c := range cases {
		if got := c.ep.Keep(c.keepOwed); got != c.want {
			t.Errorf("[%s] expected keep %v, got %v", c.name, c.want, got)
		}
	}
}

func TestKeys(t *testing.T) {
	for _, tr := range []Track{TrackEscalation, TrackNotify} {
		for _, r := range rulesOf(tr) {
			gotTr, s, got, ok := ParseKey(Key(tr, "worker-12", r))
			if !ok || gotTr != tr || s != "worker-12" || got != r {
				t.Errorf("[%s %s] expected %s worker-12 %s true, got %q %q %q %v", tr, r, tr, r, gotTr, s, got, ok)
			}
		}
	}
	for _, bad := range []string{"", "escalation/", "escalation/x", "escalation//waiting", "escalation/x/", "other/x/waiting", IndexKey("h"),
		"notify/h" /* the notify episodes' former row */} {
		if _, _, _, ok := ParseKey(bad); ok {
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

func TestEscalationMessage(t *testing.T) {
	ep := Episode{Since: at(0)}
	msg, data := Escalation(RuleWaiting, ep, 30*time.Minute, at(31*time.Minute))
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
		next = Fire(next, []string{"webhook"})
		next.EventID = int64(len(s) + 100)
	}
	if !next.Keep(true) {
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
		ep.Channels["webhook"].Done = true
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
		if at, due := ep.Due(); !ep.Owed() || !due || at.After(time.Now()) || ep.Fired() {
			t.Fatalf("[owed after clear] expected owed, due, not fired; got %+v", ep)
		}
	})
}

func TestNeedOf(t *testing.T) {
	cases := []struct {
		state    herd.State
		activity herd.Activity
		want     Rule
	}{
		{herd.StateRunning, herd.ActivityWaiting, RuleWaiting},
		{herd.StateRunning, herd.ActivityBlocked, RuleBlocked},
		{herd.StateRunning, herd.ActivityWorking, ""},
		{herd.StateRunning, herd.ActivityIdle, ""},
		{herd.StateUnknown, herd.ActivityWaiting, RuleWaiting},
		{herd.StateStalled, herd.ActivityWorking, RuleStalled},
		{herd.StateFailed, herd.ActivityUnknown, RuleFailed},
		{herd.StateBackoff, herd.ActivityWaiting, ""}, // dead: nothing to answer
		{herd.StateStopped, herd.ActivityWaiting, ""},
		{herd.StateSucceeded, herd.ActivityIdle, ""},
	}
	for _, c := range cases {
		got := NeedOf(herd.Session{State: c.state, Activity: c.activity})
		if got != c.want {
			t.Errorf("[%s/%s] expected %q, got %q", c.state, c.activity, c.want, got)
		}
	}
}

// TestEvaluateNeed: the notify track's episodes, one per need of a
// session, through the same Evaluate: debounced by after (inclusive),
// fired once, a new need or incarnation is a new episode, and a need
// gone takes its episode (and what it owed) with it.
func TestEvaluateNeed(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	fired := t0.Add(time.Second)
	open := Episode{Open: true, Incarnation: "i1", Since: t0}
	done := Episode{Open: true, Incarnation: "i1", Since: t0, FiredAt: &fired, Channels: map[string]*Delivery{"ntfy": {}}}
	waiting := func(inc string) herd.Session {
		return herd.Session{Incarnation: inc, State: herd.StateRunning, Activity: herd.ActivityWaiting}
	}
	blocked := herd.Session{Incarnation: "i1", State: herd.StateRunning, Activity: herd.ActivityBlocked}
	working := herd.Session{Incarnation: "i1", State: herd.StateRunning, Activity: herd.ActivityWorking}
	cases := []struct {
		name      string
		s         herd.Session
		rule      Rule
		ep        Episode
		now       time.Time
		after     time.Duration
		wantKeep  bool
		wantFire  bool
		wantSince time.Time
	}{
		{"nothing needed", working, RuleWaiting, Episode{}, t0, 0, false, false, time.Time{}},
		{"need gone closes, owed dropped", working, RuleWaiting, done, t0, 0, false, false, t0},
		{"fires at once with after 0", waiting("i1"), RuleWaiting, Episode{}, t0, 0, true, true, t0},
		{"debounced", waiting("i1"), RuleWaiting, Episode{}, t0, 2 * time.Second, true, false, t0},
		{"debounce not over", waiting("i1"), RuleWaiting, open, t0.Add(1999 * time.Millisecond), 2 * time.Second, true, false, t0},
		{"debounce over, inclusive", waiting("i1"), RuleWaiting, open, t0.Add(2 * time.Second), 2 * time.Second, true, true, t0},
		{"fires once", waiting("i1"), RuleWaiting, done, t0.Add(time.Hour), 0, true, false, t0},
		{"another need closes this one", blocked, RuleWaiting, done, t0.Add(time.Hour), 0, false, false, t0},
		{"new need is a new episode", blocked, RuleBlocked, Episode{}, t0.Add(time.Hour), 0, true, true, t0.Add(time.Hour)},
		{"new incarnation is a new episode", waiting("i2"), RuleWaiting, done, t0.Add(time.Hour), 0, true, true, t0.Add(time.Hour)},
	}
	for _, c := range cases {
		fire, next := Evaluate(ObserveNeed(c.s, c.rule), c.ep, c.now, c.after)
		if keep := next.Keep(keepOwed(TrackNotify)); keep != c.wantKeep || fire != c.wantFire {
			t.Errorf("[%s] expected (keep=%v, fire=%v), got (%v, %v) %+v", c.name, c.wantKeep, c.wantFire, keep, fire, next)
			continue
		}
		if !next.Since.Equal(c.wantSince) {
			t.Errorf("[%s] expected since %s, got %s", c.name, c.wantSince, next.Since)
		}
	}
}

func TestFire(t *testing.T) {
	ep := Fire(Episode{Open: true, FiredAt: ptr(at(0))}, []string{"command", "webhook"})
	want := map[string]*Delivery{"command": {}, "webhook": {}}
	if diff := cmp.Diff(want, ep.Channels); diff != "" {
		t.Errorf("[two channels] (-expected +got):\n%s", diff)
	}
	if at, ok := ep.Due(); !ok || !at.IsZero() {
		t.Errorf("[two channels] expected due at once, got %s %v", at, ok)
	}
	if ep := Fire(ep, nil); ep.Channels != nil || ep.Owed() {
		t.Errorf("[no channel] expected nothing owed, got %+v", ep)
	}
}

func TestEpisodeDue(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	ep := Episode{Open: true, FiredAt: &t0, Channels: map[string]*Delivery{
		"a": {Done: true},
		"b": {Next: t0.Add(4 * time.Second)},
		"c": {Next: t0.Add(2 * time.Second)},
	}}
	if at, ok := ep.Due(); !ok || !at.Equal(t0.Add(2*time.Second)) {
		t.Errorf("[two pending] expected due at +2s, got %s %v", at, ok)
	}
	ep.Channels["b"].Done, ep.Channels["c"].Done = true, true
	if _, ok := ep.Due(); ok {
		t.Error("[all done] expected nothing due once every channel is done")
	}
	if _, ok := (Episode{Open: true}).Due(); ok {
		t.Error("[not fired] expected nothing due before the episode fires")
	}
	owed := Episode{FiredAt: &t0, Channels: map[string]*Delivery{"webhook": {}}}
	if _, ok := owed.Due(); !ok {
		t.Error("[closed, owed] expected an escalation owed after its condition cleared to be due")
	}
}

func TestBackoff(t *testing.T) {
	cases := []struct {
		attempts int
		lo, hi   time.Duration
		want     time.Duration
	}{
		{1, time.Second, 5 * time.Minute, time.Second},
		{2, time.Second, 5 * time.Minute, 2 * time.Second},
		{3, time.Second, 5 * time.Minute, 4 * time.Second},
		{9, time.Second, 5 * time.Minute, 256 * time.Second},
		{10, time.Second, 5 * time.Minute, 5 * time.Minute},
		{1000, time.Second, 5 * time.Minute, 5 * time.Minute},
		{0, time.Second, 5 * time.Minute, time.Second},
		{-3, time.Second, 5 * time.Minute, time.Second},
		{1, 0, 0, BackoffMin},
		{4, 10 * time.Millisecond, 50 * time.Millisecond, 50 * time.Millisecond},
		{3, time.Minute, time.Second, time.Minute},
	}
	for _, c := range cases {
		if got := Backoff(c.attempts, c.lo, c.hi); got != c.want {
			t.Errorf("[attempts %d, %s..%s] expected %s, got %s", c.attempts, c.lo, c.hi, c.want, got)
		}
	}
}

func TestRecord(t *testing.T) {
	now := at(0)
	boom := errors.New("boom")
	cases := []struct {
		name string
		d    Delivery
		err  error
		once bool
		want Delivery
	}{
		{"succeeds", Delivery{}, nil, false, Delivery{Done: true, Attempts: 1}},
		{"once, succeeds", Delivery{}, nil, true, Delivery{Done: true, Attempts: 1}},
		{"once, fails: recorded, not retried", Delivery{}, boom, true, Delivery{Done: true, Attempts: 1, LastError: "boom"}},
		{"fails: retried with backoff", Delivery{}, boom, false, Delivery{Attempts: 1, LastError: "boom", Next: now.Add(time.Second)}},
		{"third failure backs off 4s", Delivery{Attempts: 2, LastError: "boom", Next: now}, boom, false,
			Delivery{Attempts: 3, LastError: "boom", Next: now.Add(4 * time.Second)}},
		{"succeeds later: error cleared", Delivery{Attempts: 2, LastError: "boom", Next: now}, nil, false, Delivery{Done: true, Attempts: 3}},
		{"long error clipped", Delivery{}, errors.New(strings.Repeat("x", 600)), true,
			Delivery{Done: true, Attempts: 1, LastError: strings.Repeat("x", 512) + "..."}},
	}
	for _, c := range cases {
		got := Record(c.d, c.err, c.once, now, time.Second, 5*time.Minute)
		if diff := cmp.Diff(c.want, got); diff != "" {
			t.Errorf("[%s] (-expected +got):\n%s", c.name, diff)
		}
	}
}
