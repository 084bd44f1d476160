package main

import (
	"fmt"
	"net/http"
	"time"

	"github.com/spf13/cobra"
	"herd/internal/api"
)

func newRolloutCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "rollout restart ROLE", Short: "Replace a role's sessions with its current template"}
	var maxUnavailable int
	var timeout, minReady string
	var all bool
	restart := &cobra.Command{
		Use:   "restart ROLE",
		Short: "Replace the role's OUTDATED sessions, the new one running before the next old one stops",
		Long: `Replace the sessions of ROLE that run an older command, workdir or env than
the role's (OUTDATED in 'herd get sessions'), --max-unavailable at a time
(default 1): each is restarted through the stop path, and the next is not
stopped before the new one runs and has kept running for --min-ready. A new
incarnation that does not (a crash, a bad command) stops the rollout; the old sessions left
keep running. Every replacement is a 'rollout' event.`,
		Example: `  herd rollout restart worker
  herd rollout restart worker --max-unavailable 2`,
		Args:              roleArg,
		ValidArgsFunction: completeRoles(g),
		RunE: func(cmd *cobra.Command, args []string) error {
			if maxUnavailable < 1 {
				return fmt.Errorf("rollout: --max-unavailable must be at least 1")
			}
			var res api.RolloutResult
			req := api.RolloutRequest{MaxUnavailable: maxUnavailable, Ready: timeout, All: all, MinReady: minReady}
			if err := g.do(cmd.Context(), http.MethodPost, rolePath(args[0], "/rollout"), nil, req, &res); err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			for _, st := range res.Replaced {
				fmt.Fprintf(out, "session/%s replaced (%s): %s -> %s, running after %s\n",
					st.Session, st.Reason, st.From, st.To, st.Took.Round(time.Millisecond))
			}
			fmt.Fprintln(out, res.Message)
			if res.Error != "" {
				return fmt.Errorf("%s", res.Error)
			}
			return nil
		},
	}
	restart.Flags().IntVar(&maxUnavailable, "max-unavailable", 1, "sessions replaced at once")
	restart.Flags().StringVar(&timeout, "timeout", "1m", "how long each new incarnation may take to run")
	restart.Flags().StringVar(&minReady, "min-ready", "1s", "how long each new incarnation must keep running before the next old one stops")
	restart.Flags().BoolVar(&all, "all", false, "replace every session, outdated or not")
	cmd.AddCommand(restart)
	requireSubcommand(cmd, "action")
	return cmd
}
