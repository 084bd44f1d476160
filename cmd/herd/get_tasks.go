package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"herd"
	"herd/internal/api"
	"herd/internal/cells"
)

const (
	taskHeader     = "ID\tROLE\tSTATE\tSESSION\tCOMMITS\tAGE\tTITLE"
	taskWideHeader = "\tBRANCH\tBASE\tREASON\tREPO"
	// Cells of text a person or an agent wrote are clipped to these
	// many runes.
	taskTitleWidth  = 50
	taskReasonWidth = 60
)

// newGetTasksCmd is `herd get tasks`: the tasks, oldest first.
func newGetTasksCmd(g *globals) *cobra.Command {
	var tf getFlags
	var states []string
	cmd := &cobra.Command{
		Use:     "tasks [ID...]",
		Aliases: []string{"task", "t"},
		Short:   "List tasks: state, the replica holding each, commits on its branch, age, title",
		Example: `  herd get tasks
  herd get tasks --state review,needs_you
  herd get tasks --role worker -o wide
  herd get tasks t-3 t-4 -o json`,
		Args:              namesArg(checkTask),
		ValidArgsFunction: completeTasks(g),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput("get tasks", tf.output, "wide", "json", "yaml", "name"); err != nil {
				return err
			}
			if err := checkTaskStates("get tasks: --state", states); err != nil {
				return err
			}
			if tf.role != "" {
				if err := checkRole("get tasks: --role", tf.role); err != nil {
					return err
				}
			}
			return runGet(cmd, tf, func(ctx context.Context) (listing, error) {
				var list []herd.Task
				err := g.taskAPI("", func(c *api.Client) (err error) {
					list, err = c.Tasks(ctx, states, tf.role)
					return err
				})
				if err != nil {
					return listing{}, err
				}
				list, missing := filterTasks(list, args)
				return listing{kind: "task", items: list, missing: missing, print: func(w io.Writer, o printOpts) error {
					return printTasks(w, list, o)
				}, names: taskIDs(list)}, nil
			})
		},
	}
	f := cmd.Flags()
	f.StringVarP(&tf.output, "output", "o", "", "output format: wide | json | yaml | name (default: a table)")
	f.BoolVarP(&tf.watch, "watch", "w", false, "watch: on a terminal, the list redrawn in place each second; into a pipe, the list again whenever it changes")
	f.StringSliceVar(&states, "state", nil, "only tasks in these states (repeat the flag or separate with commas): "+strings.Join(taskStateNames(), ", "))
	f.StringVar(&tf.role, "role", "", "only this role's tasks")
	f.BoolVar(&tf.noHeaders, "no-headers", false, "print the table without its header line")
	cmd.RegisterFlagCompletionFunc("role", completeRoles(g))
	cmd.RegisterFlagCompletionFunc("state", cobra.FixedCompletions(taskStateNames(), cobra.ShellCompDirectiveNoFileComp))
	cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{"wide", "json", "yaml", "name"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// taskStateNames are the task states, in the order of a task's life.
func taskStateNames() []string {
	out := make([]string, len(herd.TaskStates))
	for i, s := range herd.TaskStates {
		out[i] = string(s)
	}
	return out
}

// checkTaskStates rejects a value of --state that is no task state.
func checkTaskStates(cmd string, states []string) error {
	for _, s := range states {
		if !herd.ValidTaskState(s) {
			return fmt.Errorf("%s: %q is not a task state (want %s)", cmd, s, orList(taskStateNames()))
		}
	}
	return nil
}

// filterTasks keeps the tasks named (all when ids is empty) and returns
// the ids not found.
func filterTasks(list []herd.Task, ids []string) (kept []herd.Task, missing []string) {
	kept = []herd.Task{}
	for _, t := range list {
		if len(ids) == 0 || slices.Contains(ids, t.ID) {
			kept = append(kept, t)
		}
	}
	for _, id := range ids {
		if !slices.ContainsFunc(list, func(t herd.Task) bool { return t.ID == id }) && !slices.Contains(missing, id) {
			missing = append(missing, id)
		}
	}
	return kept, missing
}

func taskIDs(list []herd.Task) []string {
	out := make([]string, len(list))
	for i, t := range list {
		out[i] = t.ID
	}
	return out
}

// printTasks writes the tasks table. Every cell of text is escaped: a
// title, a reason, a path may hold bytes a terminal would act on.
func printTasks(w io.Writer, list []herd.Task, o printOpts) error {
	tw, flush := newTable(w)
	if !o.noHeaders {
		header := taskHeader
		if o.wide {
			header += taskWideHeader
		}
		fmt.Fprintln(tw, header)
	}
	for _, t := range list {
		age := "-"
		if !t.CreatedAt.IsZero() {
			age = cells.ShortDur(o.now.Sub(t.CreatedAt))
		}
		row := fmt.Sprintf("%s\t%s\t%s\t%s\t%d\t%s\t%s", cell(t.ID, 20), cell(t.Role, 41), cell(string(t.State), 20),
			cell(t.Session, 50), t.Commits, age, cell(taskTitle(t), taskTitleWidth))
		if o.wide {
			row += fmt.Sprintf("\t%s\t%s\t%s\t%s", cell(t.Branch, 60), cell(t.Base, 60), cell(t.Reason, taskReasonWidth), cell(t.Repo, 200))
		}
		fmt.Fprintln(tw, row)
	}
	return flush()
}

// taskTitle is a task's title, or the first line of its prompt when it
// has none.
func taskTitle(t herd.Task) string {
	if t.Title != "" {
		return t.Title
	}
	first, _, _ := strings.Cut(strings.TrimSpace(t.Prompt), "\n")
	return first
}
