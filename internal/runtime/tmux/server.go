package tmux

import (
	"fmt"
	"sync"

	"golang.org/x/sys/unix"

	"herd"
	"herd/internal/proc"
	"herd/internal/runtime/tmux/serverproof"
)

// label is the socket name tmux uses for this client: -L, or "default".
func (c *Client) label() string {
	if c.Socket == "" {
		return "default"
	}
	return c.Socket
}

// NudgeServer sends SIGCHLD to pid, which makes a tmux server reap a pane
// process whose exit it missed, only once pid is proven to be the tmux
// server listening on this client's socket (see serverproof.Verify) and then
// through proc.Signal's pidfd check. Otherwise it sends nothing and returns
// why. It is the one place herd signals a tmux server.
func (c *Client) NudgeServer(pid int) error {
	bootID, err := proc.BootID()
	if err != nil {
		return fmt.Errorf("tmux: nudge server: %w", err)
	}
	fs := proc.Real()
	if id, ok := c.server.get(pid, bootID); ok {
		// Proven before: the same process (pid, start time, boot id,
		// checked again by proc.Signal while a pidfd pins it) still
		// holds the socket it was proven to hold, and reading its fd
		// table again (thousands of descriptors with as many sessions)
		// would put tens of milliseconds on every death it reports.
		if err := proc.Signal(fs, id, bootID, unix.SIGCHLD); err == nil {
			return nil
		}
		c.server.forget(id)
	}
	id, err := serverproof.Verify(fs, c.label(), pid, bootID)
	if err != nil {
		return fmt.Errorf("tmux: nudge server: %w", err)
	}
	if err := proc.Signal(fs, id, bootID, unix.SIGCHLD); err != nil {
		return err
	}
	c.server.set(id)
	return nil
}

// provenServer remembers the identity of the server last proven to hold
// the client's socket.
type provenServer struct {
	mu sync.Mutex
	id herd.Identity
}

func (p *provenServer) get(pid int, bootID string) (herd.Identity, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.id, p.id.PID == pid && p.id.BootID == bootID
}

func (p *provenServer) set(id herd.Identity) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.id = id
}

func (p *provenServer) forget(id herd.Identity) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.id == id {
		p.id = herd.Identity{}
	}
}
