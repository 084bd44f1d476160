package daemon

import (
	"context"
	"fmt"
	"strings"

	"herd/internal/api"
	"herd/internal/config"
	"herd/internal/roles"
)

// Reload reads the daemon's config file again (through Options.Load),
// validates it whole, and applies what can change while the daemon runs:
// [restart] (the defaults roles inherit), [watchdog], [reaper],
// [escalation] and [notify], and the file's roles. Changed sections that are bound at
// start ([probe] included: its loop, pid watchers and call timeouts are
// set up once) are named with why, and keep their old values until the
// daemon restarts. A file with any error changes nothing.
func (d *Daemon) Reload(ctx context.Context) (api.ReloadResult, error) {
	d.reloadMu.Lock()
	defer d.reloadMu.Unlock()
	res := api.ReloadResult{Applied: []string{}, NeedsRestart: []api.SectionNote{}, Roles: []api.RoleChange{}}
	if d.load == nil {
		return res, fmt.Errorf("reload: this daemon was started without a config file to read again")
	}
	next, path, err := d.load()
	if err != nil {
		return res, fmt.Errorf("reload: %w (nothing changed)", err)
	}
	res.File = path
	cur := d.live.Load()
	merged := *cur // sections bound at start keep their values
	for _, s := range config.Changed(cur, next) {
		if !s.Live {
			res.NeedsRestart = append(res.NeedsRestart, api.SectionNote{Section: s.Name, Why: s.Why})
			continue
		}
		res.Applied = append(res.Applied, s.Name)
		switch s.Name {
		case "restart":
			merged.Restart = next.Restart
		case "watchdog":
			merged.Watchdog = next.Watchdog
		case "reaper":
			merged.Reaper = next.Reaper
		case "escalation":
			merged.Escalation = next.Escalation
		case "notify":
			merged.Notify = next.Notify
		case "mcp":
			merged.MCP = next.MCP
		}
	}
	merged.Roles = next.Roles
	if len(next.Roles) > 0 {
		changes, err := d.roles.Apply(ctx, next.Roles, roles.ApplyOptions{})
		if err != nil {
			return res, fmt.Errorf("reload: roles: %w (sections not applied)", err)
		}
		for _, c := range changes {
			res.Roles = append(res.Roles, api.RoleChange(c))
		}
	}
	d.live.Store(&merged)
	d.roles.SetRestartDefaults(merged.Restart)
	d.attention.Reconfigure(&merged)
	d.reaper.Reconfigured()
	res.Message = reloadMessage(res)
	d.log.Info("config reloaded", "file", path, "applied", strings.Join(res.Applied, ","),
		"needs_restart", len(res.NeedsRestart), "roles", len(res.Roles))
	return res, nil
}

// reloadMessage sums up a reload in one line.
func reloadMessage(r api.ReloadResult) string {
	var parts []string
	if len(r.Applied) > 0 {
		parts = append(parts, "applied: ["+strings.Join(r.Applied, "], [")+"]")
	}
	if len(r.NeedsRestart) > 0 {
		var names []string
		for _, n := range r.NeedsRestart {
			names = append(names, "["+n.Section+"]")
		}
		parts = append(parts, "needs a daemon restart: "+strings.Join(names, ", "))
	}
	changed := 0
	for _, c := range r.Roles {
		if c.Action != roles.RoleUnchanged {
			changed++
		}
	}
	if len(r.Roles) > 0 {
		parts = append(parts, fmt.Sprintf("%d role(s), %d changed", len(r.Roles), changed))
	}
	if len(parts) == 0 {
		return "config reloaded: nothing changed"
	}
	return "config reloaded: " + strings.Join(parts, "; ")
}
