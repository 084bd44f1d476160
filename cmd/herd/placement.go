package main

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"herd/internal/api"
)

// placementText is the Placement line of `describe role`: the placement
// keys, then each assigned slot and its host, by index.
func placementText(p *api.PlacementView) string {
	var b strings.Builder
	switch {
	case p.Spread && len(p.Hosts) == 0:
		b.WriteString("spread over every live host")
	case p.Spread:
		fmt.Fprintf(&b, "spread over %s", strings.Join(p.Hosts, ", "))
	default:
		fmt.Fprintf(&b, "on the first live host of %s", strings.Join(p.Hosts, ", "))
	}
	if p.Failover {
		b.WriteString("; failover")
	}
	names := make([]string, 0, len(p.Slots))
	for n := range p.Slots {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool { return slotIndex(names[i]) < slotIndex(names[j]) })
	if len(names) == 0 {
		b.WriteString("; no slot assigned yet")
	}
	for i, n := range names {
		sep := ", "
		if i == 0 {
			sep = "; slots: "
		}
		fmt.Fprintf(&b, "%s%s=%s", sep, n, p.Slots[n])
	}
	return b.String()
}

// slotIndex is the index of a session name (role-index), -1 if none.
func slotIndex(name string) int {
	i := strings.LastIndexByte(name, '-')
	n, err := strconv.Atoi(name[i+1:])
	if i < 0 || err != nil {
		return -1
	}
	return n
}

// placementShort is the PLACEMENT column of get roles in a fleet: the
// placement keys of a placed role ("spread", "hosts=b,a", "failover"),
// "-" for a role that runs where it was declared.
func placementShort(p *api.PlacementView) string {
	if p == nil {
		return "-"
	}
	var parts []string
	if p.Spread {
		parts = append(parts, "spread")
	}
	if len(p.Hosts) > 0 {
		parts = append(parts, "hosts="+strings.Join(p.Hosts, ","))
	}
	if p.Failover {
		parts = append(parts, "failover")
	}
	return strings.Join(parts, " ")
}
