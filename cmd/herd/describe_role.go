package main

import (
	"fmt"
	"io"
	"net/url"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"herd"
	"herd/internal/accounts"
	"herd/internal/api"
	"herd/internal/cells"

	"github.com/spf13/cobra"
)

// roleEventsPerSession bounds the events fetched per session for
// `describe role`; the merged list keeps the newest roleEvents.
const (
	roleEventsPerSession = 10
	roleEvents           = 20
)

// roleDetail is `herd describe role NAME -o json`: the role as in
// `get roles -o json`, its sessions as in `get sessions -o json`, and its
// sessions' recent events, oldest first.
type roleDetail struct {
	api.RoleView
	Sessions     []api.SessionView `json:"sessions"`
	RecentEvents []herd.Event      `json:"recent_events"`
}

func newDescribeRoleCmd(g *globals) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:               "role NAME",
		Aliases:           []string{"roles", "r"},
		Short:             "A role's template, replicas, sessions and their recent events",
		Args:              roleArg,
		ValidArgsFunction: completeRoles(g),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput("describe role", output, "json", "yaml"); err != nil {
				return err
			}
			ctx, name := cmd.Context(), args[0]
			var roles []api.RoleView
			if err := getJSON(ctx, g, "/v1/roles", &roles); err != nil {
				return err
			}
			i := slices.IndexFunc(roles, func(r api.RoleView) bool { return r.Name == name })
			if i < 0 {
				return fmt.Errorf("role %s not found", name)
			}
			det := roleDetail{RoleView: roles[i], Sessions: []api.SessionView{}, RecentEvents: []herd.Event{}}
			var sessions []api.SessionView
			if err := getJSON(ctx, g, "/v1/sessions", &sessions); err != nil {
				return err
			}
			for _, s := range sessions {
				if s.Role != name {
					continue
				}
				det.Sessions = append(det.Sessions, s)
				q := url.Values{"session": {s.Name}, "limit": {fmt.Sprint(roleEventsPerSession)}}
				var evs []herd.Event
				if err := g.do(ctx, "GET", "/v1/events", q, nil, &evs); err != nil {
					return err
				}
				det.RecentEvents = append(det.RecentEvents, evs...)
			}
			sort.SliceStable(det.RecentEvents, func(a, b int) bool { return det.RecentEvents[a].ID < det.RecentEvents[b].ID })
			if n := len(det.RecentEvents); n > roleEvents {
				det.RecentEvents = det.RecentEvents[n-roleEvents:]
			}
			switch output {
			case "json":
				return writeJSON(cmd.OutOrStdout(), det)
			case "yaml":
				return writeYAML(cmd.OutOrStdout(), det)
			}
			return printRoleDetail(cmd.OutOrStdout(), det, time.Now())
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: json | yaml (default: text)")
	return cmd
}

func printRoleDetail(w io.Writer, d roleDetail, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 4, 1, ' ', 0)
	kv := func(k string, v any) { fmt.Fprintf(tw, "%s:\t%v\n", k, v) }
	kv("Name", d.Name)
	kv("Replicas", fmt.Sprintf("%d desired, %d live, %d running", d.Replicas, d.Live, d.Ready))
	kv("Runtime", cells.Dash(d.Runtime))
	agent := cells.Dash(d.Agent)
	if d.AgentProcess != "" {
		agent += " (process " + d.AgentProcess + ")"
	}
	kv("Agent", agent)
	kv("Command", strings.Join(d.Command, " "))
	kv("Workdir", cells.Dash(d.Workdir))
	// Values may be secrets: names only, as `describe` of a pod does for
	// secret-backed variables.
	names := make([]string, 0, len(d.Env))
	for k := range d.Env {
		names = append(names, k)
	}
	slices.Sort(names)
	kv("Env", cells.Dash(strings.Join(names, ", ")))
	r := d.Restart
	kv("Restart", fmt.Sprintf("policy %s, max restarts %d, backoff %s..%s, reset after %s", cells.Dash(r.Policy), r.MaxRestarts, r.InitialBackoff, r.MaxBackoff, r.ResetAfter))
	kv("Account", accounts.Of(d.Role))
	if d.DailyBudgetUSD > 0 {
		kv("Budget", budgetText(d.DailyBudgetUSD, d.BudgetHard))
	}
	if p := d.Placement; p != nil {
		kv("Placement", placementText(p))
	}
	if !d.UpdatedAt.IsZero() {
		kv("Updated", cells.Clock(d.UpdatedAt, now))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "Sessions:")
	if len(d.Sessions) == 0 {
		fmt.Fprintln(w, "  none")
	} else {
		var b strings.Builder
		if err := printSessions(&b, d.Sessions, printOpts{now: now, fleet: spansHosts(d.Sessions)}); err != nil {
			return err
		}
		for line := range strings.SplitSeq(strings.TrimRight(b.String(), "\n"), "\n") {
			fmt.Fprintln(w, "  "+line)
		}
	}
	fmt.Fprintln(w, "Events:")
	if len(d.RecentEvents) == 0 {
		fmt.Fprintln(w, "  none")
		return nil
	}
	ew := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(ew, "  TIME\tSESSION\tKIND\tREASON\tMESSAGE")
	for _, e := range d.RecentEvents {
		fmt.Fprintf(ew, "  %s\t%s\t%s\t%s\t%s\n", cells.Clock(e.Time, now), cells.Dash(e.Session), e.Kind, cells.Dash(e.Reason), e.Message)
	}
	return ew.Flush()
}
