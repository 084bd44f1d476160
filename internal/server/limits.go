package server

import (
	"net/http"
	"time"

	"herd/internal/frontdoor"
	"herd/internal/peer"
)

// apiLimits bound the unix socket's requests. Only the daemon's own user
// reaches the socket (0600), agents included: a stuck or slow client is
// dropped, never waited for.
var apiLimits = frontdoor.Limits{
	ReadHeader: 5 * time.Second,
	Read:       30 * time.Second,
	// Write bounds the replies that can be large (sessions, logs,
	// events), to a client that does not read them.
	Write:          time.Minute,
	Idle:           2 * time.Minute,
	MaxHeaderBytes: 64 << 10,
	// MaxBody is the largest body of any route (inject's text, JSON
	// escaped), and some.
	MaxBody: maxInjectBody + 1<<20,
}

// maxInjectBody bounds an inject request's body.
const maxInjectBody = 8 << 20

// HTTPServer returns the server of the daemon's unix socket, serving h
// under the API's limits. Each connection is noted for the peer
// identification (peer.ConnContext): who calls is told at its first
// request.
func HTTPServer(h http.Handler) *http.Server {
	srv := httpServer(h, apiLimits)
	srv.ConnContext = peer.ConnContext
	return srv
}

func httpServer(h http.Handler, l frontdoor.Limits) *http.Server { return l.Server(verbsUnbounded(h)) }

// verbsUnbounded lifts the write deadline of every request that is not a
// read: a verb's reply is small and comes when the verb is done, which
// may be long (a takedown's grace, a rollout, a wait).
func verbsUnbounded(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			frontdoor.Extend(w, 0)
		}
		next.ServeHTTP(w, r)
	})
}
