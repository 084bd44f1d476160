package hosts

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"herd"
	"herd/internal/store"
	"herd/internal/store/sqlite"
)

func TestHeldAt(t *testing.T) {
	sent := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	const d = 20 * time.Second
	cases := []struct {
		name string
		sent time.Time
		now  time.Time
		want bool
	}{
		{"just renewed", sent, sent, true},
		{"within the lease", sent, sent.Add(d - time.Nanosecond), true},
		{"at its end", sent, sent.Add(d), false},
		{"past its end", sent, sent.Add(time.Hour), false},
		{"never renewed", time.Time{}, sent, false},
	}
	for _, c := range cases {
		if got := HeldAt(c.sent, d, c.now); got != c.want {
			t.Errorf("[%s] expected %v, got %v", c.name, c.want, got)
		}
	}
}

func TestReleased(t *testing.T) {
	db := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	const margin = 20 * time.Second
	cases := []struct {
		name  string
		until time.Time
		want  bool
	}{
		{"lease running", db.Add(time.Second), false},
		{"just ended", db, false},
		{"ended, within the margin", db.Add(-margin), false},
		{"ended past the margin", db.Add(-margin - time.Nanosecond), true},
		{"never held one", time.Time{}, true},
	}
	for _, c := range cases {
		if got := Released(herd.Host{Name: "h", LeaseUntil: c.until}, db, margin); got != c.want {
			t.Errorf("[%s] expected %v, got %v", c.name, c.want, got)
		}
	}
}

func TestFenceTimings(t *testing.T) {
	cases := []struct {
		name                             string
		timeout, lease, grace            time.Duration
		wantEvery, wantGrace, wantMargin time.Duration
	}{
		{"defaults", 30 * time.Second, 20 * time.Second, 5 * time.Second, 5 * time.Second, 5 * time.Second, 20 * time.Second},
		{"long lease", 30 * time.Second, 2 * time.Minute, 5 * time.Second, 10 * time.Second, 5 * time.Second, 2 * time.Minute},
		{"short lease", 3 * time.Second, 2 * time.Second, 5 * time.Second, 500 * time.Millisecond, 500 * time.Millisecond, 2 * time.Second},
		{"shortest lease", 3 * time.Second, time.Second, 100 * time.Millisecond, 250 * time.Millisecond, 100 * time.Millisecond, time.Second},
	}
	for _, c := range cases {
		if got := RenewEvery(c.timeout, c.lease); got != c.wantEvery {
			t.Errorf("[%s] renew every: expected %v, got %v", c.name, c.wantEvery, got)
		}
		if got := FenceGrace(c.lease, c.grace); got != c.wantGrace {
			t.Errorf("[%s] fence grace: expected %v, got %v", c.name, c.wantGrace, got)
		}
		if got := Margin(c.lease); got != c.wantMargin {
			t.Errorf("[%s] margin: expected %v, got %v", c.name, c.wantMargin, got)
		}
		// The fenced stop fits in the margin with room for the rounds
		// that notice the lease lost.
		if g := FenceGrace(c.lease, c.grace); g > Margin(c.lease)/2 {
			t.Errorf("[%s] fence grace %v leaves too little of the margin %v", c.name, g, Margin(c.lease))
		}
	}
}

// TestHeartbeatRenewsLease: each beat renews the lease in the store, by
// the store's clock, and the lease is held from when the beat was sent;
// a beat that fails leaves it to run out.
func TestHeartbeatRenewsLease(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "herd.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	const d = 10 * time.Second
	lease := NewLease(d)
	if lease.Tried() || lease.Held(time.Now()) {
		t.Fatalf("[new lease] expected not tried and not held")
	}
	hb, err := NewHeartbeat(st, herd.Host{Name: "a"}, time.Hour, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	hb.Renews(lease)
	before := time.Now()
	if err := hb.beat(ctx); err != nil {
		t.Fatal(err)
	}
	after := time.Now()
	if !lease.Tried() || !lease.Held(after) {
		t.Fatalf("[renewed] expected held")
	}
	if lease.Held(after.Add(d)) {
		t.Errorf("[renewed] expected the lease to end at most %v after the beat was sent", d)
	}
	var h herd.Host
	if err := st.View(ctx, func(tx store.Tx) error { h, err = tx.Host("a"); return err }); err != nil {
		t.Fatal(err)
	}
	if h.LeaseUntil.Before(before.Add(d)) || h.LeaseUntil.After(after.Add(d)) {
		t.Errorf("[stored lease] expected between %v and %v, got %v", before.Add(d), after.Add(d), h.LeaseUntil)
	}
	// The store goes away: the beat fails, the lease is not renewed.
	st.Close()
	if err := hb.beat(ctx); err == nil {
		t.Fatalf("[store closed] expected the beat to fail")
	}
	if !lease.Held(after) || lease.Held(after.Add(d)) {
		t.Errorf("[failed beat] expected the lease to run out from the last renewal")
	}
}
