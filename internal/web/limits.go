package web

import (
	"net"
	"time"

	"herd/internal/frontdoor"
)

// limits are what the console lets its clients hold: no use of the
// browser port may starve the daemon's supervision (see frontdoor).
type limits struct {
	http frontdoor.Limits
	// conns is the most connections open at a time.
	conns int
	// reserve is how many descriptors the daemon keeps free: the console
	// takes no connection when fewer are, before anything else of the
	// daemon runs short (its socket API, pidfds, the spool, cgroup
	// files, the store).
	reserve int
	// streams caps the event streams, per client address and in all.
	streams frontdoor.Streams
	// streamsRefused bounds the log lines of refused streams.
	streamsRefused frontdoor.Quiet
	// recheck is how often an open event stream of a user's checks that
	// the user still is: a removed user's stream ends within it.
	recheck time.Duration
}

// defaultLimits are the console's limits: room for a few people with a
// few tabs and phones each, far below the descriptors the daemon needs.
func defaultLimits() *limits {
	return &limits{
		http: frontdoor.Limits{
			ReadHeader:     5 * time.Second,
			Read:           30 * time.Second,
			Write:          2 * time.Minute, // an answer or a verb waits for tmux and for takedowns
			Idle:           time.Minute,
			MaxHeaderBytes: 32 << 10,
			MaxBody:        maxBody,
		},
		conns:   128,
		reserve: 256,
		streams: frontdoor.Streams{PerClient: 8, Total: 64},
		recheck: 15 * time.Second,
	}
}

// listen wraps the console's listener in its connection cap and the
// daemon's descriptor reserve.
func (s *Server) listen(ln net.Listener) net.Listener {
	return &frontdoor.Listener{Listener: ln, Max: s.limits.conns, Reserve: s.limits.reserve, Log: s.log, Name: "web"}
}
