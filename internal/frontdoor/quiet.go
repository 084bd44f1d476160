package frontdoor

import (
	"sync"
	"time"
)

// Quiet bounds how often a refusal is logged: a client that is refused
// thousands of times a second must not fill the daemon's log. The zero
// value logs at most once per 10 s.
type Quiet struct {
	// Every is the least time between two log lines; 10 s when 0.
	Every time.Duration

	// mu guards the fields below.
	mu sync.Mutex
	// logged is when a line was last allowed.
	logged time.Time
	// quiet counts the refusals not logged since.
	quiet int
}

// Allow reports whether this refusal is logged now, and how many were
// not logged since the last line.
func (q *Quiet) Allow() (ok bool, unlogged int) {
	every := q.Every
	if every <= 0 {
		every = 10 * time.Second
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	now := time.Now()
	if !q.logged.IsZero() && now.Sub(q.logged) < every {
		q.quiet++
		return false, 0
	}
	unlogged, q.quiet, q.logged = q.quiet, 0, now
	return true, unlogged
}
