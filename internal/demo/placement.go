package demo

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"time"

	"herd"
	"herd/internal/api"
)

// hostOf is the host of session name when it is in state st, else "".
func hostOf(views []api.SessionView, name string, st herd.State) string {
	for _, v := range views {
		if v.Name == name && v.State == st {
			return v.Host
		}
	}
	return ""
}

// showPlacement prints each placed role's slots and their hosts, as the
// placement leader assigned them.
func showPlacement(ctx context.Context, o Options, c *api.Client) error {
	var roles []api.RoleView
	if err := c.Do(ctx, http.MethodGet, "/v1/roles", nil, nil, &roles); err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	fmt.Fprintf(o.Out, "-- placement\n%-7s %-18s %-9s %s\n", "ROLE", "HOSTS", "FAILOVER", "SLOTS")
	for _, r := range roles {
		p := r.Placement
		if p == nil {
			continue
		}
		hosts := "any (spread)"
		if len(p.Hosts) > 0 {
			hosts = fmt.Sprint(p.Hosts)
		}
		names := make([]string, 0, len(p.Slots))
		for n := range p.Slots {
			names = append(names, n)
		}
		sort.Strings(names)
		slots := ""
		for _, n := range names {
			slots += n + "=" + p.Slots[n] + " "
		}
		fmt.Fprintf(o.Out, "%-7s %-18s %-9v %s\n", r.Name, hosts, p.Failover, slots)
	}
	fmt.Fprintln(o.Out)
	return nil
}

// waitMoved waits for the stopped event (reason moved) of session's copy
// on the host it moved from.
func waitMoved(ctx context.Context, c *api.Client, session string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		var evs []herd.Event
		q := url.Values{"session": {session}, "kind": {herd.EventStopped}}
		if err := c.Do(ctx, http.MethodGet, "/v1/events", q, nil, &evs); err != nil {
			return fmt.Errorf("demo: %w", err)
		}
		for _, e := range evs {
			if e.Reason == herd.ReasonMoved {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("demo: %s's old copy was not stopped within %v", session, timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}
