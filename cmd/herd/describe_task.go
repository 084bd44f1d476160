package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"herd/internal/api"
	"herd/internal/cells"
)

// describePromptLines bounds the prompt `describe task` prints.
const describePromptLines = 40

func newDescribeTaskCmd(g *globals) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:     "task ID",
		Aliases: []string{"tasks", "t"},
		Short:   "A task's fields, prompt, check and the events of its life",
		Example: `  herd describe task t-3
  herd describe task t-3 -o json`,
		Args:              taskArg,
		ValidArgsFunction: completeTasks(g),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput("describe task", output, "json", "yaml"); err != nil {
				return err
			}
			var d api.TaskDetail
			err := g.taskAPI(args[0], func(c *api.Client) (err error) {
				d, err = c.Task(cmd.Context(), args[0])
				return err
			})
			if err != nil {
				return err
			}
			switch output {
			case "json":
				return writeJSON(cmd.OutOrStdout(), d)
			case "yaml":
				return writeYAML(cmd.OutOrStdout(), d)
			}
			printTaskDetail(cmd.OutOrStdout(), d, time.Now())
			return nil
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: json | yaml (default: text)")
	return cmd
}

// printTaskDetail writes a task for a person to read. All its text is
// escaped: a prompt, a title, a check's output may hold bytes a terminal
// would act on (the prompt and the output keep their line ends and tabs).
func printTaskDetail(w io.Writer, d api.TaskDetail, now time.Time) {
	tw := tabwriter.NewWriter(w, 0, 4, 1, ' ', 0)
	kv := func(k, v string) { fmt.Fprintf(tw, "%s:\t%s\n", k, v) }
	line := func(s string) string { return cells.Dash(escapeText(s, "")) }
	when := func(t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		return fmt.Sprintf("%s (%s ago)", cells.Clock(t, now), cells.ShortDur(now.Sub(t)))
	}
	kv("ID", line(d.ID))
	kv("Title", line(d.Title))
	kv("Role", line(d.Role))
	kv("State", line(string(d.State)))
	kv("Reason", line(d.Reason))
	kv("Session", line(d.Session))
	kv("Repo", line(d.Repo))
	kv("Base", line(d.Base))
	kv("Branch", line(d.Branch))
	kv("Worktree", line(d.Worktree))
	kv("Commits", fmt.Sprint(d.Commits))
	if d.PR != "" {
		kv("Pull request", line(d.PR))
	}
	kv("Created", when(d.CreatedAt))
	kv("Updated", when(d.UpdatedAt))
	if d.Incarnation != "" {
		kv("Incarnation", line(d.Incarnation))
	}
	if d.Conversation != "" {
		kv("Conversation", line(d.Conversation))
	}
	if d.Attempts > 0 {
		kv("Check attempts", fmt.Sprintf("%d failed check(s) sent back to the agent", d.Attempts))
	}
	if d.Nudges > 0 {
		kv("Nudges", fmt.Sprintf("%d stalled-agent nudge(s) sent", d.Nudges))
	}
	if d.Reacted != "" && d.ReactedAt != nil {
		kv("Waiting on", fmt.Sprintf("the agent's answer to %s, sent %s", line(d.Reacted), when(*d.ReactedAt)))
	}
	if d.ApprovedBy != "" {
		kv("Approved by", line(d.ApprovedBy))
	}
	if d.Landed != "" {
		kv("Landed", line(d.Landed))
	}
	check := "-"
	if len(d.Check) > 0 {
		check = escapeText(strings.Join(d.Check, " "), "")
	}
	kv("Check", check)
	ran := d.CheckLog != "" || d.CheckTail != ""
	if ran {
		exit := fmt.Sprintf("exit %d", d.CheckExit)
		switch {
		case d.CheckExit == 0:
			exit = "exit 0 (passed)"
		case d.CheckExit < 0:
			exit = "did not run to an exit (timed out, or could not start)"
		}
		kv("Check result", exit)
		kv("Check log", line(d.CheckLog))
	}
	tw.Flush()
	if ran && d.CheckTail != "" {
		fmt.Fprintln(w, "Check output (tail):")
		printIndented(w, d.CheckTail, 0)
	}
	fmt.Fprintln(w, "Prompt:")
	if more := printIndented(w, d.Prompt, describePromptLines); more > 0 {
		fmt.Fprintf(w, "  (%d more lines; 'herd describe task %s -o json' shows it whole)\n", more, escapeText(d.ID, ""))
	}
	fmt.Fprintln(w, "Events:")
	ew := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(ew, "  TIME\tKIND\tREASON\tMESSAGE")
	for _, e := range d.Events {
		fmt.Fprintf(ew, "  %s\t%s\t%s\t%s\n", cells.Clock(e.Time, now), line(e.Kind), line(e.Reason), escapeText(e.Message, ""))
	}
	ew.Flush()
}

// printIndented writes text indented by two spaces, escaped but for its
// line ends and tabs, at most max lines (all when max <= 0); it returns
// how many lines it left out.
func printIndented(w io.Writer, text string, max int) (more int) {
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	if max > 0 && len(lines) > max {
		lines, more = lines[:max], len(lines)-max
	}
	for _, l := range lines {
		fmt.Fprintln(w, "  "+escapeText(l, "\t"))
	}
	return more
}
