package main

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"herd/internal/api"
)

// hostRE is what a host name may be: a hostname or a daemon.host value.
var hostRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,252}$`)

// checkHost rejects a --host value that could never name a host.
func checkHost(what, host string) error {
	if !hostRE.MatchString(host) {
		return fmt.Errorf("%s %q is not a host name (letters, digits, '.', '-', '_')", what, host)
	}
	return nil
}

// spansHosts reports whether sessions run on more than one host: a listing
// of them shows a HOST column.
func spansHosts(views []api.SessionView) bool {
	for _, v := range views {
		if v.Host != views[0].Host {
			return true
		}
	}
	return false
}

// rolesSpanHosts reports whether the roles' sessions run on more than one
// host.
func rolesSpanHosts(views []api.RoleView) bool {
	seen := map[string]bool{}
	for _, v := range views {
		for h := range v.Hosts {
			seen[h] = true
		}
	}
	return len(seen) > 1
}

// filterRolesOnHost keeps the roles with a session on host, their counts
// narrowed to that host's sessions; every role when host is "".
func filterRolesOnHost(views []api.RoleView, host string) []api.RoleView {
	if host == "" {
		return views
	}
	kept := []api.RoleView{}
	for _, v := range views {
		c, ok := v.Hosts[host]
		if !ok {
			continue
		}
		v.Live, v.Ready = c.Live, c.Ready
		v.Hosts = map[string]api.RoleCount{host: c}
		kept = append(kept, v)
	}
	return kept
}

// roleHostsText is the HOSTS column of a role: each host with its live
// sessions, e.g. "a:2,b:1".
func roleHostsText(v api.RoleView) string {
	if len(v.Hosts) == 0 {
		return "-"
	}
	parts := make([]string, 0, len(v.Hosts))
	for _, h := range slices.Sorted(maps.Keys(v.Hosts)) {
		parts = append(parts, fmt.Sprintf("%s:%d", h, v.Hosts[h].Live))
	}
	return strings.Join(parts, ",")
}

// fleetHosts reports whether the daemon's store knows more than one host:
// event listings then show a HOST column. A daemon that cannot say (an
// older one) is taken as alone.
func fleetHosts(ctx context.Context, g *globals) bool {
	var hosts []api.HostView
	if err := getJSON(ctx, g, "/v1/hosts", &hosts); err != nil {
		return false
	}
	return len(hosts) > 1
}
