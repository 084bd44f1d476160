package main

import (
	"time"

	"herd/internal/demo"
	"herd/internal/redraw"

	"github.com/spf13/cobra"
)

func newDemoCmd(g *globals) *cobra.Command {
	var o demo.Options
	var fleet bool
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "One command, no setup: a private daemon supervising simulated agents",
		Long: `Run a self-contained demo (about 25s): a temporary state directory, a
private daemon, and four simulated agents reporting their activity through
hooks — one healthy, one crash-looping (SEGV), one that stalls mid-turn, one
waiting for permission. A live table, under a legend for "!" and the states,
is drawn whenever it changes: herd launching, restarting with backoff, failing
the crash loop when its budget is spent, noticing the stall and the wait.
Then a summary, "herd describe session" of the stalled agent with its /proc
diagnostics, and everything is cleaned up (the state directory and the
daemon log too, unless --keep).
Uses tmux when installed (a private server), child processes otherwise.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.Out = cmd.OutOrStdout()
			o.Version = version
			o.Term = redraw.Of(o.Out)
			if fleet {
				return demo.RunFleet(cmd.Context(), o)
			}
			return demo.Run(cmd.Context(), o)
		},
	}
	cmd.Flags().DurationVar(&o.Duration, "duration", 25*time.Second, "how long to show the live table")
	cmd.Flags().StringVar(&o.Runtime, "runtime", "", "force a runtime: tmux | exec (default: tmux when installed)")
	cmd.Flags().BoolVar(&o.Keep, "keep", false, "keep the state directory")
	cmd.Flags().BoolVar(&fleet, "fleet", false, "two daemons (hosts demo-a, demo-b) on one private PostgreSQL: one view, commands across hosts, a host going away")
	return cmd
}
