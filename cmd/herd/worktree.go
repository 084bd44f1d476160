package main

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/spf13/cobra"

	"herd/internal/api"
)

func newWorktreeCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "worktree",
		Short: "Manage the git worktrees of worktree roles' sessions",
	}
	cmd.AddCommand(newWorktreePruneCmd(g))
	return cmd
}

func newWorktreePruneCmd(g *globals) *cobra.Command {
	var force bool
	cmd := &cobra.Command{
		Use:   "prune [--force]",
		Short: "Remove the worktrees kept for sessions that no longer exist",
		Long: `Remove the worktrees herd kept when their sessions went (delete role, reap)
because removing them could have lost work. A clean worktree is removed, and
its branch too when the branch has no commits of its own; a branch with
commits is kept, so nothing committed is lost. A worktree with uncommitted
changes is kept unless --force (its changes are then lost). Worktrees of
sessions that exist are never touched. Prints what was removed, and what was
kept and why.`,
		Example: "  herd worktree prune\n  herd worktree prune --force",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var res api.PruneResult
			if err := g.do(cmd.Context(), http.MethodPost, "/v1/worktrees/prune", nil, api.PruneRequest{Force: force}, &res); err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if len(res.Worktrees) == 0 {
				fmt.Fprintln(w, "No kept worktrees.")
			}
			for _, x := range res.Worktrees {
				switch {
				case x.Removed && x.Reason == "":
					fmt.Fprintf(w, "removed %s (session %s, branch %s deleted)\n", x.Path, x.Session, x.Branch)
				case x.Removed:
					fmt.Fprintf(w, "removed %s (session %s); %s\n", x.Path, x.Session, x.Reason)
				default:
					fmt.Fprintf(w, "kept %s (session %s): %s\n", x.Path, x.Session, x.Reason)
				}
			}
			if res.Error != "" {
				return errors.New("worktree prune: " + res.Error)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, "remove worktrees with uncommitted changes too (the changes are lost)")
	return cmd
}
