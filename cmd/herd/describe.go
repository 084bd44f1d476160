package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"herd/internal/api"
)

func newDescribeCmd(g *globals) *cobra.Command {
	var output string
	cmd := &cobra.Command{Use: "describe session NAME", Short: "Show one session in detail"}
	sess := &cobra.Command{
		Use:     "session NAME",
		Aliases: []string{"sessions", "s"},
		Short:   "State, axes, identity, restarts, backoff, exit, diagnostics, recent events",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var det api.SessionDetail
			if err := getJSON(cmd.Context(), g, "/v1/sessions/"+args[0], &det); err != nil {
				return err
			}
			if output == "json" {
				return writeJSON(cmd.OutOrStdout(), det)
			}
			if output != "" {
				return fmt.Errorf("unknown output format %q (want json)", output)
			}
			printDetail(cmd.OutOrStdout(), det)
			return nil
		},
	}
	sess.Flags().StringVarP(&output, "output", "o", "", "output format: json")
	cmd.AddCommand(sess)
	return cmd
}

func printDetail(w io.Writer, d api.SessionDetail) {
	now := time.Now()
	tw := tabwriter.NewWriter(w, 0, 4, 1, ' ', 0)
	kv := func(k string, v any) { fmt.Fprintf(tw, "%s:\t%v\n", k, v) }
	kv("Name", d.Name)
	kv("Role", d.Role)
	kv("Host", d.Host)
	kv("State", fmt.Sprintf("%s (since %s ago)", d.State, shortDur(now.Sub(d.StateSince))))
	kv("Runtime", fmt.Sprintf("%s (%s)", d.Runtime, d.RuntimeKind))
	kv("Process", d.Process)
	kv("Activity", d.Activity)
	kv("Attached", d.Attached)
	kv("Restarts", d.Restarts)
	if d.BackoffUntil != nil {
		kv("Backoff until", fmt.Sprintf("%s (in %s)", d.BackoffUntil.Local().Format(time.RFC3339), shortDur(time.Until(*d.BackoffUntil))))
	}
	kv("Last exit", lastExit(d.Exit, now))
	kv("Incarnation", dash(d.Incarnation))
	if d.Identity != nil && d.Identity.PID > 0 {
		kv("Agent process", fmt.Sprintf("pid %d, start time %d ticks, boot %s", d.Identity.PID, d.Identity.StartTime, d.Identity.BootID))
	}
	if d.Root != nil && d.Identity != nil && d.Root.PID > 0 && d.Root.PID != d.Identity.PID {
		kv("Launched process", fmt.Sprintf("pid %d (wrapper)", d.Root.PID))
	}
	if len(d.Argv) > 0 {
		kv("Command", strings.Join(d.Argv, " "))
		kv("Workdir", d.Workdir)
	}
	if d.Snapshot != nil {
		kv("Resume snapshot", fmt.Sprintf("%s (agent %s, session id %s)", strings.Join(d.Snapshot.Argv, " "), dash(d.Snapshot.Agent), dash(d.Snapshot.AgentSessionID)))
	}
	if d.Diagnostics != nil {
		kv("Diagnostics", fmt.Sprintf("%v", d.Diagnostics))
	}
	tw.Flush()
	if len(d.StderrTail) > 0 {
		fmt.Fprintln(w, "Stderr (tail):")
		for _, l := range d.StderrTail {
			fmt.Fprintln(w, "  "+l)
		}
	}
	fmt.Fprintln(w, "Events:")
	ew := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(ew, "  TIME\tKIND\tREASON\tMESSAGE")
	for _, e := range d.RecentEvents {
		fmt.Fprintf(ew, "  %s\t%s\t%s\t%s\n", e.Time.Local().Format("15:04:05.000"), e.Kind, dash(e.Reason), e.Message)
	}
	ew.Flush()
}
