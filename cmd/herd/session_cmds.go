package main

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"

	"github.com/spf13/cobra"
	"herd/internal/api"
	"herd/internal/runtime/tmux"
)

// post sends a command to the daemon and prints its one-line result.
func post(cmd *cobra.Command, g *globals, path string, body any) error {
	c, err := g.client()
	if err != nil {
		return err
	}
	var res api.Result
	if err := c.Do(cmd.Context(), http.MethodPost, path, nil, body, &res); err != nil {
		return explain(err, g)
	}
	fmt.Fprintln(cmd.OutOrStdout(), res.Message)
	return nil
}

func newStopCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "stop NAME",
		Short: "Stop a session through the stop path; its role's replica count drops by one",
		Long: `Stop a session: its process identity is verified, its process group gets
SIGTERM (SIGKILL after a grace period), and one 'stopped' event records a
resume snapshot. 'herd resume NAME' brings it back. Stopping a session that
is already stopped is not an error.`,
		Args: sessionArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			return post(cmd, g, sessionPath(args[0], "/stop"), nil)
		},
	}
}

func newResumeCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "resume NAME",
		Short: "Relaunch a stopped session from its snapshot (e.g. claude --resume <id>)",
		Args:  sessionArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			return post(cmd, g, sessionPath(args[0], "/resume"), nil)
		},
	}
}

func newArchiveCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "archive NAME",
		Short: "Mark a session done; the reaper stops it once detached",
		Args:  sessionArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			return post(cmd, g, sessionPath(args[0], "/archive"), nil)
		},
	}
}

func newScaleCmd(g *globals) *cobra.Command {
	var replicas int
	cmd := &cobra.Command{
		Use:     "scale ROLE --replicas N",
		Short:   "Change a role's desired replicas (re-arms failed sessions)",
		Example: "  herd scale worker --replicas 3",
		Args:    roleArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			if !cmd.Flags().Changed("replicas") {
				return fmt.Errorf("scale: --replicas N is required")
			}
			if replicas < 0 {
				return fmt.Errorf("scale: --replicas must be >= 0")
			}
			return post(cmd, g, rolePath(args[0], "/scale"), api.ScaleRequest{Replicas: replicas})
		},
	}
	cmd.Flags().IntVar(&replicas, "replicas", 0, "desired replicas, 0 or more (required)")
	return cmd
}

func newDeleteCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "delete role NAME", Short: "Delete a role"}
	cmd.AddCommand(&cobra.Command{
		Use:   "role NAME",
		Short: "Stop all of a role's sessions and forget the role and its crash history",
		Args:  roleArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			var res api.Result
			if err := c.Do(cmd.Context(), http.MethodDelete, rolePath(args[0], ""), nil, nil, &res); err != nil {
				return explain(err, g)
			}
			fmt.Fprintln(cmd.OutOrStdout(), res.Message)
			return nil
		},
	})
	requireSubcommand(cmd, "resource")
	return cmd
}

func newAttachCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "attach NAME",
		Short: "Attach the terminal to a session's tmux pane (detach with C-b d)",
		Args:  sessionArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, _, err := g.loadConfig()
			if err != nil {
				return err
			}
			c := &tmux.Client{Binary: cfg.Tmux.Binary, Socket: cfg.Tmux.Socket}
			x := c.AttachCommand(args[0])
			x.Stdin, x.Stdout, x.Stderr = os.Stdin, os.Stdout, os.Stderr
			if err := x.Run(); err != nil {
				if _, ok := err.(*exec.ExitError); ok {
					return fmt.Errorf("attach %s: tmux could not attach (is it a live tmux session?)", args[0])
				}
				return fmt.Errorf("attach %s: %w", args[0], err)
			}
			return nil
		},
	}
}
