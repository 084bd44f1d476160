package main

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"herd/internal/api"
	"herd/internal/usage"
)

func newUsageCmd(g *globals) *cobra.Command {
	var fl usageFlags
	cmd := &cobra.Command{
		Use:   "usage",
		Short: "Show what the agents spent: tokens and cost, per session, role, account, model or day",
		Long: `Show the usage ledger: the tokens the agents recorded themselves (Claude Code's
transcripts and stream-json results, Codex's rollouts and exec --json events,
Gemini CLI's stream-json results) and what they cost — the agent's own figure
where it reports one, else the price table (embedded defaults, [prices] overrides).
Every host of a fleet is included.`,
		Example: `  herd usage
  herd usage --by model --since 24h
  herd usage --role worker --by day --since 7d
  herd usage --session worker-0 -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			q, err := fl.query(time.Now())
			if err != nil {
				return err
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			rep, err := c.Usage(cmd.Context(), q)
			if err != nil {
				return explainPath(err, g, "/v1/usage")
			}
			if fl.output == "json" {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(rep)
			}
			return printUsage(cmd.OutOrStdout(), rep)
		},
	}
	f := cmd.Flags()
	f.StringVar(&fl.role, "role", "", "only this role's sessions")
	f.StringVar(&fl.session, "session", "", "only this session, e.g. worker-0")
	f.StringVar(&fl.since, "since", "", "only usage of the last DUR, e.g. 90m, 24h or 7d (counted from the start of its hour; default: all)")
	f.StringVar(&fl.by, "by", usage.BySession, "group by "+strings.Join(usage.Groupings, ", "))
	f.StringVarP(&fl.output, "output", "o", "", "output format: json (default: a table)")
	cmd.RegisterFlagCompletionFunc("session", completeSessions(g))
	cmd.RegisterFlagCompletionFunc("by", cobra.FixedCompletions(usage.Groupings, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// usageFlags are the flags of herd usage.
type usageFlags struct {
	role, session, since, by, output string
}

// query checks the flags and returns the report they ask for, as of now.
func (fl usageFlags) query(now time.Time) (api.UsageQuery, error) {
	q := api.UsageQuery{Role: fl.role, Session: fl.session, By: fl.by}
	if fl.output != "" && fl.output != "json" {
		return q, fmt.Errorf("usage: unknown output format %q (want json)", fl.output)
	}
	if !slices.Contains(usage.Groupings, fl.by) {
		return q, fmt.Errorf("usage: --by %q: want one of %s", fl.by, strings.Join(usage.Groupings, ", "))
	}
	if fl.role != "" {
		if err := checkRole("usage: --role", fl.role); err != nil {
			return q, err
		}
	}
	if fl.session != "" {
		if err := checkSession("usage: --session", fl.session); err != nil {
			return q, err
		}
	}
	if fl.since != "" {
		d, err := usage.ParseSince(fl.since)
		if err != nil {
			return q, fmt.Errorf("usage: --since %q: %v", fl.since, err)
		}
		q.Since = now.Add(-d)
	}
	return q, nil
}

// printUsage prints a report as a table, its total last.
func printUsage(w io.Writer, rep api.UsageReport) error {
	tw, flush := newTable(w)
	fmt.Fprintf(tw, "%s\tINPUT\tOUTPUT\tCACHE READ\tCACHE WRITE\tCOST\n", strings.ToUpper(rep.By))
	row := func(key string, u api.Usage) {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", key, api.Count(u.InputTokens), api.Count(u.OutputTokens),
			api.Count(u.CacheReadTokens), api.Count(u.CacheWriteTokens), u.Cost())
	}
	for _, l := range rep.Lines {
		row(l.Key, l.Usage)
	}
	if len(rep.Lines) != 1 {
		row("TOTAL", rep.Total)
	}
	return flush()
}
