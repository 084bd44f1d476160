package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"herd/internal/api"
	"herd/internal/cells"
	"herd/internal/yamlenc"
)

// printOpts say how a table is printed.
type printOpts struct {
	wide      bool
	noHeaders bool
	now       time.Time
	// fleet adds a HOST column after NAME: the listing spans hosts.
	fleet bool
}

// Column names, the same wherever they appear: RUNTIME is the runtime kind
// (tmux or exec); the two liveness axes are PANE and PROCESS.
const (
	sessionHeader     = "NAME\tROLE\tSTATE\tPROCESS\tACTIVITY\tRESTARTS\tAGE\tLAST-EXIT"
	sessionWideHeader = "\tRUNTIME\tPANE\tPID\tATTACHED\tHOST\tINCARNATION\tBACKOFF-UNTIL\tWORKTREE\tCOST"
	roleHeader        = "NAME\tREPLICAS\tLIVE\tRUNNING\tRUNTIME\tAGENT\tPOLICY\tCOMMAND"
	roleWideHeader    = "\tWORKDIR\tMAX-RESTARTS\tBACKOFF"
)

func printSessions(w io.Writer, views []api.SessionView, o printOpts) error {
	tw, flush := newTable(w)
	if !o.noHeaders {
		header := sessionHeader
		if o.fleet {
			header = strings.Replace(header, "NAME\t", "NAME\tHOST\t", 1)
		}
		if o.wide {
			wide := sessionWideHeader
			if o.fleet { // HOST is shown already
				wide = strings.Replace(wide, "\tHOST", "", 1)
			}
			header += wide
		}
		fmt.Fprintln(tw, header)
	}
	for _, v := range views {
		name := v.Name
		if o.fleet {
			name += "\t" + cells.Dash(v.Host)
		}
		row := fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s", name, cells.Dash(v.Role), cells.State(v), v.Process, cells.Activity(v), v.Restarts, cells.AgeText(v, o.now), cells.LastExit(v.Exit, o.now))
		if o.wide {
			backoff := "-"
			if v.BackoffUntil != nil {
				backoff = cells.Clock(*v.BackoffUntil, o.now)
			}
			pid := "-"
			if v.PID > 0 {
				pid = fmt.Sprint(v.PID)
			}
			host := "\t" + cells.Dash(v.Host)
			if o.fleet {
				host = ""
			}
			row += fmt.Sprintf("\t%s\t%s\t%s\t%v%s\t%s\t%s\t%s\t%s", cells.Dash(v.RuntimeKind), cells.Pane(v), pid, v.Attached, host, cells.Dash(v.Incarnation), backoff, cells.Worktree(v.Worktree), v.Usage.Cost())
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

func printRoles(w io.Writer, views []api.RoleView, o printOpts) error {
	tw, flush := newTable(w)
	if !o.noHeaders {
		header := roleHeader
		if o.fleet {
			header += "\tHOSTS\tPLACEMENT"
		}
		if o.wide {
			header += roleWideHeader
		}
		fmt.Fprintln(tw, header)
	}
	for _, v := range views {
		row := fmt.Sprintf("%s\t%d\t%d\t%d\t%s\t%s\t%s\t%s", v.Name, v.Replicas, v.Live, v.Ready, cells.Dash(v.Runtime), cells.Dash(v.Agent), cells.Dash(v.Restart.Policy), strings.Join(v.Command, " "))
		if o.fleet {
			row += "\t" + roleHostsText(v) + "\t" + placementShort(v.Placement)
		}
		if o.wide {
			row += fmt.Sprintf("\t%s\t%d\t%s..%s", cells.Dash(v.Workdir), v.Restart.MaxRestarts, v.Restart.InitialBackoff, v.Restart.MaxBackoff)
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

// escapeText makes text an agent or a person wrote safe to print on a
// terminal: control bytes (C0, DEL, C1: escape sequences, carriage
// returns, tabs that would break a table's columns), bytes that are not
// UTF-8 and the bidirectional controls that reorder what is shown are
// written as Go escapes (\x1b, \r, \xff, \u202e). The runes in keep pass
// as they are ("\n\t" for text printed whole, as a prompt or a diff).
func escapeText(s, keep string) string {
	var b strings.Builder
	done := 0 // s[:done] is in b, or needs no escape when b is empty
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		bad := r == utf8.RuneError && size == 1
		if !bad && (!mustEscape(r) || strings.ContainsRune(keep, r)) {
			i += size
			continue
		}
		if b.Len() == 0 {
			b.Grow(len(s) + 16)
		}
		b.WriteString(s[done:i])
		switch {
		case bad:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x80:
			fmt.Fprintf(&b, `\x%02x`, r)
		default:
			fmt.Fprintf(&b, `\u%04x`, r)
		}
		i += size
		done = i
	}
	if done == 0 {
		return s
	}
	b.WriteString(s[done:])
	return b.String()
}

// mustEscape reports whether r is not to reach a terminal as it is.
func mustEscape(r rune) bool {
	return unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r)
}

// cell is a table cell of untrusted text: escaped, then clipped to n
// runes as shown; "-" when empty.
func cell(s string, n int) string {
	if s == "" {
		return "-"
	}
	return cells.Clip(escapeText(s, ""), n)
}
