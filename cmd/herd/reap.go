package main

import (
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

func newReapCmd(g *globals) *cobra.Command {
	var dryRun bool
	var output string
	cmd := &cobra.Command{
		Use:   "reap [--dry-run]",
		Short: "Run one reaper pass now; print each candidate, its reason, and what was done",
		Long: `Run one reaper pass now. The reaper stops, through the stop path, the
sessions nobody needs: archived ones, orphans (workdir gone, role no longer
declared, herd-named tmux sessions with no record) and sessions idle for
reaper.idle_after. It never reaps an attached session, and skips any session
it cannot read, with the reason. Each is re-checked just before the kill.
A reaped session's role drops one replica; 'herd resume NAME' brings it back.

With --dry-run nothing changes: every candidate is printed with its reason
and what would happen.`,
		Example: "  herd reap --dry-run\n  herd reap",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "" && output != "json" {
				return fmt.Errorf("reap: unknown output format %q (want json)", output)
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			var rep api.ReapReport
			if err := c.Do(cmd.Context(), http.MethodPost, "/v1/reap", nil, api.ReapRequest{DryRun: dryRun}, &rep); err != nil {
				return explain(err, g)
			}
			if output == "json" {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(rep)
			}
			return printReap(cmd.OutOrStdout(), rep)
		},
	}
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "decide and print, change nothing")
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: json")
	return cmd
}

// printReap prints a pass: one line per candidate, then the counts.
func printReap(w io.Writer, rep api.ReapReport) error {
	for _, n := range rep.Notes {
		fmt.Fprintln(w, "note: "+n)
	}
	if len(rep.Candidates) > 0 {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "SESSION\tRUNTIME\tATTACHED\tIDLE\tREASON\tACTION\tDETAIL")
		for _, c := range rep.Candidates {
			idle := "-"
			if c.IdleSeconds > 0 {
				idle = reapDuration(time.Duration(c.IdleSeconds * float64(time.Second)))
			}
			name := c.Session
			if c.Unmanaged {
				name += " (unmanaged)"
			}
			detail := c.Detail
			if c.Error != "" {
				detail = c.Error
			}
			fmt.Fprintf(tw, "%s\t%s\t%v\t%s\t%s\t%s\t%s\n", name, c.RuntimeKind, c.Attached, idle, c.Reason, strings.ReplaceAll(c.Action, "_", " "), detail)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	} else {
		fmt.Fprintln(w, "no candidates")
	}
	verb := "reaped"
	if rep.DryRun {
		verb = "would reap"
	}
	var parts []string
	for _, r := range []string{herd.ReasonIdle, herd.ReasonOrphan, herd.ReasonArchived} {
		parts = append(parts, fmt.Sprintf("%s %d", r, rep.Reaped[r]))
	}
	_, err := fmt.Fprintf(w, "%s: %s; kept %d, skipped %d (%dms)\n", verb, strings.Join(parts, ", "), rep.Kept, rep.Skipped, rep.DurationMS)
	return err
}

// reapDuration renders d to the second, or to the 10 ms below a minute.
func reapDuration(d time.Duration) string {
	if d >= time.Minute {
		return d.Round(time.Second).String()
	}
	return d.Round(10 * time.Millisecond).String()
}
