package slots

import (
	"fmt"

	"herd"
	"herd/internal/errs"
)

// ownsRole reports whether this host's daemon reconciles r: the role was
// declared here, or before roles recorded their host.
func (sl *Slots) ownsRole(r herd.Role) bool {
	return OwnsRole(r, sl.st.Host())
}

// OwnsRole reports whether host's daemon reconciles r: the role was
// declared there, or before roles recorded their host.
func OwnsRole(r herd.Role, host string) bool {
	return r.Host == "" || r.Host == host
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

// ErrKind: a conflict (another host's daemon acts on it).
func (e *OtherHostError) ErrKind() errs.Kind { return errs.Conflict }
