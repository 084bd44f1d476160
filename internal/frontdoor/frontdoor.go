// Package frontdoor holds the limits every HTTP server of the daemon
// (the console, the unix-socket API, metrics) runs under, so that no
// client of a front door can starve supervision: a deadline on every
// phase of a request, bounded headers and bodies, a cap on concurrent
// connections and streams, and a reserve of file descriptors no client
// may take. The daemon's servers are built with it; it never reads or
// acts on sessions.
package frontdoor

import (
	"net/http"
	"time"
)

// Limits bound one HTTP server's requests.
type Limits struct {
	// ReadHeader is how long a client has to send a request's headers.
	ReadHeader time.Duration
	// Read is how long a client has to send a whole request, body
	// included. A handler may work longer: once the body is read,
	// net/http reads on without a deadline (to see the client go).
	Read time.Duration
	// Write is how long a reply may take from the end of its request's
	// headers; a handler that streams lifts it (Stream), one that
	// knows it takes longer extends it (Extend).
	Write time.Duration
	// Idle is how long a kept-alive connection may wait for its next
	// request.
	Idle time.Duration
	// MaxHeaderBytes bounds a request's headers.
	MaxHeaderBytes int
	// MaxBody bounds a request's body: reading past it fails with an
	// *http.MaxBytesError (413).
	MaxBody int64
}

// Server returns an http.Server serving h under l.
func (l Limits) Server(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           l.bound(h),
		ReadHeaderTimeout: l.ReadHeader,
		ReadTimeout:       l.Read,
		WriteTimeout:      l.Write,
		IdleTimeout:       l.Idle,
		MaxHeaderBytes:    l.MaxHeaderBytes,
	}
}

// bound caps every request's body at MaxBody before any handler reads
// it; a body declared larger is refused at once.
func (l Limits) bound(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if l.MaxBody > 0 {
			if r.ContentLength > l.MaxBody {
				http.Error(w, "request body too large", http.StatusRequestEntityTooLarge)
				return
			}
			r.Body = http.MaxBytesReader(w, r.Body, l.MaxBody)
		}
		next.ServeHTTP(w, r)
	})
}

// Stream lifts the write deadline of a handler that streams (server-sent
// events): it runs until its client goes away. Its clients are bounded
// by the caps on streams instead (Streams).
func Stream(w http.ResponseWriter) { Extend(w, 0) }

// Extend gives a handler that is known to take longer than the server's
// write limit (a long poll, a verb that waits) d more from now to reply;
// d <= 0 lifts the deadline.
func Extend(w http.ResponseWriter, d time.Duration) {
	var t time.Time
	if d > 0 {
		t = time.Now().Add(d)
	}
	http.NewResponseController(w).SetWriteDeadline(t)
}
