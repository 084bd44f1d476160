package worktree

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"
)

// DefaultStatusTTL is how long a cached Status serves views: about a probe
// tick, so listing sessions does not run git for every request.
const DefaultStatusTTL = 2 * time.Second

// statusTimeout bounds the git calls of one Status for a view.
const statusTimeout = 2 * time.Second

// StatusCache serves the Status of session worktrees to views (get
// sessions -o wide, describe), reading each again at most once per TTL.
// Lookups of the same session while one runs wait for it instead of
// running git twice. Its zero value needs M.
type StatusCache struct {
	M   *Manager
	TTL time.Duration // 0 is DefaultStatusTTL

	mu      sync.Mutex // guards the fields below
	entries map[string]*statusEntry
}

// statusEntry is one session's cached Status.
type statusEntry struct {
	done chan struct{} // closed once st and err are set
	at   time.Time
	st   *Status // nil: no worktree (or it could not be read)
	err  error
}

// Get returns the Status of opts.Session's worktree, nil when it has none
// or it cannot be read within the timeout (the error says why).
func (c *StatusCache) Get(ctx context.Context, opts Options) (*Status, error) {
	ttl := c.TTL
	if ttl <= 0 {
		ttl = DefaultStatusTTL
	}
	key := opts.Workdir + "\x00" + opts.Session
	c.mu.Lock()
	if c.entries == nil {
		c.entries = map[string]*statusEntry{}
	}
	e, ok := c.entries[key]
	fresh := ok && (!isDone(e) || time.Since(e.at) < ttl)
	if !fresh {
		e = &statusEntry{done: make(chan struct{})}
		c.entries[key] = e
	}
	c.mu.Unlock()
	if !fresh {
		c.read(opts, e)
	}
	select {
	case <-e.done:
		return e.st, e.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// read fills e with a fresh Status, bounded by statusTimeout.
func (c *StatusCache) read(opts Options, e *statusEntry) {
	ctx, cancel := context.WithTimeout(context.Background(), statusTimeout)
	defer cancel()
	st, err := c.M.Status(ctx, opts)
	switch {
	case err == nil:
		e.st = &st
	case errors.Is(err, ErrNoWorktree):
		// None yet (a launch to come): no error to report.
	default:
		e.err = err
	}
	e.at = time.Now()
	close(e.done)
}

// Forget drops what is cached of sessions keep does not claim.
func (c *StatusCache) Forget(keep func(session string) bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := range c.entries {
		_, session, _ := strings.Cut(k, "\x00")
		if !keep(session) {
			delete(c.entries, k)
		}
	}
}

func isDone(e *statusEntry) bool {
	select {
	case <-e.done:
		return true
	default:
		return false
	}
}
