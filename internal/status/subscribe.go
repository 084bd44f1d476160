package status

import (
	"sync"

	"herd"
)

// What says what a committed change did to a session; a coalesced change
// carries the union.
type What uint16

const (
	// ChangeStarted: a new incarnation was recorded (written ahead of its
	// launch, started, or adopted).
	ChangeStarted What = 1 << iota
	// ChangeState: the session's state (or a probe axis) changed.
	ChangeState
	// ChangeActivity: the activity axis or the last activity time moved.
	ChangeActivity
	// ChangeEnded: the incarnation ended (death, stop, move).
	ChangeEnded
	// ChangeDied: the incarnation's end was accounted as a death (crash
	// accounting); always with ChangeEnded.
	ChangeDied
	// ChangeEvent: events were appended and nothing else changed.
	ChangeEvent
	// ChangeRole: the role's replica count or crash bookkeeping changed
	// (scale, reset, re-arm).
	ChangeRole
	// ChangeIncarnation: the incarnation's record changed (its processes'
	// identities, the agent's own session id).
	ChangeIncarnation
	// ChangeRemoved: the session's row is gone (its role was deleted).
	ChangeRemoved
	// ChangeOutdated: the incarnation's agent binary was replaced on disk
	// (an outdated event, reason binary_updated).
	ChangeOutdated
	// ChangeLeftover: the death's evidence leaves part of the
	// incarnation up (a wrapper living on, a pane left open), for the
	// stop path to take down; always with ChangeDied.
	ChangeLeftover
)

// Has reports whether w holds every bit of x.
func (w What) Has(x What) bool { return w&x == x }

// Change is one committed change of a session, as the writer publishes it
// to every subscriber once its transaction has committed.
type Change struct {
	// Session is the session's name.
	Session string
	// Incarnation is the incarnation the change concerns (for an end, the
	// one that ended).
	Incarnation string
	// What the change did.
	What What
	// State and Activity are the session's after the change.
	State    herd.State
	Activity herd.Activity
}

// merge folds a later change of the same session and incarnation into c.
func (c *Change) merge(later Change) {
	c.What |= later.What
	c.State, c.Activity = later.State, later.Activity
}

// subscriberBuffer is how many changes a subscriber's channel holds
// before the writer coalesces the rest in its queue.
const subscriberBuffer = 16

// subscriber is one subscription: the writer queues into it without ever
// blocking, and its pump hands the queue to the subscriber's channel.
type subscriber struct {
	out  chan Change
	wake chan struct{} // capacity one: the queue has something
	done chan struct{} // closed by cancel

	mu sync.Mutex // guards the fields below
	// queue holds the changes not yet handed over, at most one per
	// session and incarnation (a later one merges into it); at indexes
	// them.
	queue []Change
	at    map[changeKey]int
}

type changeKey struct{ session, inc string }

// hub is the set of subscribers.
type hub struct {
	mu   sync.Mutex // guards subs
	subs map[*subscriber]struct{}
}

// Subscribe returns a channel of every change committed from now on, and
// its cancel (safe to call twice), which closes the channel. The writer
// never waits for a subscriber: while one is slow, its changes of the
// same session and incarnation are merged into one.
func (m *Manager) Subscribe() (<-chan Change, func()) {
	s := &subscriber{
		out:  make(chan Change, subscriberBuffer),
		wake: make(chan struct{}, 1),
		done: make(chan struct{}),
		at:   map[changeKey]int{},
	}
	h := &m.hub
	h.mu.Lock()
	if h.subs == nil {
		h.subs = map[*subscriber]struct{}{}
	}
	h.subs[s] = struct{}{}
	h.mu.Unlock()
	go s.pump()
	var once sync.Once
	return s.out, func() {
		once.Do(func() {
			h.mu.Lock()
			delete(h.subs, s)
			h.mu.Unlock()
			close(s.done)
		})
	}
}

// publish hands committed changes to every subscriber.
func (m *Manager) publish(cs ...Change) {
	if len(cs) == 0 {
		return
	}
	h := &m.hub
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.subs {
		s.add(cs)
	}
}

// add queues cs, merging each into a queued change of its session and
// incarnation.
func (s *subscriber) add(cs []Change) {
	s.mu.Lock()
	for _, c := range cs {
		k := changeKey{c.Session, c.Incarnation}
		if i, ok := s.at[k]; ok {
			s.queue[i].merge(c)
			continue
		}
		s.at[k] = len(s.queue)
		s.queue = append(s.queue, c)
	}
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// pump hands the queue to the subscriber's channel, in order, until
// cancel; it closes the channel when it ends.
func (s *subscriber) pump() {
	defer close(s.out)
	for {
		select {
		case <-s.done:
			return
		case <-s.wake:
		}
		// The whole queue is taken at once: what is committed while it is
		// handed over queues (and coalesces) afresh.
		s.mu.Lock()
		batch := s.queue
		s.queue = nil
		clear(s.at)
		s.mu.Unlock()
		for _, c := range batch {
			select {
			case s.out <- c:
			case <-s.done:
				return
			}
		}
	}
}
