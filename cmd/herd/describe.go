package main

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"herd"
	"herd/internal/api"
	"herd/internal/cells"

	"github.com/spf13/cobra"
)

func newDescribeCmd(g *globals) *cobra.Command {
	var output string
	cmd := &cobra.Command{Use: "describe session|role|task NAME", Short: "Show one session, role or task in detail"}
	sess := &cobra.Command{
		Use:               "session NAME",
		Aliases:           []string{"sessions", "s"},
		Short:             "State, axes, identity, restarts, backoff, exit, diagnostics, recent events",
		Args:              sessionArg,
		ValidArgsFunction: completeSessions(g),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput("describe session", output, "json", "yaml"); err != nil {
				return err
			}
			var det api.SessionDetail
			if err := getJSON(cmd.Context(), g, sessionPath(args[0], ""), &det); err != nil {
				return err
			}
			switch output {
			case "json":
				return writeJSON(cmd.OutOrStdout(), det)
			case "yaml":
				return writeYAML(cmd.OutOrStdout(), det)
			}
			printDetail(cmd.OutOrStdout(), det)
			return nil
		},
	}
	sess.Flags().StringVarP(&output, "output", "o", "", "output format: json | yaml (default: text)")
	cmd.AddCommand(sess, newDescribeRoleCmd(g), newDescribeTaskCmd(g))
	requireSubcommand(cmd, "resource")
	return cmd
}

func printDetail(w io.Writer, d api.SessionDetail) {
	now := time.Now()
	tw := tabwriter.NewWriter(w, 0, 4, 1, ' ', 0)
	kv := func(k string, v any) { fmt.Fprintf(tw, "%s:\t%v\n", k, v) }
	kv("Name", d.Name)
	kv("Role", d.Role)
	kv("Host", d.Host)
	kv("State", fmt.Sprintf("%s (since %s ago)", d.State, cells.ShortDur(now.Sub(d.StateSince))))
	// The same words as the table's columns: RUNTIME is tmux or exec, the
	// liveness axes are PANE and PROCESS.
	kv("Runtime", cells.Dash(d.RuntimeKind))
	if d.RuntimeKind != herd.RuntimeExec {
		kv("Pane", cells.Dash(string(d.Runtime)))
	}
	kv("Process", d.Process)
	kv("Activity", d.Activity)
	kv("Attached", d.Attached)
	kv("Restarts", d.Restarts)
	if d.BackoffUntil != nil {
		kv("Backoff until", fmt.Sprintf("%s (in %s)", cells.Clock(*d.BackoffUntil, now), cells.ShortDur(time.Until(*d.BackoffUntil))))
	}
	kv("Last exit", cells.LastExit(d.Exit, now))
	kv("Incarnation", cells.Dash(d.Incarnation))
	if d.Identity != nil && d.Identity.PID > 0 {
		kv("Agent process", fmt.Sprintf("pid %d, start time %d ticks, boot %s", d.Identity.PID, d.Identity.StartTime, d.Identity.BootID))
	}
	if d.Root != nil && d.Identity != nil && d.Root.PID > 0 && d.Root.PID != d.Identity.PID {
		kv("Launched process", fmt.Sprintf("pid %d (wrapper)", d.Root.PID))
	}
	if len(d.Argv) > 0 {
		kv("Command", strings.Join(d.Argv, " "))
		kv("Workdir", d.Workdir)
	}
	if d.Account != "" {
		kv("Account", d.Account)
	}
	if b := d.Budget; b != nil {
		kv("Budget", budgetText(b.DailyBudgetUSD, b.BudgetHard))
	}
	if w := d.Worktree; w != nil {
		state := "clean"
		if w.Dirty {
			state = "uncommitted changes"
		}
		ahead := fmt.Sprintf("%d commit(s) ahead of its base", w.Ahead)
		if w.Ahead < 0 {
			ahead = "its base is gone"
		}
		kv("Worktree", fmt.Sprintf("%s on %s, %s, %s", w.Path, w.Branch, state, ahead))
	}
	if u := d.Usage; u != (api.Usage{}) {
		kv("Usage", fmt.Sprintf("%s (input %d, output %d, cache read %d, cache write %d tokens)",
			u.Cost(), u.InputTokens, u.OutputTokens, u.CacheReadTokens, u.CacheWriteTokens))
	}
	if d.Snapshot != nil {
		kv("Resume snapshot", fmt.Sprintf("%s (agent %s, session id %s)", strings.Join(d.Snapshot.Argv, " "), cells.Dash(d.Snapshot.Agent), cells.Dash(d.Snapshot.AgentSessionID)))
	}
	if m, ok := d.ActivityDetail.(map[string]any); ok {
		line := fmt.Sprintf("silent %v (longest %v), last hook %v", m["silence"], m["longest_silence"], dashAny(m["last_hook"]))
		if inTool, _ := m["in_tool"].(bool); inTool {
			line += fmt.Sprintf(", in tool %v", m["tool"])
		}
		line += fmt.Sprintf(", stalls %v, warnings %v", m["stalls"], m["stall_warnings"])
		kv("Watchdog", line)
		if why, ok := m["auto_kill"]; ok {
			kv("Auto-kill", why)
		}
	}
	if n := d.Notification; n != nil {
		kv("Notification", fmt.Sprintf("%s since %s: %s; run %s", n.Need, cells.Clock(n.Since, now), n.Title, n.Action))
		kv("Notified", notificationChannels(n, now))
	}
	if m, ok := d.Diagnostics.(map[string]any); ok {
		kv("Diagnostics", fmt.Sprintf("state %v, cpu %s%%, rss %s, threads %v, fds %v, own tcp %v, wchan %v",
			m["proc_state"], num(m["cpu_percent"]), bytesText(m["rss_bytes"]), m["threads"], m["fds"], m["tcp_established"], dashAny(m["wchan"])))
		if cg, ok := m["cgroup"].(map[string]any); ok {
			kv("Cgroup", fmt.Sprintf("cpu %ss, memory %s (%v), oom kills %v",
				num(cg["cpu_seconds"]), bytesText(cg["memory_bytes"]), cg["memory_source"], cg["oom_kills"]))
		}
		if kids, ok := m["children"].([]any); ok && len(kids) > 0 {
			var parts []string
			for _, k := range kids {
				if c, ok := k.(map[string]any); ok {
					parts = append(parts, fmt.Sprintf("%v (%v)", c["comm"], c["pid"]))
				}
			}
			kv("Children", strings.Join(parts, ", "))
		}
	}
	tw.Flush()
	if len(d.StderrTail) > 0 {
		fmt.Fprintln(w, "Stderr (tail):")
		for _, l := range d.StderrTail {
			fmt.Fprintln(w, "  "+l)
		}
	}
	fmt.Fprintln(w, "Events:")
	ew := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(ew, "  TIME\tKIND\tREASON\tMESSAGE")
	for _, e := range d.RecentEvents {
		fmt.Fprintf(ew, "  %s\t%s\t%s\t%s\n", cells.Clock(e.Time, now), e.Kind, cells.Dash(e.Reason), e.Message)
	}
	ew.Flush()
}

func dashAny(v any) string {
	if v == nil || v == "" {
		return "-"
	}
	return fmt.Sprint(v)
}

func num(v any) string {
	if f, ok := v.(float64); ok {
		return fmt.Sprintf("%.1f", f)
	}
	return "?"
}

func bytesText(v any) string {
	f, ok := v.(float64)
	if !ok {
		return "?"
	}
	return cells.Bytes(f)
}

// notificationChannels says how each channel took a notification:
// "ntfy delivered, webhook retrying in 4s (2 tries: 503 ...)".
func notificationChannels(n *api.Notification, now time.Time) string {
	var parts []string
	for _, name := range slices.Sorted(maps.Keys(n.Channels)) {
		c := n.Channels[name]
		switch {
		case c.Delivered:
			parts = append(parts, name+" delivered")
		case c.NextTry != nil:
			parts = append(parts, fmt.Sprintf("%s retrying in %s (%d tries: %s)", name, cells.ShortDur(c.NextTry.Sub(now)), c.Attempts, c.LastError))
		default:
			parts = append(parts, name+" sending")
		}
	}
	return strings.Join(parts, ", ")
}

// budgetText says a role's daily budget and what spending it does.
func budgetText(usd float64, hard bool) string {
	if hard {
		return fmt.Sprintf("$%.2f a day, its sessions stopped at once when spent (budget_hard)", usd)
	}
	return fmt.Sprintf("$%.2f a day, its sessions stopped at their next idle moment once spent", usd)
}
