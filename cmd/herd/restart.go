package main

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/spf13/cobra"
	"herd/internal/api"
)

func newRestartCmd(g *globals) *cobra.Command {
	var all bool
	var grace string
	cmd := &cobra.Command{
		Use:   "restart NAME | role/NAME | --all",
		Short: "Give sessions a fresh incarnation: the stop path, then a launch (re-arms failed)",
		Long: `Restart a session, every session of a role (role/NAME, one after the other),
or every session (--all). Each goes through the one stop path (identity
verified, SIGTERM, SIGKILL after the grace period, one 'stopped' event) and
is launched again at once ('restarted', reason user). A failed session is
re-armed: its crash count starts over. Sessions stopped on purpose are left
to 'herd resume'.`,
		Example: `  herd restart worker-0
  herd restart role/worker --grace 30s
  herd restart --all`,
		Args: func(cmd *cobra.Command, args []string) error {
			switch {
			case all && len(args) > 0:
				return fmt.Errorf("restart: give NAME, role/NAME or --all, not both")
			case !all && len(args) != 1:
				return fmt.Errorf("restart: want one NAME (worker-0), role/NAME, or --all")
			}
			return nil
		},
		ValidArgsFunction: completeSessions(g),
		RunE: func(cmd *cobra.Command, args []string) error {
			path := "/v1/restart"
			if !all {
				if role, ok := strings.CutPrefix(args[0], "role/"); ok {
					if err := checkRole("restart", role); err != nil {
						return err
					}
					path = rolePath(role, "/restart")
				} else {
					path = sessionPath(args[0], "/restart")
				}
			}
			var res api.RestartResult
			if err := g.do(cmd.Context(), http.MethodPost, path, nil, api.RestartRequest{Grace: grace}, &res); err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			failed := 0
			if len(res.Restarted) > 1 || all || strings.HasPrefix(args[0], "role/") {
				for _, r := range res.Restarted {
					if r.Error != "" {
						failed++
						fmt.Fprintf(out, "session/%s not restarted: %s\n", r.Session, r.Error)
						continue
					}
					fmt.Fprintf(out, "session/%s restarted\n", r.Session)
				}
			}
			fmt.Fprintln(out, res.Message)
			if failed > 0 {
				return fmt.Errorf("restart: %d session(s) not restarted", failed)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&all, "all", false, "restart every session")
	cmd.Flags().StringVar(&grace, "grace", "", "how long to wait after SIGTERM before SIGKILL (default: the daemon's)")
	return cmd
}
