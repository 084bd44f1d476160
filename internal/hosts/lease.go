package hosts

import (
	"sync"
	"time"

	"herd"
)

// Lease is this daemon's hold on its host row, as the daemon itself can
// tell it without the store: held for the lease's duration from the
// moment the last renewal that committed was sent. The store sets the
// row's lease_until from its own clock when the renewal commits, which is
// after it was sent, so the lease as held here always ends first: a
// daemon that stops its failover agents when Held turns false has done
// so before any other host may judge the lease ended (Released).
type Lease struct {
	d time.Duration

	mu sync.Mutex // guards the fields below
	// sent is when the last committed renewal was sent (a reading of
	// this process's clock, monotonic); zero before the first.
	sent time.Time
	// tried is set once a first renewal has committed or failed.
	tried bool
}

// NewLease returns a lease of duration d, not held until renewed.
func NewLease(d time.Duration) *Lease { return &Lease{d: d} }

// Duration is the lease's length (fleet.lease).
func (l *Lease) Duration() time.Duration { return l.d }

// Renewed records a renewal that committed, sent at sent.
func (l *Lease) Renewed(sent time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.tried = true
	if sent.After(l.sent) {
		l.sent = sent
	}
}

// Failed records a renewal that did not commit.
func (l *Lease) Failed() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.tried = true
}

// Tried reports whether a renewal has been tried to its end: before that,
// a daemon just started cannot tell a lost lease from one not yet renewed.
func (l *Lease) Tried() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.tried
}

// Held reports whether the lease is held at now (a reading of this
// process's clock).
func (l *Lease) Held(now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return HeldAt(l.sent, l.d, now)
}

// HeldAt is the lease decision: a lease of duration d whose last
// committed renewal was sent at sent (zero: never renewed) is held at now
// while less than d has passed since.
func HeldAt(sent time.Time, d time.Duration, now time.Time) bool {
	return !sent.IsZero() && now.Sub(sent) < d
}

// Margin is how long after a host's lease ended, by the database's
// clock, its failover slots may move: the lease again, which covers the
// fenced host's stop (FenceGrace, a quarter of it) and the rounds that
// notice the lease lost, whatever the stop grace configured.
func Margin(lease time.Duration) time.Duration { return lease }

// FenceGrace is the grace between SIGTERM and SIGKILL of a fenced stop:
// grace, at most a quarter of the lease, so that the agent is gone well
// within Margin.
func FenceGrace(lease, grace time.Duration) time.Duration {
	return min(grace, lease/4)
}

// RenewEvery is how often a daemon beats and renews its lease: Interval
// of the host timeout, or four times per lease when that is sooner.
func RenewEvery(hostTimeout, lease time.Duration) time.Duration {
	return min(Interval(hostTimeout), max(lease/4, 100*time.Millisecond))
}

// Released reports whether a host's failover slots may move at dbNow (the
// database's clock): its lease ended more than margin ago, or it never
// held one (a daemon from before leases: its heartbeat alone is judged).
func Released(h herd.Host, dbNow time.Time, margin time.Duration) bool {
	return h.LeaseUntil.IsZero() || dbNow.Sub(h.LeaseUntil) > margin
}
