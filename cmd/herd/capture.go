package main

import (
	"os"

	"github.com/spf13/cobra"

	"herd/internal/runtime/execrt"
)

// newCaptureCmd is the capture process of exec agents: the daemon starts it
// with the agent's output pipes as descriptors 3 and 4 (see
// execrt.RunCapture). Not for people; hidden from help.
func newCaptureCmd() *cobra.Command {
	return &cobra.Command{
		Use:                "capture --max-bytes N --stdout PATH --stderr PATH",
		Short:              "Write an exec agent's output to its files, rotating at the cap (started by the daemon)",
		Hidden:             true,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			os.Exit(execrt.RunCapture(args, os.Stderr))
			return nil
		},
	}
}
