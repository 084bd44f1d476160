package web

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"time"

	"herd"
	"herd/internal/status"
)

// Changes is how the console learns that the fleet changed. The hub
// polls the Backend for it; a subscription to the one writer of session
// state can take its place.
type Changes interface {
	// Subscribe returns a channel that receives each change, and its
	// cancel.
	Subscribe() (<-chan Change, func())
}

// Change is one thing the browsers are told: the fleet changed
// (Sessions), or an event was appended (Event).
type Change struct {
	Sessions bool
	Event    *herd.Event
}

// hub polls the fleet and the event log and fans what changed out to the
// subscribed browsers.
type hub struct {
	backend Backend
	every   time.Duration
	log     *slog.Logger
	// local, when set, subscribes to this host's committed changes, each
	// of which is read at once.
	local func() (<-chan status.Change, func())

	// mu guards the fields below.
	mu   sync.Mutex
	subs map[chan Change]struct{}
}

var _ Changes = (*hub)(nil)

func newHub(b Backend, every time.Duration, log *slog.Logger) *hub {
	return &hub{backend: b, every: every, log: log, subs: map[chan Change]struct{}{}}
}

// minGap spaces the reads that local changes trigger.
const minGap = 100 * time.Millisecond

// subBuffer bounds what a slow browser may fall behind; past it, changes
// are dropped for it (a sessions change is re-read whole anyway).
const subBuffer = 256

// Subscribe implements Changes.
func (h *hub) Subscribe() (<-chan Change, func()) {
	c := make(chan Change, subBuffer)
	h.mu.Lock()
	h.subs[c] = struct{}{}
	h.mu.Unlock()
	return c, func() {
		h.mu.Lock()
		delete(h.subs, c)
		h.mu.Unlock()
	}
}

// listened reports whether a browser is subscribed.
func (h *hub) listened() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.subs) > 0
}

func (h *hub) publish(c Change) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.subs {
		select {
		case s <- c:
		default:
		}
	}
}

// run polls until ctx is done. A panic in a poll is logged and the loop
// goes on.
func (h *hub) run(ctx context.Context) {
	t := time.NewTicker(h.every)
	defer t.Stop()
	var changed <-chan status.Change
	if h.local != nil {
		c, cancel := h.local()
		defer cancel()
		changed = c
	}
	var last []byte
	cursor := int64(-1)
	for {
		if h.listened() {
			last, cursor = h.poll(ctx, last, cursor)
		} else {
			// Nobody listens: nothing is read. The next listener
			// starts from the newest event.
			last, cursor = nil, -1
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case _, ok := <-changed:
			if !ok {
				changed = nil
				continue
			}
			// A burst of changes (an agent printing) is read once, at
			// most minGap late.
			select {
			case <-ctx.Done():
				return
			case <-time.After(minGap):
			}
			drain(changed)
		}
	}
}

// drain takes what else is queued in c: one read serves them all.
func drain(c <-chan status.Change) {
	for c != nil {
		select {
		case _, ok := <-c:
			if !ok {
				return
			}
		default:
			return
		}
	}
}

// poll reads the fleet and the new events once, publishing what changed.
func (h *hub) poll(ctx context.Context, last []byte, cursor int64) (_ []byte, _ int64) {
	defer func() {
		if p := recover(); p != nil {
			h.log.Error("web: poll panicked", "panic", p)
		}
	}()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if raw, err := sessionsRaw(ctx, h.backend); err == nil {
		if !bytes.Equal(raw, last) {
			// The first read after an idle spell is published too: a
			// change between a new page's own read and this one would
			// otherwise be taken as the baseline, and never shown.
			h.publish(Change{Sessions: true})
			last = raw
		}
	}
	if cursor < 0 {
		evs, err := h.backend.Events(ctx, EventQuery{Limit: 1})
		if err != nil {
			return last, cursor
		}
		cursor = 0
		if len(evs) > 0 {
			cursor = evs[len(evs)-1].ID
		}
		return last, cursor
	}
	evs, err := h.backend.Events(ctx, EventQuery{After: cursor, Limit: 500})
	if err != nil {
		return last, cursor
	}
	for i := range evs {
		h.publish(Change{Event: &evs[i]})
		cursor = evs[i].ID
	}
	return last, cursor
}

// marshal is json.Marshal for values that always encode.
func marshal(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}
