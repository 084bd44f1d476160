package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"herd"
)

func newEventsCmd(g *globals) *cobra.Command {
	var (
		follow               bool
		session, kind, since string
		output               string
		limit                int
	)
	cmd := &cobra.Command{
		Use:   "events",
		Short: "Show the event log (append-only)",
		Example: `  herd events --session worker-0
  herd events -f --kind crashed
  herd events --since 10m -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "" && output != "json" {
				return fmt.Errorf("unknown output format %q (want json)", output)
			}
			if since != "" {
				if _, err := time.ParseDuration(since); err != nil {
					return fmt.Errorf("--since: %w", err)
				}
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			q := url.Values{}
			set := func(k, v string) {
				if v != "" {
					q.Set(k, v)
				}
			}
			set("session", session)
			set("kind", kind)
			set("since", since)
			if limit > 0 {
				q.Set("limit", strconv.Itoa(limit))
			}
			w := cmd.OutOrStdout()
			tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
			header := output != "json"
			var after int64
			for first := true; ; first = false {
				if !first {
					q.Set("after", strconv.FormatInt(after, 10))
					q.Del("limit")
					q.Set("wait", "25s")
				}
				var events []herd.Event
				if err := c.Do(cmd.Context(), http.MethodGet, "/v1/events", q, nil, &events); err != nil {
					if cmd.Context().Err() != nil {
						return nil
					}
					return explain(err, g)
				}
				if header {
					fmt.Fprintln(tw, "TIME\tSESSION\tKIND\tREASON\tMESSAGE")
					header = false
				}
				for _, e := range events {
					printEvent(tw, w, e, output)
					after = max(after, e.ID)
				}
				tw.Flush()
				if !follow {
					return nil
				}
			}
		},
	}
	f := cmd.Flags()
	f.BoolVarP(&follow, "follow", "f", false, "keep printing new events")
	f.StringVar(&session, "session", "", "only this session")
	f.StringVar(&kind, "kind", "", "only this kind (crashed, backoff, stopped, escalated, ...)")
	f.StringVar(&since, "since", "", "only events newer than this duration (e.g. 10m)")
	f.StringVarP(&output, "output", "o", "", "output format: json (one object per line)")
	f.IntVar(&limit, "limit", 0, "only the newest N events")
	return cmd
}

func printEvent(tw *tabwriter.Writer, w io.Writer, e herd.Event, output string) {
	if output == "json" {
		b, _ := json.Marshal(e)
		fmt.Fprintln(w, string(b))
		return
	}
	fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", e.Time.Local().Format("15:04:05.000"), dash(e.Session), e.Kind, dash(e.Reason), e.Message)
}
