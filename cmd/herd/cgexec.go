package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"herd/internal/cgroup"
)

// newCgexecCmd is how a tmux pane's process joins its incarnation's cgroup:
// the daemon launches `herd cgexec PATH -- ARGV...`, which moves itself
// into the cgroup at PATH and execs ARGV (no shell), so the agent and all
// it forks are inside from the start. Not for people; hidden from help.
func newCgexecCmd() *cobra.Command {
	return &cobra.Command{
		Use:                "cgexec PATH -- COMMAND [ARG...]",
		Short:              "Run a command inside a cgroup (started by the daemon for tmux agents)",
		Hidden:             true,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) < 3 || args[1] != "--" {
				fmt.Fprintln(os.Stderr, "herd cgexec: usage: herd cgexec PATH -- COMMAND [ARG...]")
				os.Exit(2)
			}
			err := cgroup.ExecIn(args[0], args[2:])
			fmt.Fprintf(os.Stderr, "herd cgexec: %v\n", err)
			os.Exit(127)
			return nil
		},
	}
}
