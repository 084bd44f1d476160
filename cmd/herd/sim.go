package main

import (
	"github.com/spf13/cobra"
	"herd/internal/sim"
)

// newSimCmd is the hidden simulated agent used by the demo and the tests.
func newSimCmd() *cobra.Command { return sim.Command() }
