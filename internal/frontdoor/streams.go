package frontdoor

import (
	"fmt"
	"net"
	"sync"
)

// Streams caps long-lived streams (server-sent events): at most
// PerClient from one client address, and Total in all.
type Streams struct {
	PerClient int
	Total     int

	// mu guards the fields below.
	mu sync.Mutex
	// by counts the streams open by client host.
	by map[string]int
	// n counts the streams open.
	n int
}

// ErrStreams is a stream refused by a cap; Client tells which.
type ErrStreams struct {
	// Client: the client's own cap was reached, not the total.
	Client bool
	Limit  int
}

func (e *ErrStreams) Error() string {
	if e.Client {
		return fmt.Sprintf("too many event streams from this address (limit %d): close a tab of the console", e.Limit)
	}
	return fmt.Sprintf("too many event streams open (limit %d)", e.Limit)
}

// Open counts a stream from remote (a RemoteAddr, host:port) in, or
// refuses it; release, called once, counts it out.
func (s *Streams) Open(remote string) (release func(), err error) {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.Total > 0 && s.n >= s.Total {
		return nil, &ErrStreams{Limit: s.Total}
	}
	if s.PerClient > 0 && s.by[host] >= s.PerClient {
		return nil, &ErrStreams{Client: true, Limit: s.PerClient}
	}
	if s.by == nil {
		s.by = map[string]int{}
	}
	s.by[host]++
	s.n++
	var once sync.Once
	return func() { once.Do(func() { s.close(host) }) }, nil
}

func (s *Streams) close(host string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n--
	if s.by[host]--; s.by[host] <= 0 {
		delete(s.by, host)
	}
}
