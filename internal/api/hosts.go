package api

import "time"

// HostView is one row of `herd get hosts -o json`: a daemon of the fleet.
type HostView struct {
	Name string `json:"name"`
	// Daemon is "up" (heartbeat within fleet.host_timeout) or "stale".
	Daemon string `json:"daemon"`
	// Sessions counts the host's sessions that count toward replicas.
	Sessions    int        `json:"sessions"`
	HeartbeatAt *time.Time `json:"heartbeat_at"` // null: never recorded
	StartedAt   *time.Time `json:"started_at"`
	BootID      string     `json:"boot_id"`
	Version     string     `json:"version"`
	// Self marks the host of the daemon that answered.
	Self bool `json:"self"`
	// Leader marks the daemon that assigns placed roles' slots to hosts
	// (the placement leader), while it is up.
	Leader bool `json:"leader"`
}

// RoleCount is a role's sessions on one host.
type RoleCount struct {
	Ready int `json:"ready"` // sessions running
	Live  int `json:"live"`  // sessions holding a replica
}
