package main

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"herd"
	"herd/internal/api"
	"herd/internal/redraw"
	"herd/internal/tasks"
)

func newTaskCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "task add|approve|comment|cancel|retry|diff",
		Short: "Queue work for a role, review it and have it landed: add, approve, comment, cancel, retry, diff",
		Long: `A task is a unit of work for a role: a prompt, a repository and a base
branch. A replica of the role takes it and works on branch herd/t-<n> in a
worktree of its own; when the agent is done, the task's check runs on the
branch; once it passes, a person reviews the change (herd task diff) and
approves it, and herd merges it into its base. A comment sends the
person's words to the agent and the task goes back to work.

List tasks with 'herd get tasks', follow one with 'herd describe task ID'.`,
		Example: `  herd task add worker "fix the flaky TestLogin"
  herd get tasks --state review
  herd task diff t-3
  herd task comment t-3 "use a mutex, not a channel"
  herd task approve t-3`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return cmd.Help()
			}
			var names []string
			for _, c := range cmd.Commands() {
				if c.IsAvailableCommand() {
					names = append(names, c.Name())
				}
			}
			return fmt.Errorf("task: unknown action %q (want %s)", args[0], orList(names))
		},
	}
	cmd.AddCommand(newTaskAddCmd(g),
		newTaskVerbCmd(g, api.TaskApprove, "Approve a task in review: herd lands it on its base",
			"Approve a task whose check passed: herd merges its branch into its base\n(the role's merge: merge, squash or rebase), then the task is landed.",
			"  herd task approve t-3"),
		newTaskCommentCmd(g),
		newTaskVerbCmd(g, api.TaskCancel, "Cancel a task that has not landed: its replica is freed for other tasks",
			"Cancel a task that has not landed: its agent stops working on it and its\nreplica is freed for other tasks. 'herd task retry' queues it again.",
			"  herd task cancel t-3"),
		newTaskVerbCmd(g, api.TaskRetry, "Queue a failed or cancelled task again",
			"Queue a failed or cancelled task again, for a replica of its role to take.",
			"  herd task retry t-3"),
		newTaskDiffCmd(g),
	)
	return cmd
}

func newTaskAddCmd(g *globals) *cobra.Command {
	var repo, base, title, check string
	cmd := &cobra.Command{
		Use:   "add ROLE [--repo PATH] [--base BRANCH] [--title T] [--check CMD] PROMPT|-",
		Short: "Queue a task for a role; prints its id (t-<n>)",
		Long: `Queue a task for ROLE: PROMPT is what its agent is asked to do. With PROMPT -
the prompt is read from stdin (up to 1 MiB). A PROMPT that starts with -
goes after --.

--repo is a directory in the repository to work in (default: the role's
workdir), --base the branch to start from and land on (default: the branch
checked out there). --check is the command run on the branch when the agent
is done, in place of the role's check; it is split at white space into the
program and its arguments, never given to a shell (write a script for
anything more).

Prints the task's id alone, e.g. t-3.`,
		Example: `  herd task add worker "fix the flaky TestLogin"
  herd task add worker --repo ~/src/app --base main --title "flaky login" - < issue.md
  herd task add worker --check "go test ./..." "make the cache safe for concurrent use"
  herd task add worker -- "-v should print the config: add it"`,
		Args:              taskAddArgs,
		ValidArgsFunction: completeFirstRole(g),
		RunE: func(cmd *cobra.Command, args []string) error {
			prompt := args[1]
			if prompt == "-" {
				var err error
				if prompt, err = readStdinText(cmd.InOrStdin(), herd.MaxTaskPrompt, "task add", "the prompt"); err != nil {
					return err
				}
			}
			switch {
			case strings.TrimSpace(prompt) == "":
				return fmt.Errorf("task add: the prompt is empty")
			case len(prompt) > herd.MaxTaskPrompt:
				return fmt.Errorf("task add: the prompt is %d bytes, limit %d", len(prompt), herd.MaxTaskPrompt)
			}
			req := api.AddTaskRequest{Role: args[0], Base: base, Title: title, Prompt: prompt}
			if repo != "" {
				abs, err := filepath.Abs(repo)
				if err != nil {
					return fmt.Errorf("task add: --repo: %w", err)
				}
				req.Repo = abs
			}
			if cmd.Flags().Changed("check") {
				if req.Check = strings.Fields(check); len(req.Check) == 0 {
					return fmt.Errorf("task add: --check: the command is empty")
				}
			}
			var t herd.Task
			err := g.taskAPI("", func(c *api.Client) (err error) {
				t, err = c.AddTask(cmd.Context(), req)
				return err
			})
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), t.ID)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&repo, "repo", "", "a directory in the repository to work in (default: the role's workdir)")
	f.StringVar(&base, "base", "", "the branch to start from and land on (default: the one checked out in the repository)")
	f.StringVar(&title, "title", "", "a short title for listings (default: the prompt's first line)")
	f.StringVar(&check, "check", "", `the check run on the branch, split at white space, no shell (e.g. "go test ./..."; default: the role's)`)
	return cmd
}

// taskAddArgs is task add's cobra.PositionalArgs: ROLE and PROMPT.
func taskAddArgs(cmd *cobra.Command, args []string) error {
	switch {
	case len(args) == 0:
		return fmt.Errorf(`task add: want ROLE and PROMPT (or - to read the prompt from stdin), e.g. herd task add worker "fix the flaky test"`)
	case len(args) == 1:
		if err := checkRole("task add", args[0]); err != nil {
			return err
		}
		return fmt.Errorf("task add: missing PROMPT after ROLE %s (give - to read it from stdin)", args[0])
	case len(args) > 2:
		return fmt.Errorf("task add: want one PROMPT argument after ROLE, got %d (quote the prompt)", len(args)-1)
	}
	return checkRole("task add", args[0])
}

// newTaskVerbCmd is `herd task VERB ID` for a verb that takes no text.
func newTaskVerbCmd(g *globals, verb, short, long, example string) *cobra.Command {
	return &cobra.Command{
		Use:               verb + " ID",
		Short:             short,
		Long:              long,
		Example:           example,
		Args:              taskArg,
		ValidArgsFunction: completeTasks(g),
		RunE: func(cmd *cobra.Command, args []string) error {
			return taskVerb(cmd, g, verb, args[0], "")
		},
	}
}

func newTaskCommentCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "comment ID TEXT|-",
		Short: "Ask for changes: TEXT goes to the task's agent, the task back to work",
		Long: `Send a person's comment on a task to its agent, which works on it again;
the check and the review follow as before. With TEXT - the text is read from
stdin (up to 64 KiB).`,
		Example: `  herd task comment t-3 "use a mutex, not a channel"
  herd task comment t-3 - < review.md`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 2 {
				return fmt.Errorf(`task comment: want ID and TEXT (or - to read the text from stdin), e.g. herd task comment t-3 "use a mutex"; got %d arguments`, len(args))
			}
			return checkTask("task comment", args[0])
		},
		ValidArgsFunction: completeFirstTask(g),
		RunE: func(cmd *cobra.Command, args []string) error {
			text := args[1]
			if text == "-" {
				var err error
				if text, err = readStdinText(cmd.InOrStdin(), tasks.MaxComment, "task comment", "the text"); err != nil {
					return err
				}
			}
			switch {
			case strings.TrimSpace(text) == "":
				return fmt.Errorf("task comment: the text is empty")
			case len(text) > tasks.MaxComment:
				return fmt.Errorf("task comment: the text is %d bytes, limit %d", len(text), tasks.MaxComment)
			}
			return taskVerb(cmd, g, api.TaskComment, args[0], text)
		},
	}
}

// taskVerb carries out verb on task id and says the task's state after.
func taskVerb(cmd *cobra.Command, g *globals, verb, id, text string) error {
	var t herd.Task
	err := g.taskAPI(id, func(c *api.Client) (err error) {
		t, err = c.TaskVerb(cmd.Context(), verb, id, text)
		return err
	})
	if err != nil {
		return err
	}
	fmt.Fprintln(cmd.OutOrStdout(), taskNow(t))
	return nil
}

// taskNow is the line a verb prints: "task t-3 is now landed", and the
// reason when there is one.
func taskNow(t herd.Task) string {
	line := fmt.Sprintf("task %s is now %s", escapeText(t.ID, ""), escapeText(string(t.State), ""))
	if t.Reason != "" {
		line += " (" + escapeText(t.Reason, "") + ")"
	}
	return line
}

func newTaskDiffCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "diff ID",
		Short: "Print a task's change against its base (git diff BASE...BRANCH)",
		Long: `Print a task's change against its base, as git diff BASE...herd/ID prints
it. On a terminal, control bytes in it (other than line ends and tabs) are
shown escaped; into a pipe or a file it is written as it is. A diff over
4 MiB is cut, with a note on stderr.`,
		Example: `  herd task diff t-3
  herd task diff t-3 | less -R`,
		Args:              taskArg,
		ValidArgsFunction: completeTasks(g),
		RunE: func(cmd *cobra.Command, args []string) error {
			var d api.TaskDiff
			err := g.taskAPI(args[0], func(c *api.Client) (err error) {
				d, err = c.TaskDiff(cmd.Context(), args[0])
				return err
			})
			if err != nil {
				return err
			}
			writeDiff(cmd.OutOrStdout(), cmd.ErrOrStderr(), d, redraw.Of(cmd.OutOrStdout()) != nil)
			return nil
		},
	}
}

// writeDiff writes a task's diff to w, escaped for a terminal, and says
// on info when it is empty or cut.
func writeDiff(w, info io.Writer, d api.TaskDiff, terminal bool) {
	text := d.Diff
	if terminal {
		text = escapeText(text, "\n\t")
	}
	io.WriteString(w, text)
	switch {
	case d.Diff == "":
		fmt.Fprintf(info, "task %s: no change against %s\n", escapeText(d.Task, ""), escapeText(d.Base, ""))
	case d.Truncated:
		fmt.Fprintf(info, "(the diff is cut at %d bytes; see it whole with git diff %s...%s in the task's repository)\n",
			len(d.Diff), escapeText(d.Base, ""), escapeText(d.Branch, ""))
	}
}

// checkTask rejects anything that is not a task id (t-<n>).
func checkTask(cmd, id string) error {
	if herd.TaskSeq(id) <= 0 {
		return fmt.Errorf("%s: %q is not a task id (want t-<n>, e.g. t-3)", cmd, id)
	}
	return nil
}

// taskArg is a cobra.PositionalArgs: exactly one argument, a task id.
func taskArg(cmd *cobra.Command, args []string) error {
	if len(args) != 1 {
		return fmt.Errorf("%s: want one task ID (e.g. t-3), got %d arguments", cmdPath(cmd), len(args))
	}
	return checkTask(cmdPath(cmd), args[0])
}

// taskAPI runs one call of the task API and words its errors for the
// user: no daemon, how to start one; a 404 on task id, "task ID not
// found". id is "" for a call on no one task.
func (g *globals) taskAPI(id string, call func(*api.Client) error) error {
	c, err := g.client()
	if err != nil {
		return err
	}
	path := "/v1/tasks"
	if id != "" {
		path = api.TaskPath(id, "")
	}
	return explainPath(call(c), g, path)
}
