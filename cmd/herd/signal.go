package main

import (
	"fmt"

	"github.com/spf13/cobra"
	"herd/internal/api"
)

func newSignalCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "signal NAME SIG",
		Short: "Send a signal to a session's agent process, its identity verified first",
		Long: `Send SIG (a name such as TERM, HUP, INT, USR1, with or without SIG, or a
number) to the session's agent process: the agent itself, not a launcher it
runs under (npm's node shim of Codex, Gemini CLI's launcher, which ignores
TERM) nor a wrapper; refused while the agent is not identified yet. The
process's identity (pid, start time, boot id) is verified through a pidfd
before the signal: a pid now held by another process is never signalled. What the signal causes (an exit is a
crash like any other) is seen and recorded by the daemon as usual.`,
		Example: `  herd signal worker-0 INT
  herd signal worker-0 SIGUSR1`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 2 {
				return fmt.Errorf("signal: want NAME and SIG (e.g. herd signal worker-0 INT), got %d arguments", len(args))
			}
			return nil
		},
		ValidArgsFunction: completeSessions(g),
		RunE: func(cmd *cobra.Command, args []string) error {
			return post(cmd, g, sessionPath(args[0], "/signal"), api.SignalRequest{Signal: args[1]})
		},
	}
}
