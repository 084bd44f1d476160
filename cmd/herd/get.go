package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"herd/internal/api"
	"herd/internal/redraw"
	"herd/internal/selector"

	"github.com/spf13/cobra"
)

// Selector keys of `get sessions -l` and `get roles -l`.
var (
	sessionLabelKeys = []string{"role", "state", "activity", "runtime", "host"}
	roleLabelKeys    = []string{"role", "runtime", "agent", "policy"}
)

// getFlags are the flags `get sessions` and `get roles` share.
type getFlags struct {
	output    string
	watch     bool
	selector  string
	role      string
	host      string
	noHeaders bool
}

func (f *getFlags) add(c *cobra.Command) {
	c.Flags().StringVarP(&f.output, "output", "o", "", "output format: wide | json | yaml | name (default: a table)")
	c.Flags().BoolVarP(&f.watch, "watch", "w", false, "watch: on a terminal, the list redrawn in place each second; into a pipe, the list again whenever it changes (no terminal codes)")
	c.Flags().StringVarP(&f.selector, "selector", "l", "", "only items matching key=value[,key!=value...], keys: "+strings.Join(labelKeys(c.Name()), ", "))
	c.Flags().StringVar(&f.role, "role", "", "only this role's items (same as -l role=ROLE)")
	c.Flags().BoolVar(&f.noHeaders, "no-headers", false, "print tables without their header line")
	c.Flags().StringVar(&f.host, "host", "", "only this host's items (same as -l host=HOST)")
}

func labelKeys(resource string) []string {
	switch resource {
	case "roles":
		return roleLabelKeys
	case "hosts":
		return hostLabelKeys
	}
	return sessionLabelKeys
}

// parse checks the flags and returns the selector they spell together.
func (f *getFlags) parse(resource string) (selector.Selector, error) {
	if err := checkOutput("get "+resource, f.output, "wide", "json", "yaml", "name"); err != nil {
		return nil, err
	}
	sel, err := selector.Parse(f.selector, labelKeys(resource))
	if err != nil {
		return nil, fmt.Errorf("get %s: -l: %w", resource, err)
	}
	if f.role != "" {
		if err := checkRole("get "+resource+": --role", f.role); err != nil {
			return nil, err
		}
		sel = append(sel, selector.Requirement{Key: "role", Value: f.role})
	}
	if f.host != "" {
		if err := checkHost("get "+resource+": --host", f.host); err != nil {
			return nil, err
		}
		if resource != "roles" { // roles are narrowed by filterRolesOnHost
			sel = append(sel, selector.Requirement{Key: "host", Value: f.host})
		}
	}
	return sel, nil
}

func newGetCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "get sessions|roles|hosts|tasks [NAME...]",
		Short: "List sessions, roles, hosts or tasks",
	}
	var sf, rf getFlags
	var showArchived bool
	sessions := &cobra.Command{
		Use:     "sessions [NAME...]",
		Aliases: []string{"session", "sess", "s"},
		Short:   "List sessions: state, both liveness axes, activity, restarts",
		Example: `  herd get sessions
  herd get sessions worker-0 worker-1
  herd get sessions -l role=worker,state!=running -o wide
  herd get sessions --role worker -o name
  herd get sessions --show-archived
  herd get sessions -w`,
		Args:              namesArg(checkSession),
		ValidArgsFunction: completeSessions(g),
		RunE: func(cmd *cobra.Command, args []string) error {
			sel, err := sf.parse("sessions")
			if err != nil {
				return err
			}
			return runGet(cmd, sf, func(ctx context.Context) (listing, error) {
				var views []api.SessionView
				if err := getJSON(ctx, g, "/v1/sessions", &views); err != nil {
					return listing{}, err
				}
				fleet := sf.host != "" || spansHosts(views)
				views, missing := filterSessions(views, args, sel)
				hidden := 0
				if !showArchived && len(args) == 0 {
					matched := len(views)
					views = withoutArchived(views)
					hidden = matched - len(views)
				}
				return listing{kind: "session", items: views, missing: missing, fleet: fleet, hidden: hidden, print: func(w io.Writer, o printOpts) error {
					return printSessions(w, views, o)
				}, names: sessionNames(views), notice: storeAwayNotice(ctx, g)}, nil
			})
		},
	}
	roles := &cobra.Command{
		Use:               "roles [NAME...]",
		Aliases:           []string{"role", "r"},
		Short:             "List roles with desired and live replicas",
		Args:              namesArg(checkRole),
		ValidArgsFunction: completeRoles(g),
		RunE: func(cmd *cobra.Command, args []string) error {
			sel, err := rf.parse("roles")
			if err != nil {
				return err
			}
			return runGet(cmd, rf, func(ctx context.Context) (listing, error) {
				var views []api.RoleView
				if err := getJSON(ctx, g, "/v1/roles", &views); err != nil {
					return listing{}, err
				}
				fleet := rf.host != "" || rolesSpanHosts(views)
				views = filterRolesOnHost(views, rf.host)
				views, missing := filterRoles(views, args, sel)
				return listing{kind: "role", items: views, missing: missing, fleet: fleet, print: func(w io.Writer, o printOpts) error {
					return printRoles(w, views, o)
				}, names: roleNames(views)}, nil
			})
		},
	}
	sf.add(sessions)
	sessions.Flags().BoolVar(&showArchived, "show-archived", false, "list archived sessions too (marked ARCHIVED); a session named is always shown")
	rf.add(roles)
	for _, c := range []*cobra.Command{sessions, roles} {
		c.RegisterFlagCompletionFunc("role", completeRoles(g))
		c.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{"wide", "json", "yaml", "name"}, cobra.ShellCompDirectiveNoFileComp))
	}
	cmd.AddCommand(sessions, roles, newGetHostsCmd(g), newGetTasksCmd(g))
	requireSubcommand(cmd, "resource")
	return cmd
}

// namesArg is a cobra.PositionalArgs: any number of names, each checked.
func namesArg(check func(cmd, name string) error) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		for _, a := range args {
			if err := check(cmdPath(cmd), a); err != nil {
				return err
			}
		}
		return nil
	}
}

// listing is one fetch of a list, ready to print.
type listing struct {
	kind    string // "session", "role", "host" or "task"
	items   any    // what -o json and yaml print
	names   []string
	missing []string // names asked for and not found
	print   func(io.Writer, printOpts) error
	fleet   bool // the items span hosts: tables get a HOST column
	hidden  int  // archived sessions matching, left out
	// notice is a line said on stderr, whatever the format (the store
	// away: the listing is this host's live set).
	notice string
}

// render writes the listing in the chosen format. A table with no rows is
// "No sessions found." on info (stderr when printing once, kubectl's habit).
func (l listing) render(w, info io.Writer, f getFlags) error {
	switch f.output {
	case "json":
		return writeJSON(w, l.items)
	case "yaml":
		return writeYAML(w, l.items)
	case "name":
		for _, n := range l.names {
			fmt.Fprintln(w, l.kind+"/"+n)
		}
		return nil
	}
	if len(l.names) == 0 {
		fmt.Fprintf(info, "No %ss found.\n", l.kind)
		return nil
	}
	return l.print(w, printOpts{wide: f.output == "wide", noHeaders: f.noHeaders, now: time.Now(), fleet: l.fleet})
}

// err reports the names asked for that do not exist, after the rest was
// printed (as kubectl does).
func (l listing) err() error {
	if len(l.missing) == 0 {
		return nil
	}
	return fmt.Errorf("%s %s not found", l.kind, strings.Join(l.missing, ", "))
}

// runGet prints the listing once, or, with -w, again whenever it changes.
func runGet(cmd *cobra.Command, f getFlags, fetch func(context.Context) (listing, error)) error {
	ctx, out := cmd.Context(), cmd.OutOrStdout()
	if !f.watch {
		l, err := fetch(ctx)
		if err != nil {
			return err
		}
		if err := l.render(out, cmd.ErrOrStderr(), f); err != nil {
			return err
		}
		if l.hidden > 0 && (f.output == "" || f.output == "wide") {
			fmt.Fprintf(cmd.ErrOrStderr(), "(%d archived session(s) not shown; --show-archived lists them)\n", l.hidden)
		}
		if l.notice != "" {
			fmt.Fprintln(cmd.ErrOrStderr(), l.notice)
		}
		return l.err()
	}
	return watchLoop(ctx, out, redraw.Of(out), time.Second, func() ([]byte, func(io.Writer) error, error) {
		l, err := fetch(ctx)
		if err != nil {
			return nil, nil, err
		}
		key, err := json.Marshal(l.items)
		if err != nil {
			return nil, nil, err
		}
		return key, func(w io.Writer) error {
			if err := l.render(w, w, f); err != nil {
				return err
			}
			if err := l.err(); err != nil {
				fmt.Fprintln(w, err)
			}
			return nil
		}, nil
	})
}

// sessionLabels are what -l matches a session against.
func sessionLabels(v api.SessionView) map[string]string {
	return map[string]string{
		"role": v.Role, "state": string(v.State), "activity": string(v.Activity),
		"runtime": v.RuntimeKind, "host": v.Host,
	}
}

// withoutArchived drops the archived sessions: done with, they are listed
// only when asked for (--show-archived, or by name).
func withoutArchived(views []api.SessionView) []api.SessionView {
	return slices.DeleteFunc(slices.Clone(views), func(v api.SessionView) bool { return v.Archived })
}

// filterSessions keeps the sessions named (all when names is empty) that
// match sel, in the order listed, and returns the names not found.
func filterSessions(views []api.SessionView, names []string, sel selector.Selector) (kept []api.SessionView, missing []string) {
	kept = []api.SessionView{}
	for _, v := range views {
		if (len(names) == 0 || slices.Contains(names, v.Name)) && sel.Match(sessionLabels(v)) {
			kept = append(kept, v)
		}
	}
	for _, n := range names {
		if !slices.ContainsFunc(views, func(v api.SessionView) bool { return v.Name == n }) && !slices.Contains(missing, n) {
			missing = append(missing, n)
		}
	}
	return kept, missing
}

func roleLabels(v api.RoleView) map[string]string {
	return map[string]string{"role": v.Name, "runtime": v.Runtime, "agent": v.Agent, "policy": v.Restart.Policy}
}

// filterRoles is filterSessions for roles.
func filterRoles(views []api.RoleView, names []string, sel selector.Selector) (kept []api.RoleView, missing []string) {
	kept = []api.RoleView{}
	for _, v := range views {
		if (len(names) == 0 || slices.Contains(names, v.Name)) && sel.Match(roleLabels(v)) {
			kept = append(kept, v)
		}
	}
	for _, n := range names {
		if !slices.ContainsFunc(views, func(v api.RoleView) bool { return v.Name == n }) && !slices.Contains(missing, n) {
			missing = append(missing, n)
		}
	}
	return kept, missing
}

func sessionNames(views []api.SessionView) []string {
	out := make([]string, len(views))
	for i, v := range views {
		out[i] = v.Name
	}
	return out
}

func roleNames(views []api.RoleView) []string {
	out := make([]string, len(views))
	for i, v := range views {
		out[i] = v.Name
	}
	return out
}

// checkOutput rejects an -o value not among allowed ("" is always fine).
func checkOutput(cmd, output string, allowed ...string) error {
	if output == "" || slices.Contains(allowed, output) {
		return nil
	}
	return fmt.Errorf("%s: unknown output format %q (want %s)", cmd, output, orList(allowed))
}

// storeAwayNotice is the line `herd get` says while the daemon's store is
// away ("": it answers, or the daemon cannot tell).
func storeAwayNotice(ctx context.Context, g *globals) string {
	var h api.Health
	if err := getJSON(ctx, g, "/v1/health", &h); err != nil || h.StoreAwaySince == nil {
		return ""
	}
	since := h.StoreAwaySince.Local()
	return fmt.Sprintf("store away since %s (%s ago): this host's sessions only, from its live set; changes are journaled and written when it is back",
		since.Format("15:04:05"), time.Since(since).Round(time.Second))
}
