package main

import (
	"bytes"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/spf13/cobra"
)

func newLogsCmd(g *globals) *cobra.Command {
	var tail int
	var follow bool
	cmd := &cobra.Command{
		Use:               "logs NAME",
		Short:             "Show the agent's output: pane capture (tmux) or captured stdout (exec)",
		Args:              sessionArg,
		ValidArgsFunction: completeSessions(g),
		RunE: func(cmd *cobra.Command, args []string) error {
			if tail < 0 {
				return fmt.Errorf("logs: --tail %d: want 0 (everything) or more lines", tail)
			}
			q := url.Values{}
			if tail > 0 {
				q.Set("tail", strconv.Itoa(tail))
			}
			var last []byte
			for {
				var out []byte
				if err := g.do(cmd.Context(), http.MethodGet, sessionPath(args[0], "/logs"), q, nil, &out); err != nil {
					if cmd.Context().Err() != nil {
						return nil
					}
					return err
				}
				b := []byte(out)
				// When following, print only what is new since the last read.
				if i := bytes.LastIndex(b, lastLine(last)); len(last) > 0 && i >= 0 {
					b = b[i+len(lastLine(last)):]
				}
				cmd.OutOrStdout().Write(b)
				if !follow {
					return nil
				}
				if len(out) > 0 {
					last = out
				}
				select {
				case <-cmd.Context().Done():
					return nil
				case <-time.After(time.Second):
				}
			}
		},
	}
	cmd.Flags().IntVar(&tail, "tail", 0, "only the last N lines (default 0: all of them)")
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing new output, once a second, until interrupted")
	return cmd
}

// lastLine returns the final non-empty line of b, newline included.
func lastLine(b []byte) []byte {
	t := bytes.TrimRight(b, "\n")
	if i := bytes.LastIndexByte(t, '\n'); i >= 0 {
		return b[i+1:]
	}
	return b
}
