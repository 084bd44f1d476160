package slots

import (
	"fmt"

	"herd"
)

// ownsRole reports whether this host's daemon reconciles r: the role was
// declared here, or before roles recorded their host.
func (sl *Slots) ownsRole(r herd.Role) bool {
	return r.Host == "" || r.Host == sl.st.Host()
}

// ownedRoles keeps the roles this host reconciles.
func (sl *Slots) ownedRoles(roles []herd.Role) []herd.Role {
	out := roles[:0:0]
	for _, r := range roles {
		if sl.ownsRole(r) {
			out = append(out, r)
		}
	}
	return out
}

// OtherHostError means a session or role belongs to another host's daemon:
// only that daemon acts on it.
type OtherHostError struct {
	What, Name, Host string
}

func (e *OtherHostError) Error() string {
	return fmt.Sprintf("%s %s runs on host %s; its daemon acts on it", e.What, e.Name, e.Host)
}

// checkRoleHost refuses to redeclare an unplaced role another host
// declared: its sessions run there, and two daemons must never reconcile
// one role.
func (sl *Slots) checkRoleHost(existing herd.Role) error {
	// A placed role runs wherever the placement leader puts it: any
	// daemon may redeclare it.
	if sl.ownsRole(existing) || existing.Placed() {
		return nil
	}
	return Badf("apply: role %s is declared on host %s; apply it there, or delete it there first", existing.Name, existing.Host)
}
