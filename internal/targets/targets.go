// Package targets resolves what a verb on many sessions names (names, a
// role, every session, a -l selector) to session names. It is pure: the
// API's broadcast inject, its wait and the MCP server's guard rails call
// it on a listing they read themselves.
package targets

import (
	"fmt"
	"slices"
	"strings"

	"herd/internal/api"
	"herd/internal/selector"
)

// LabelKeys are the keys a session selector may use.
var LabelKeys = []string{"role", "state", "activity", "runtime", "host"}

// Labels are a session's labels for a selector.
func Labels(v api.SessionView) map[string]string {
	return map[string]string{
		"role": v.Role, "state": string(v.State), "activity": string(v.Activity),
		"runtime": v.RuntimeKind, "host": v.Host,
	}
}

// Check reports what is wrong with t before any listing is read: nothing
// named, names mixed with a group, a selector that does not parse.
func Check(t api.Targets) (selector.Selector, error) {
	group := t.Role != "" || t.All || t.Selector != ""
	switch {
	case len(t.Names) == 0 && !group:
		return nil, fmt.Errorf("no sessions named: give NAMEs, a role, all, or a selector")
	case len(t.Names) > 0 && (t.All || t.Selector != ""):
		return nil, fmt.Errorf("give NAMEs or a group (all, a selector), not both")
	}
	sel, err := selector.Parse(t.Selector, LabelKeys)
	if err != nil {
		return nil, fmt.Errorf("selector: %w", err)
	}
	return sel, nil
}

// Resolve returns the names of the sessions in views that t names, by
// name, and the names t gives that views lack. Names are taken as given;
// a role, all or a selector keep the managed, unarchived sessions that
// match (keep, when not nil, narrows them further: e.g. the live ones).
func Resolve(views []api.SessionView, t api.Targets, keep func(api.SessionView) bool) (names, missing []string, err error) {
	sel, err := Check(t)
	if err != nil {
		return nil, nil, err
	}
	if len(t.Names) > 0 {
		for _, n := range t.Names {
			if slices.Contains(names, n) || slices.Contains(missing, n) {
				continue
			}
			if slices.ContainsFunc(views, func(v api.SessionView) bool { return v.Name == n }) {
				names = append(names, n)
			} else {
				missing = append(missing, n)
			}
		}
		if t.Role != "" {
			// NAMEs and a role: both name the sessions (herd wait w-0 --role r).
			more, _, err := Resolve(views, api.Targets{Role: t.Role}, keep)
			if err != nil {
				return nil, nil, err
			}
			for _, n := range more {
				if !slices.Contains(names, n) {
					names = append(names, n)
				}
			}
		}
		slices.Sort(names)
		return names, missing, nil
	}
	for _, v := range views {
		if v.Unmanaged || v.Archived || (t.Role != "" && v.Role != t.Role) || !sel.Match(Labels(v)) {
			continue
		}
		if keep != nil && !keep(v) {
			continue
		}
		names = append(names, v.Name)
	}
	slices.Sort(names)
	return names, nil, nil
}

// Describe says what t names, for messages: "role worker", "every session",
// "-l state=idle", "w-0, w-1".
func Describe(t api.Targets) string {
	var parts []string
	if len(t.Names) > 0 {
		parts = append(parts, strings.Join(t.Names, ", "))
	}
	if t.Role != "" {
		parts = append(parts, "role "+t.Role)
	}
	if t.Selector != "" {
		parts = append(parts, "-l "+t.Selector)
	}
	if t.All && len(parts) == 0 {
		parts = append(parts, "every session")
	}
	return strings.Join(parts, ", ")
}
