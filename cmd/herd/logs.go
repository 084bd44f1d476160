package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/spf13/cobra"
)

func newLogsCmd(g *globals) *cobra.Command {
	var tail int
	var follow, all bool
	var since, role string
	cmd := &cobra.Command{
		Use:   "logs NAME | --role NAME | --all",
		Short: "Show the agent's output: pane capture (tmux) or captured stdout (exec)",
		Long: `Show a session's output: the whole pane, scrollback included (tmux), or the
captured stdout (exec). With --role or --all, the output of each session of
the role (or of every session), one after the other, each line prefixed
with its session's name. With --since DUR, the output of every incarnation
that ran in the last DUR, oldest first, each under a header saying when it
started and how it ended (a tmux pane's output is gone with its pane). A
launch that failed, or a command not found, ends with herd's line saying why.`,
		Example: `  herd logs worker-0 --tail 50
  herd logs worker-0 --since 1h
  herd logs --role worker -f`,
		Args: func(cmd *cobra.Command, args []string) error {
			switch {
			case (all || role != "") && len(args) > 0:
				return fmt.Errorf("logs: give a session NAME, --role NAME or --all, not both")
			case all && role != "":
				return fmt.Errorf("logs: give --role NAME or --all, not both")
			case !all && role == "":
				return sessionArg(cmd, args)
			}
			return nil
		},
		ValidArgsFunction: completeSessions(g),
		RunE: func(cmd *cobra.Command, args []string) error {
			if tail < 0 {
				return fmt.Errorf("logs: --tail %d: want 0 (everything) or more lines", tail)
			}
			if host := remoteHostOf(cmd.Context(), g, args); host != "" {
				remote := []string{"logs"}
				if tail > 0 {
					remote = append(remote, "--tail", strconv.Itoa(tail))
				}
				if follow {
					remote = append(remote, "-f")
				}
				return runRemote(cmd, g, host, append(remote, args[0])...)
			}
			q := url.Values{}
			if tail > 0 {
				q.Set("tail", strconv.Itoa(tail))
			}
			if since != "" {
				if d, err := time.ParseDuration(since); err != nil || d <= 0 {
					return fmt.Errorf("logs: --since %q: want a positive duration such as 1h", since)
				}
				q.Set("since", since)
			}
			path := "/v1/logs"
			switch {
			case len(args) == 1:
				path = sessionPath(args[0], "/logs")
			case role != "":
				if err := checkRole("logs", role); err != nil {
					return err
				}
				q.Set("role", role)
			default:
				q.Set("all", "1")
			}
			var last []byte
			for {
				var out []byte
				if err := g.do(cmd.Context(), http.MethodGet, path, q, nil, &out); err != nil {
					if cmd.Context().Err() != nil {
						return nil
					}
					return err
				}
				// The first read prints everything; when following, each
				// next read prints only what came after the last.
				cmd.OutOrStdout().Write(newOutput(last, out))
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
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "print the whole output, then what comes after it, once a second, until interrupted")
	cmd.Flags().StringVar(&since, "since", "", "the output of every incarnation that ran in the last DUR (e.g. 1h)")
	cmd.Flags().StringVar(&role, "role", "", "the output of every session of role NAME, prefixed by session")
	cmd.Flags().BoolVar(&all, "all", false, "the output of every session, prefixed by session")
	return cmd
}

// overlapLines is how many of the previous read's last lines must be found
// again to know where the new output starts when the history was cut.
const overlapLines = 8

// newOutput is what cur, a fresh read of the whole output, adds to prev, the
// read before. The output grows at its end, so prev is most often a prefix
// of cur; when the start of the history is gone (tmux's history-limit, a
// bounded capture file), the new output starts after the last place where
// prev's last lines stand in cur. When they are nowhere (a new incarnation,
// a redrawn screen), cur is new as a whole.
func newOutput(prev, cur []byte) []byte {
	if len(prev) == 0 {
		return cur
	}
	if bytes.HasPrefix(cur, prev) {
		return cur[len(prev):]
	}
	tail := lastLines(prev, overlapLines)
	if i := bytes.LastIndex(cur, tail); i >= 0 && (i == 0 || cur[i-1] == '\n') {
		return cur[i+len(tail):]
	}
	return cur
}

// lastLines is the last n lines of b, its final newline included.
func lastLines(b []byte, n int) []byte {
	end := len(bytes.TrimRight(b, "\n"))
	start := end
	for range n {
		i := bytes.LastIndexByte(b[:start], '\n')
		if i < 0 {
			return b
		}
		start = i
	}
	return b[start+1:]
}

// remoteHostOf is the host of the one session named in args when it runs
// on another host, "" otherwise (no name: --role or --all).
func remoteHostOf(ctx context.Context, g *globals, args []string) string {
	if len(args) != 1 {
		return ""
	}
	return remoteHost(ctx, g, args[0])
}
