package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"herd"
	"herd/internal/api"
)

func newGetCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "get sessions|roles",
		Short: "List sessions or roles",
	}
	var output string
	var watch bool
	add := func(c *cobra.Command) {
		c.Flags().StringVarP(&output, "output", "o", "", "output format: wide | json (default: a table)")
		c.Flags().BoolVarP(&watch, "watch", "w", false, "watch: redraw every second")
	}
	sessions := &cobra.Command{
		Use:     "sessions",
		Aliases: []string{"session", "sess", "s"},
		Short:   "List sessions: state, both liveness axes, activity, restarts",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return repeat(cmd.Context(), watch, cmd.OutOrStdout(), func(w io.Writer) error {
				var views []api.SessionView
				if err := getJSON(cmd.Context(), g, "/v1/sessions", &views); err != nil {
					return err
				}
				return printSessions(w, views, output)
			})
		},
	}
	roles := &cobra.Command{
		Use:     "roles",
		Aliases: []string{"role", "r"},
		Short:   "List roles with desired and live replicas",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return repeat(cmd.Context(), watch, cmd.OutOrStdout(), func(w io.Writer) error {
				var views []api.RoleView
				if err := getJSON(cmd.Context(), g, "/v1/roles", &views); err != nil {
					return err
				}
				return printRoles(w, views, output)
			})
		},
	}
	add(sessions)
	add(roles)
	cmd.AddCommand(sessions, roles)
	requireSubcommand(cmd, "resource")
	return cmd
}

func getJSON(ctx context.Context, g *globals, path string, out any) error {
	c, err := g.client()
	if err != nil {
		return err
	}
	return explain(c.Do(ctx, http.MethodGet, path, nil, nil, out), g)
}

// repeat runs print once, or every second until ctx is done when watching.
func repeat(ctx context.Context, watch bool, w io.Writer, print func(io.Writer) error) error {
	if !watch {
		return print(w)
	}
	for {
		var b strings.Builder
		if err := print(&b); err != nil {
			return err
		}
		fmt.Fprint(w, "\033[H\033[2J"+time.Now().Format("15:04:05")+"\n"+b.String())
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Second):
		}
	}
}

func printSessions(w io.Writer, views []api.SessionView, output string) error {
	switch output {
	case "json":
		return writeJSON(w, views)
	case "", "wide":
	default:
		return fmt.Errorf("unknown output format %q (want wide or json)", output)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	header := "NAME\tROLE\tSTATE\tPROCESS\tACTIVITY\tRESTARTS\tAGE\tLAST-EXIT"
	if output == "wide" {
		header += "\tRUNTIME\tRT-KIND\tPID\tATTACHED\tHOST\tINCARNATION\tBACKOFF-UNTIL"
	}
	fmt.Fprintln(tw, header)
	now := time.Now()
	for _, v := range views {
		state := string(v.State)
		if v.Escalated {
			state += "!"
		}
		if v.Unmanaged {
			state = "unmanaged"
		}
		age := "-"
		if v.StartedAt != nil && v.State.Live() {
			age = shortDur(now.Sub(*v.StartedAt))
		}
		row := fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s", v.Name, dash(v.Role), state, v.Process, v.Activity, v.Restarts, age, lastExit(v.Exit, now))
		if output == "wide" {
			backoff := "-"
			if v.BackoffUntil != nil {
				backoff = v.BackoffUntil.Local().Format("15:04:05.000")
			}
			pid := "-"
			if v.PID > 0 {
				pid = fmt.Sprint(v.PID)
			}
			row += fmt.Sprintf("\t%s\t%s\t%s\t%v\t%s\t%s\t%s", v.Runtime, v.RuntimeKind, pid, v.Attached, v.Host, dash(v.Incarnation), backoff)
		}
		fmt.Fprintln(tw, row)
	}
	return tw.Flush()
}

func printRoles(w io.Writer, views []api.RoleView, output string) error {
	switch output {
	case "json":
		return writeJSON(w, views)
	case "", "wide":
	default:
		return fmt.Errorf("unknown output format %q (want wide or json)", output)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	header := "NAME\tREPLICAS\tLIVE\tRUNNING\tRUNTIME\tAGENT\tPOLICY\tCOMMAND"
	if output == "wide" {
		header += "\tWORKDIR\tMAX-RESTARTS\tBACKOFF"
	}
	fmt.Fprintln(tw, header)
	for _, v := range views {
		row := fmt.Sprintf("%s\t%d\t%d\t%d\t%s\t%s\t%s\t%s", v.Name, v.Replicas, v.Live, v.Ready, v.Runtime, v.Agent, v.Restart.Policy, strings.Join(v.Command, " "))
		if output == "wide" {
			row += fmt.Sprintf("\t%s\t%d\t%s..%s", v.Workdir, v.Restart.MaxRestarts, v.Restart.InitialBackoff, v.Restart.MaxBackoff)
		}
		fmt.Fprintln(tw, row)
	}
	return tw.Flush()
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func lastExit(e *herd.Exit, now time.Time) string {
	if e == nil {
		return "-"
	}
	var what string
	switch {
	case e.Signal != nil:
		what = fmt.Sprintf("signal %d", *e.Signal)
	case e.Code != nil:
		what = fmt.Sprintf("code %d", *e.Code)
	default:
		what = e.Reason
	}
	if e.Reason != "" && e.Reason != herd.ReasonSignal && e.Reason != herd.ReasonExitCode && what != e.Reason {
		what += " (" + e.Reason + ")"
	}
	if !e.At.IsZero() {
		what += " " + shortDur(now.Sub(e.At)) + " ago"
	}
	return what
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// shortDur formats a duration the way kubectl shows ages.
func shortDur(d time.Duration) string {
	switch {
	case d < 0:
		return "0s"
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm%ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}
