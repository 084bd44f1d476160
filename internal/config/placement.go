package config

import (
	"fmt"
	"strings"

	"herd"
)

// rolePlacement decodes a role's placement keys (hosts, spread, failover)
// into r; it reports a hosts value that cannot be decoded and returns
// whether it decoded.
func rolePlacement(r *herd.Role, f fileRole, report func(problem)) (hostsOK bool) {
	set(&r.Spread, f.Spread)
	set(&r.Failover, f.Failover)
	if f.Hosts == nil {
		return true
	}
	hosts, p := stringsOf(f.Hosts, "hosts")
	if p != nil {
		report(*p)
		return false
	}
	if len(hosts) > 0 {
		r.Hosts = hosts
	}
	return true
}

// MaxHostName bounds a host name in a role's hosts list.
const MaxHostName = 253

// placementProblems checks a role's placement keys.
func placementProblems(r herd.Role) []problem {
	var probs []problem
	seen := map[string]int{}
	for i, h := range r.Hosts {
		key := fmt.Sprintf("hosts[%d]", i)
		switch {
		case h == "":
			probs = append(probs, problem{[]string{key, "hosts"}, "must be a non-empty host name"})
		case len(h) > MaxHostName:
			probs = append(probs, problem{[]string{key, "hosts"}, fmt.Sprintf("host name longer than %d bytes", MaxHostName)})
		case strings.ContainsFunc(h, func(c rune) bool { return c <= ' ' || c == 0x7f }):
			probs = append(probs, problem{[]string{key, "hosts"}, fmt.Sprintf("%q contains white space or a control character", h)})
		default:
			if first, dup := seen[h]; dup {
				probs = append(probs, problem{[]string{key, "hosts"}, fmt.Sprintf("%q is listed twice (hosts[%d])", h, first)})
				continue
			}
			seen[h] = i
		}
	}
	if r.Failover && !r.Placed() {
		probs = append(probs, problem{[]string{"failover"}, "needs hosts or spread = true: a role without placement runs only on the host that declared it"})
	}
	return probs
}
