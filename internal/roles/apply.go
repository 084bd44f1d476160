package roles

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"time"

	"herd"
	"herd/internal/config"
	"herd/internal/errs"
	"herd/internal/rollout"
	"herd/internal/slots"
	"herd/internal/status"
	"herd/internal/store"
)

// ApplyOptions shape an Apply.
type ApplyOptions struct {
	// Inherit names, by role, the restart keys taken from the daemon's
	// [restart] defaults (a file without a [restart] table).
	Inherit map[string][]string
	// DryRun reports what would change and writes nothing.
	DryRun bool
}

// Role change actions.
const (
	RoleCreated    = "created"
	RoleConfigured = "configured"
	RoleUnchanged  = "unchanged"
)

// RoleChange says what an apply did (or would do) to one role.
type RoleChange struct {
	Role   string `json:"role"`
	Action string `json:"action"` // created, configured, unchanged
	// Changed lists the fields that changed, e.g. "replicas 2 -> 3",
	// "command", "env".
	Changed []string `json:"changed,omitempty"`
	// Outdated counts the live sessions the change leaves on an older
	// command, workdir or env (herd rollout restart replaces them).
	Outdated int `json:"outdated,omitempty"`
	// Rearmed counts the failed sessions the apply re-arms.
	Rearmed int `json:"rearmed,omitempty"`
}

// RestartDefaults returns the [restart] defaults roles inherit.
func (r *Roles) RestartDefaults() herd.RestartPolicy {
	r.defs.mu.Lock()
	defer r.defs.mu.Unlock()
	return r.defs.p
}

// SetRestartDefaults changes the [restart] defaults roles applied from
// now on inherit (herd reload).
func (r *Roles) SetRestartDefaults(p herd.RestartPolicy) {
	r.defs.mu.Lock()
	defer r.defs.mu.Unlock()
	r.defs.p = p
}

// Apply validates every role, then upserts them all in one transaction
// (nothing is half-applied) and reports what changed per role. Restart
// fields left zero by a client that did not resolve them (herd run), and
// those named in o.Inherit, take the daemon's [restart] defaults. Failed
// sessions of an applied role that changed re-arm.
func (r *Roles) Apply(ctx context.Context, roles []herd.Role, o ApplyOptions) ([]RoleChange, error) {
	defaults := r.RestartDefaults()
	seen := map[string]bool{}
	for i, ro := range roles {
		if keys, ok := o.Inherit[ro.Name]; ok {
			var err error
			if ro, err = config.Inherit(ro, keys, defaults); err != nil {
				return nil, errs.Badf("apply: %v", err)
			}
		}
		if ro.Restart.InitialBackoff == 0 {
			// Not resolved by the client (herd run): take the daemon's
			// defaults. A resolved role keeps max_restarts = 0 (unlimited).
			ro = config.ResolveRole(ro, defaults)
		}
		if err := config.ValidateRole(ro); err != nil {
			return nil, errs.Badf("apply: role %d: %v", i, err)
		}
		if seen[ro.Name] {
			return nil, errs.Badf("apply: duplicate role %q", ro.Name)
		}
		seen[ro.Name] = true
		roles[i] = ro
	}
	var changes []RoleChange
	write := func(tx store.Tx, rearm status.Rearm) error {
		changes = changes[:0] // the function may run again (a serialization retry)
		sessions, err := tx.SessionsOnHost(r.st.Host())
		if err != nil {
			return err
		}
		for _, ro := range roles {
			old, err := tx.Role(ro.Name)
			exists := err == nil
			if err != nil && !errors.Is(err, store.ErrNotFound) {
				return err
			}
			if exists {
				// Only the host that declared a role reconciles it.
				if err := r.checkRoleHost(old); err != nil {
					return err
				}
			}
			ro.Host = r.st.Host()
			c := diffRole(old, ro, exists)
			for _, s := range sessions {
				if s.Role != ro.Name || s.Host != r.st.Host() {
					continue
				}
				if s.State == herd.StateFailed {
					c.Rearmed++
				}
				if c.Action != RoleConfigured || s.Incarnation == "" {
					continue
				}
				if inc, err := tx.Incarnation(s.Incarnation); err == nil && rollout.Judge(s, inc.Template, ro).Outdated {
					c.Outdated++
				}
			}
			changes = append(changes, c)
			if o.DryRun {
				continue
			}
			ro.UpdatedAt = time.Now().UTC()
			if err := tx.PutRole(ro); err != nil {
				return err
			}
			if err := rearm(ro.Name); err != nil {
				return err
			}
		}
		return nil
	}
	var err error
	if o.DryRun {
		err = r.st.Store().View(ctx, func(tx store.Tx) error { return write(tx, nil) })
	} else if err = r.st.WriteRoles(ctx, write); err == nil {
		r.o.Slots.Kick()
	}
	return changes, err
}

// diffRole says what applying ro does to old (absent when !exists).
func diffRole(old, ro herd.Role, exists bool) RoleChange {
	c := RoleChange{Role: ro.Name, Action: RoleCreated}
	if !exists {
		return c
	}
	if old.Replicas != ro.Replicas {
		c.Changed = append(c.Changed, fmt.Sprintf("replicas %d -> %d", old.Replicas, ro.Replicas))
	}
	field := func(name string, a, b any) {
		if !reflect.DeepEqual(a, b) {
			c.Changed = append(c.Changed, name)
		}
	}
	field("command", old.Command, ro.Command)
	field("workdir", old.Workdir, ro.Workdir)
	if !maps.Equal(old.Env, ro.Env) && (len(old.Env) > 0 || len(ro.Env) > 0) {
		c.Changed = append(c.Changed, "env")
	}
	field("runtime", old.Runtime, ro.Runtime)
	field("agent", old.Agent, ro.Agent)
	field("agent_process", old.AgentProcess, ro.AgentProcess)
	field("restart", old.Restart, ro.Restart)
	field("worktree", []any{old.Worktree, old.WorktreeBase, old.WorktreeSetup, old.WorktreeInclude},
		[]any{ro.Worktree, ro.WorktreeBase, ro.WorktreeSetup, ro.WorktreeInclude})
	field("limits", []int64{old.MemoryMax, old.PidsMax}, []int64{ro.MemoryMax, ro.PidsMax})
	field("restart_on_update", old.RestartOnUpdate, ro.RestartOnUpdate)
	field("resume_on_crash", old.ResumesOnCrash(), ro.ResumesOnCrash())
	field("auto_continue", old.ContinuesAfterReset(), ro.ContinuesAfterReset())
	field("manages", old.Manages, ro.Manages)
	field("mcp", old.MCP, ro.MCP)
	if !slices.Equal(old.Hosts, ro.Hosts) || old.Spread != ro.Spread || old.Failover != ro.Failover {
		c.Changed = append(c.Changed, "placement")
	}
	c.Changed = slices.Clip(c.Changed)
	if len(c.Changed) == 0 {
		c.Action = RoleUnchanged
	} else {
		c.Action = RoleConfigured
	}
	return c
}

// checkRoleHost refuses to redeclare an unplaced role another host
// declared: its sessions run there, and two daemons must never reconcile
// one role.
func (r *Roles) checkRoleHost(existing herd.Role) error {
	// A placed role runs wherever the placement leader puts it: any
	// daemon may redeclare it.
	if slots.OwnsRole(existing, r.st.Host()) || existing.Placed() {
		return nil
	}
	return errs.Badf("apply: role %s is declared on host %s; apply it there, or delete it there first", existing.Name, existing.Host)
}
