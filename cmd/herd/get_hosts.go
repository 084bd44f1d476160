package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"herd/internal/api"
	"herd/internal/cells"
	"herd/internal/selector"
)

// Selector keys of `get hosts -l`.
var hostLabelKeys = []string{"host", "daemon"}

const (
	hostHeader     = "HOST\tDAEMON\tSESSIONS\tHEARTBEAT\tBOOT"
	hostWideHeader = "\tVERSION\tSTARTED"
)

// newGetHostsCmd is `herd get hosts`: every daemon of the fleet sharing
// this store, up or stale by its heartbeat.
func newGetHostsCmd(g *globals) *cobra.Command {
	var hf getFlags
	cmd := &cobra.Command{
		Use:     "hosts [NAME...]",
		Aliases: []string{"host", "h"},
		Short:   "List the fleet's hosts: daemon up or stale, sessions, heartbeat age, boot",
		Example: `  herd get hosts
  herd get hosts -l daemon=stale
  herd get hosts -o json`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if hf.role != "" {
				return fmt.Errorf("get hosts: --role does not apply to hosts")
			}
			sel, err := hf.parse("hosts")
			if err != nil {
				return err
			}
			return runGet(cmd, hf, func(ctx context.Context) (listing, error) {
				var views []api.HostView
				if err := getJSON(ctx, g, "/v1/hosts", &views); err != nil {
					return listing{}, err
				}
				views, missing := filterHosts(views, args, sel)
				return listing{kind: "host", items: views, missing: missing, print: func(w io.Writer, o printOpts) error {
					return printHosts(w, views, o)
				}, names: hostNames(views)}, nil
			})
		},
	}
	hf.add(cmd)
	cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{"wide", "json", "yaml", "name"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// filterHosts keeps the hosts named (all when names is empty) that match
// sel, and returns the names not found.
func filterHosts(views []api.HostView, names []string, sel selector.Selector) (kept []api.HostView, missing []string) {
	kept = []api.HostView{}
	for _, v := range views {
		if (len(names) == 0 || slices.Contains(names, v.Name)) && sel.Match(map[string]string{"host": v.Name, "daemon": v.Daemon}) {
			kept = append(kept, v)
		}
	}
	for _, n := range names {
		if !slices.ContainsFunc(views, func(v api.HostView) bool { return v.Name == n }) && !slices.Contains(missing, n) {
			missing = append(missing, n)
		}
	}
	return kept, missing
}

func hostNames(views []api.HostView) []string {
	out := make([]string, len(views))
	for i, v := range views {
		out[i] = v.Name
	}
	return out
}

// printHosts writes the hosts table. HEARTBEAT is the age of the last
// beat; BOOT the first characters of the host's boot id.
func printHosts(w io.Writer, views []api.HostView, o printOpts) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if !o.noHeaders {
		header := hostHeader
		if o.wide {
			header += hostWideHeader
		}
		fmt.Fprintln(tw, header)
	}
	for _, v := range views {
		beat := "never"
		if v.HeartbeatAt != nil {
			beat = cells.ShortDur(o.now.Sub(*v.HeartbeatAt)) + " ago"
		}
		boot := v.BootID
		if len(boot) > 8 {
			boot = boot[:8]
		}
		row := fmt.Sprintf("%s\t%s\t%d\t%s\t%s", v.Name, v.Daemon, v.Sessions, beat, cells.Dash(boot))
		if o.wide {
			started := "-"
			if v.StartedAt != nil {
				started = cells.Clock(*v.StartedAt, o.now)
			}
			row += fmt.Sprintf("\t%s\t%s", cells.Dash(v.Version), started)
		}
		fmt.Fprintln(tw, row)
	}
	return tw.Flush()
}
