package main

import (
	"github.com/spf13/cobra"
)

func newResetCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "reset NAME",
		Short: "Clear a session's crash count (a failed session relaunches now)",
		Long: `Clear a session's crash count: its next crash backs off from the initial
delay again, and its restart budget is whole. A failed session is re-armed
and relaunches at once. The running agent is not touched.`,
		Args:              sessionArg,
		ValidArgsFunction: completeSessions(g),
		RunE: func(cmd *cobra.Command, args []string) error {
			return post(cmd, g, sessionPath(args[0], "/reset"), nil)
		},
	}
}
