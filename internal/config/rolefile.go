package config

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	toml "github.com/pelletier/go-toml/v2"

	"herd"
)

// RoleFile is a file of roles for herd apply: its roles, validated whole,
// and, per role, the restart keys it leaves to the daemon's [restart].
type RoleFile struct {
	Roles []herd.Role
	// Inherit names, by role, the restart keys neither the role nor the
	// file's own [restart] set: the daemon fills them from its [restart]
	// defaults, not from the built-in ones.
	Inherit map[string][]string
}

// RestartKeys are the keys of a restart table.
var RestartKeys = []string{"policy", "initial_backoff", "max_backoff", "reset_after", "max_restarts"}

// daemonSections are the tables that configure the daemon itself.
var daemonSections = []string{"daemon", "store", "tmux", "probe", "watchdog", "reaper", "escalation", "notify", "metrics", "mcp", "web", "auto_continue"}

// LoadRoles reads a file for herd apply: it is validated whole like any
// herd.toml, and refused when it configures the daemon (those tables are
// read by the daemon from its own file: herd reload).
func LoadRoles(path string) (*RoleFile, error) {
	cfg, err := Load(path)
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	var top map[string]any
	if err := toml.Unmarshal(data, &top); err != nil {
		return nil, fmt.Errorf("config: %s: %w", path, err) // Load accepted it: not reached
	}
	var daemon []string
	for _, s := range daemonSections {
		if _, ok := top[s]; ok {
			daemon = append(daemon, "["+s+"]")
		}
	}
	if len(daemon) > 0 {
		return nil, fmt.Errorf("apply: %s: %s configure%s the daemon, not roles: put %s in the daemon's config file and run 'herd reload'",
			filepath.Base(path), strings.Join(daemon, ", "), map[bool]string{true: "s", false: ""}[len(daemon) == 1],
			map[bool]string{true: "it", false: "them"}[len(daemon) == 1])
	}
	rf := &RoleFile{Roles: cfg.Roles, Inherit: map[string][]string{}}
	if _, ok := top["restart"]; ok {
		return rf, nil // the file's [restart] is complete over the built-in defaults
	}
	list, _ := top["role"].([]any)
	for i, r := range rf.Roles {
		set := map[string]bool{}
		if i < len(list) {
			if m, ok := list[i].(map[string]any); ok {
				if rt, ok := m["restart"].(map[string]any); ok {
					for k := range rt {
						set[k] = true
					}
				}
			}
		}
		var inherit []string
		for _, k := range RestartKeys {
			if !set[k] {
				inherit = append(inherit, k)
			}
		}
		sort.Strings(inherit)
		if len(inherit) > 0 {
			rf.Inherit[r.Name] = inherit
		}
	}
	return rf, nil
}

// inheritedPolicy is the restart policy role r takes from the [restart]
// default policy: an exec role that takes tasks runs one turn a launch,
// ended by its exit 0, so "always" (which would run each turn again) is
// "on-failure" for it. A role that names "always" itself is refused.
func inheritedPolicy(r herd.Role, policy string) string {
	if r.Tasks && r.Runtime == herd.RuntimeExec && policy == herd.PolicyAlways {
		return herd.PolicyOnFailure
	}
	return policy
}

// Inherit sets the restart keys of r named in keys from defaults.
func Inherit(r herd.Role, keys []string, defaults herd.RestartPolicy) (herd.Role, error) {
	for _, k := range keys {
		switch k {
		case "policy":
			r.Restart.Policy = inheritedPolicy(r, defaults.Policy)
		case "initial_backoff":
			r.Restart.InitialBackoff = defaults.InitialBackoff
		case "max_backoff":
			r.Restart.MaxBackoff = defaults.MaxBackoff
		case "reset_after":
			r.Restart.ResetAfter = defaults.ResetAfter
		case "max_restarts":
			r.Restart.MaxRestarts = defaults.MaxRestarts
		default:
			return r, fmt.Errorf("role %s: %q is not a restart key (%s)", r.Name, k, strings.Join(RestartKeys, ", "))
		}
	}
	return r, nil
}
