package main

import (
	"encoding/json"
	"fmt"
	"herd/internal/cells"
	"io"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"herd"

	"github.com/spf13/cobra"
)

// defaultEventsLimit is how many of the newest events herd events shows
// unless --limit says otherwise.
const defaultEventsLimit = 1000

// eventsBlock is how many table rows are aligned together: a long log is
// printed as it is read.
const eventsBlock = 512

func newEventsCmd(g *globals) *cobra.Command {
	var fl eventsFlags
	cmd := &cobra.Command{
		Use:   "events",
		Short: "Show the event log (append-only)",
		Example: `  herd events --session worker-0
  herd events -f --kind crashed
  herd events --since 10m -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runEvents(cmd, g, fl)
		},
	}
	f := cmd.Flags()
	f.BoolVarP(&fl.follow, "follow", "f", false, "keep printing new events until interrupted")
	f.StringVar(&fl.session, "session", "", "only this session, e.g. worker-0 (default: all)")
	f.StringVar(&fl.kind, "kind", "", "only this kind: "+strings.Join(herd.EventKinds, ", ")+" (default: all)")
	f.StringVar(&fl.host, "host", "", "only events of this host (default: every host of the fleet)")
	f.StringVar(&fl.task, "task", "", "only the events of this task, e.g. t-3 (its replica's too)")
	f.StringVar(&fl.since, "since", "", "only events newer than this duration, e.g. 10m or 2h (default: all)")
	f.StringVarP(&fl.output, "output", "o", "", "output format: json, one object per line (default: a table)")
	f.IntVar(&fl.limit, "limit", defaultEventsLimit, "only the newest N events; 0: the whole log (printed as it is read)")
	cmd.RegisterFlagCompletionFunc("session", completeSessions(g))
	cmd.RegisterFlagCompletionFunc("kind", cobra.FixedCompletions(herd.EventKinds, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// eventsFlags are the flags of herd events.
type eventsFlags struct {
	follow               bool
	session, kind, since string
	host, task           string
	output               string
	limit                int
}

// runEvents prints the event log as fl asks, following it with -f.
func runEvents(cmd *cobra.Command, g *globals, fl eventsFlags) error {
	if fl.output != "" && fl.output != "json" {
		return fmt.Errorf("events: unknown output format %q (want json)", fl.output)
	}
	if err := checkEventFilter(fl.session, fl.kind, fl.since, fl.limit); err != nil {
		return err
	}
	if fl.host != "" {
		if err := checkHost("events: --host", fl.host); err != nil {
			return err
		}
	}
	if fl.task != "" && herd.TaskSeq(fl.task) == 0 {
		return fmt.Errorf("events: --task %q is not a task id (t-<n>)", fl.task)
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
	set("session", fl.session)
	set("kind", fl.kind)
	set("host", fl.host)
	set("task", fl.task)
	set("since", fl.since)
	if fl.limit > 0 {
		q.Set("limit", strconv.Itoa(fl.limit))
	}
	w := cmd.OutOrStdout()
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	header := fl.output != "json"
	// A HOST column when the events may come from several hosts.
	fleet := header && fl.host == "" && fleetHosts(cmd.Context(), g)
	var after int64
	for first := true; ; first = false {
		if !first {
			q.Set("after", strconv.FormatInt(after, 10))
			q.Del("limit")
			q.Set("wait", "25s")
		}
		rows := 0
		err := c.Each(cmd.Context(), "/v1/events", q, func(raw json.RawMessage) error {
			var e herd.Event
			if err := json.Unmarshal(raw, &e); err != nil {
				return fmt.Errorf("events: %w", err)
			}
			if header {
				if fleet {
					fmt.Fprintln(tw, "TIME\tHOST\tSESSION\tKIND\tREASON\tMESSAGE")
				} else {
					fmt.Fprintln(tw, "TIME\tSESSION\tKIND\tREASON\tMESSAGE")
				}
				header = false
			}
			printEvent(tw, w, e, fl.output, fleet)
			after = max(after, e.ID)
			// Printed as they arrive, aligned a block at a time: a
			// long log is never held whole in memory.
			if rows++; rows%eventsBlock == 0 {
				tw.Flush()
			}
			return nil
		})
		if err != nil {
			if cmd.Context().Err() != nil {
				return nil
			}
			return explain(err, g)
		}
		if header {
			if fleet {
				fmt.Fprintln(tw, "TIME\tHOST\tSESSION\tKIND\tREASON\tMESSAGE")
			} else {
				fmt.Fprintln(tw, "TIME\tSESSION\tKIND\tREASON\tMESSAGE")
			}
			header = false
		}
		tw.Flush()
		if !fl.follow {
			return nil
		}
	}
}

// checkEventFilter rejects a filter that could only ever match nothing by
// mistake: a malformed session name, an unknown kind, a negative or
// malformed --since, a negative --limit. Empty values mean "no filter".
func checkEventFilter(session, kind, since string, limit int) error {
	if session != "" {
		if err := checkSession("events: --session", session); err != nil {
			return err
		}
	}
	if kind != "" && !slices.Contains(herd.EventKinds, kind) {
		return fmt.Errorf("events: --kind %q is not an event kind (want one of %s)", kind, strings.Join(herd.EventKinds, ", "))
	}
	if since != "" {
		d, err := time.ParseDuration(since)
		if err != nil {
			return fmt.Errorf("events: --since %q: want a duration such as 10m or 2h", since)
		}
		if d < 0 {
			return fmt.Errorf("events: --since %s is negative; want how far back to look, e.g. 10m", since)
		}
	}
	if limit < 0 {
		return fmt.Errorf("events: --limit %d: want 0 (the whole log) or more", limit)
	}
	return nil
}

func printEvent(tw *tabwriter.Writer, w io.Writer, e herd.Event, output string, fleet bool) {
	if output == "json" {
		b, _ := json.Marshal(e)
		fmt.Fprintln(w, string(b))
		return
	}
	host := ""
	if fleet {
		host = cells.Dash(e.Host) + "\t"
	}
	fmt.Fprintf(tw, "%s\t%s%s\t%s\t%s\t%s\n", cells.Clock(e.Time, time.Now()), host, cells.Dash(e.Session), e.Kind, cells.Dash(e.Reason), e.Message)
}
