package main

import (
	"fmt"
	"os/exec"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/spf13/cobra"
	"herd/internal/top"
)

func newTopCmd(g *globals) *cobra.Command {
	var refresh time.Duration
	cmd := &cobra.Command{
		Use:   "top",
		Short: "A live full-screen view of the sessions: state, activity, CPU, RSS, TCP, restarts",
		Long: `A live, full-screen table of every session, refreshed each second, with
each running agent's CPU%, RSS and own TCP connections sampled in turn.

Keys: up/down (j/k) move; enter attaches to a tmux session (detach with
C-b d to come back) or shows an exec session's output; l shows output;
x stops and R restarts (a fresh incarnation, as herd restart; both ask
first); r resumes; i types text into the agent; s changes the sort column,
S reverses it; / filters (esc clears); q quits.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			// Fail with one line before taking over the screen.
			if _, err := c.Ping(cmd.Context(), 2*time.Second); err != nil {
				return explain(err, g)
			}
			cfg, _, err := g.loadConfig()
			if err != nil {
				return err
			}
			m := top.New(top.ClientSource{C: c}, top.Options{
				Refresh: refresh,
				Attach: func(name string) *exec.Cmd {
					return attachCommand(cfg.Tmux.Binary, cfg.Tmux.Socket, name)
				},
			})
			if _, err := tea.NewProgram(m, tea.WithContext(cmd.Context())).Run(); err != nil && cmd.Context().Err() == nil {
				return fmt.Errorf("top: %w", err)
			}
			return nil
		},
	}
	cmd.Flags().DurationVar(&refresh, "refresh", time.Second, "how often the list is fetched")
	return cmd
}
