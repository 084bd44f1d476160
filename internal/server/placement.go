package server

import (
	"herd"
	"herd/internal/api"
	"herd/internal/store"
)

// placements returns, by role, the placement view of each placed role;
// a store with no placed role pays no query.
func placements(tx store.Tx, roles []herd.Role) (map[string]*api.PlacementView, error) {
	out := map[string]*api.PlacementView{}
	for _, r := range roles {
		if r.Placed() {
			hosts := r.Hosts
			if hosts == nil {
				hosts = []string{}
			}
			out[r.Name] = &api.PlacementView{Hosts: hosts, Spread: r.Spread, Failover: r.Failover, Slots: map[string]string{}}
		}
	}
	if len(out) == 0 {
		return out, nil
	}
	ps, err := tx.Placements()
	if err != nil {
		return nil, err
	}
	for _, p := range ps {
		if v, ok := out[p.Role]; ok {
			v.Slots[herd.SessionName(p.Role, p.Index)] = p.Host
		}
	}
	return out, nil
}
