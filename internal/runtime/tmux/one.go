package tmux

import (
	"context"
	"errors"

	"herd/internal/runtime"
)

// ListSession lists the panes of session name alone (`list-panes -s -t
// =name:`): the cost of one session, whatever the number of others on
// the server. A session that does not exist is a good listing without it;
// no server is an error wrapping ErrNoServer, as for ListPanes. A dead
// pane whose exit tmux has not reported gets the server nudged and the
// session listed once more, as ListPanes does.
func (c *Client) ListSession(ctx context.Context, name string) ([]Pane, error) {
	panes, err := c.listSession(ctx, name)
	if err != nil {
		return nil, err
	}
	pid := unreportedExitServer(panes)
	if pid == 0 || c.NudgeServer(pid) != nil {
		return panes, nil
	}
	if again, err := c.listSession(ctx, name); err == nil {
		return again, nil
	}
	return panes, nil
}

func (c *Client) listSession(ctx context.Context, name string) ([]Pane, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	out, err := c.run(ctx, nil, []string{"list-panes", "-s", "-t", target(name), "-F", paneFormat})
	if errors.Is(err, ErrNoSession) || errors.Is(err, ErrEmptyServer) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return ParsePanes(out), nil
}

// ObserveSession lists session name alone, for a death its agent's pidfd
// proved: the snapshot holds that session's panes only (none when it is
// gone), so only that session may be decided from it. It does not wait
// for, nor hold back, the full listing.
func (r *Runtime) ObserveSession(ctx context.Context, name string) runtime.Snapshot {
	last := r.lastServer()
	panes, err := r.client.ListSession(ctx, name)
	return r.remember(Parse(panes, err, last))
}
