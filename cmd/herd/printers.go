package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"herd"
	"herd/internal/api"
	"herd/internal/yamlenc"
)

// printOpts say how a table is printed.
type printOpts struct {
	wide      bool
	noHeaders bool
	now       time.Time
}

// Column names, the same wherever they appear: RUNTIME is the runtime kind
// (tmux or exec); the two liveness axes are PANE and PROCESS.
const (
	sessionHeader     = "NAME\tROLE\tSTATE\tPROCESS\tACTIVITY\tRESTARTS\tAGE\tLAST-EXIT"
	sessionWideHeader = "\tRUNTIME\tPANE\tPID\tATTACHED\tHOST\tINCARNATION\tBACKOFF-UNTIL"
	roleHeader        = "NAME\tREPLICAS\tLIVE\tRUNNING\tRUNTIME\tAGENT\tPOLICY\tCOMMAND"
	roleWideHeader    = "\tWORKDIR\tMAX-RESTARTS\tBACKOFF"
)

func printSessions(w io.Writer, views []api.SessionView, o printOpts) error {
	tw, flush := newTable(w)
	if !o.noHeaders {
		header := sessionHeader
		if o.wide {
			header += sessionWideHeader
		}
		fmt.Fprintln(tw, header)
	}
	for _, v := range views {
		row := fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s", v.Name, dash(v.Role), stateText(v), v.Process, v.Activity, v.Restarts, ageText(v, o.now), lastExit(v.Exit, o.now))
		if o.wide {
			backoff := "-"
			if v.BackoffUntil != nil {
				backoff = clockText(*v.BackoffUntil, o.now)
			}
			pid := "-"
			if v.PID > 0 {
				pid = fmt.Sprint(v.PID)
			}
			row += fmt.Sprintf("\t%s\t%s\t%s\t%v\t%s\t%s\t%s", dash(v.RuntimeKind), paneText(v), pid, v.Attached, dash(v.Host), dash(v.Incarnation), backoff)
		}
		fmt.Fprintln(tw, row)
	}
	return flush()
}

// newTable returns a table writer over a buffer of w, and the flush that
// writes it out. The tabwriter writes cell by cell: buffered, a table of
// 1000 rows reaches w in a few writes instead of some 17,000.
func newTable(w io.Writer) (*tabwriter.Writer, func() error) {
	bw := bufio.NewWriterSize(w, 64<<10)
	tw := tabwriter.NewWriter(bw, 0, 4, 2, ' ', 0)
	return tw, func() error {
		if err := tw.Flush(); err != nil {
			return err
		}
		return bw.Flush()
	}
}

// stateText is the STATE column: the state, "!" while an escalation is
// open, and markers after a comma (kubectl's "Ready,SchedulingDisabled").
func stateText(v api.SessionView) string {
	if v.Unmanaged {
		return "unmanaged"
	}
	s := string(v.State)
	if v.Escalated {
		s += "!"
	}
	if v.Archived {
		s += ",ARCHIVED"
	}
	return s
}

// paneText is the PANE axis: the tmux pane's liveness; an exec session has
// no pane.
func paneText(v api.SessionView) string {
	if v.RuntimeKind == herd.RuntimeExec {
		return "-"
	}
	return dash(string(v.Runtime))
}

func ageText(v api.SessionView, now time.Time) string {
	if v.StartedAt == nil || !v.State.Live() {
		return "-"
	}
	return shortDur(now.Sub(*v.StartedAt))
}

func printRoles(w io.Writer, views []api.RoleView, o printOpts) error {
	tw, flush := newTable(w)
	if !o.noHeaders {
		header := roleHeader
		if o.wide {
			header += roleWideHeader
		}
		fmt.Fprintln(tw, header)
	}
	for _, v := range views {
		row := fmt.Sprintf("%s\t%d\t%d\t%d\t%s\t%s\t%s\t%s", v.Name, v.Replicas, v.Live, v.Ready, dash(v.Runtime), dash(v.Agent), dash(v.Restart.Policy), strings.Join(v.Command, " "))
		if o.wide {
			row += fmt.Sprintf("\t%s\t%d\t%s..%s", dash(v.Workdir), v.Restart.MaxRestarts, v.Restart.InitialBackoff, v.Restart.MaxBackoff)
		}
		fmt.Fprintln(tw, row)
	}
	return flush()
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func writeYAML(w io.Writer, v any) error { return yamlenc.Encode(w, v) }

func lastExit(e *herd.Exit, now time.Time) string {
	if e == nil {
		return "-"
	}
	var what string
	switch {
	case e.Signal != nil:
		what = fmt.Sprintf("signal %d", *e.Signal)
	case e.Code != nil:
		what = fmt.Sprintf("code %d", *e.Code)
	default:
		what = e.Reason
	}
	if e.Reason != "" && e.Reason != herd.ReasonSignal && e.Reason != herd.ReasonExitCode && what != e.Reason {
		what += " (" + e.Reason + ")"
	}
	if !e.At.IsZero() {
		what += " " + shortDur(now.Sub(e.At)) + " ago"
	}
	return what
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// shortDur formats a duration the way kubectl shows ages.
func shortDur(d time.Duration) string {
	switch {
	case d < 0:
		return "0s"
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm%ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

// clockText is a point in time in local time: the clock alone when it is
// today, with its date otherwise.
func clockText(t, now time.Time) string {
	t, now = t.Local(), now.Local()
	if y, m, d := t.Date(); y == now.Year() && m == now.Month() && d == now.Day() {
		return t.Format("15:04:05.000")
	}
	return t.Format("2006-01-02 15:04:05")
}
