package main

import (
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/spf13/cobra"
	"herd/internal/api"
	"herd/internal/targets"
)

// maxInjectText bounds the text of one inject. The daemon reads at most
// 8 MiB of JSON, and JSON escaping can make text up to six times larger.
const maxInjectText = 1 << 20

func newInjectCmd(g *globals) *cobra.Command {
	var noEnter, noClear, fromStdin, all, multiline bool
	var role, sel string
	cmd := &cobra.Command{
		Use:   "inject [--no-enter] [--no-clear] [--multiline] NAME TEXT | inject --stdin [--no-enter] [--no-clear] [--multiline] NAME | inject --role R|--all|-l SELECTOR TEXT",
		Short: "Type TEXT into the agent (literal; text starting with - is safe; large text works)",
		Long: `Type TEXT into a live tmux session's agent, literally, then press Enter.

For Claude Code, Codex and Gemini CLI the agent's input line is emptied
first (C-e, then C-u presses), so text left there (the prompt an Esc puts
back after an interrupted turn) is not glued to TEXT; --no-clear keeps it.
An empty TEXT clears nothing: it presses Enter on what is there. Other
agents get TEXT typed as it is.

Enter comes once the pane shows TEXT, after the agent's own fast-return
window (Gemini CLI reads an Enter within 30 ms of a typed key as a new
line). For those three agents a one-line TEXT must then leave the input
line: Enter is pressed once more if it did not, and the inject fails with
"the text stayed on the agent's input line" if it still did not.

Everything after NAME is text, never a flag: 'herd inject w-0 -v' types "-v",
and 'herd inject w-0 -' types "-". Give flags before NAME; --no-enter is also
understood right after TEXT. TEXT is one argument: quote it.

--stdin reads the text from stdin instead (up to 1 MiB; one trailing newline
is dropped, Enter is pressed unless --no-enter), for text too large for the
command line or kept in a file.

TEXT with a line break (\n or \r) is refused unless --multiline is given:
typed, a line break is an Enter, and would submit part of the text (even with
--no-enter). With --multiline the text is pasted as one input (tmux bracketed
paste: an agent that asked for it, as Claude Code, Codex and Gemini CLI do,
takes its line breaks as part of the input), then Enter unless --no-enter.

--role R, --all and -l SELECTOR type TEXT into many sessions (--role and -l
narrow together): each is reported on a line of its own, delivered or
refused and why (not live, not a tmux session). The exit is non-zero when
any was refused.`,
		Example: `  herd inject worker-0 "run the tests"
  herd inject worker-0 "-v: verbose, please"
  herd inject --no-enter worker-0 "draft, not sent"
  herd inject --no-clear worker-0 " and one more thing"
  herd inject --stdin --multiline worker-0 < prompt.md
  herd inject --role worker "commit and push"
  herd inject -l role=worker,activity=idle "next task, please"
  herd inject --all --stdin --multiline < notice.md`,
		Args:              cobra.ArbitraryArgs,
		ValidArgsFunction: completeFirstSession(g),
		RunE: func(cmd *cobra.Command, args []string) error {
			if all || role != "" || sel != "" {
				t := api.Targets{Role: role, All: all, Selector: sel}
				req := api.InjectManyRequest{Targets: t, Enter: !noEnter, NoClear: noClear, Multiline: multiline}
				return injectMany(cmd, g, req, args, fromStdin)
			}
			var name, text string
			trailingNoEnter := false
			if fromStdin {
				if len(args) != 1 {
					return fmt.Errorf("inject --stdin: want NAME only (the text comes from stdin), got %d argument(s)", len(args))
				}
				name = args[0]
			} else {
				var err error
				if name, text, trailingNoEnter, err = splitInjectArgs(args); err != nil {
					return err
				}
			}
			if err := checkSession("inject", name); err != nil {
				return err
			}
			if fromStdin {
				var err error
				if text, err = readInjectText(cmd.InOrStdin()); err != nil {
					return err
				}
			}
			if len(text) > maxInjectText {
				return fmt.Errorf("inject: text is %d bytes, limit %d", len(text), maxInjectText)
			}
			req := api.InjectRequest{Text: text, Enter: !noEnter && !trailingNoEnter, NoClear: noClear, Multiline: multiline}
			return post(cmd, g, sessionPath(name, "/inject"), req)
		},
	}
	// Flags end at NAME, so text that looks like a flag stays text.
	cmd.Flags().SetInterspersed(false)
	cmd.Flags().BoolVar(&noEnter, "no-enter", false, "type the text without pressing Enter (default: press Enter)")
	cmd.Flags().BoolVar(&noClear, "no-clear", false, "keep what is on the agent's input line (default: empty it first, for Claude, Codex and Gemini)")
	cmd.Flags().BoolVar(&fromStdin, "stdin", false, "read the text from stdin (up to 1 MiB) instead of TEXT")
	cmd.Flags().BoolVar(&multiline, "multiline", false, "paste text with line breaks as one input (bracketed paste); without it such text is refused")
	cmd.Flags().StringVar(&role, "role", "", "type into every session of this role")
	cmd.Flags().BoolVar(&all, "all", false, "type into every session")
	cmd.Flags().StringVarP(&sel, "selector", "l", "", "type into the sessions matching key=value[,key!=value...], keys: "+strings.Join(targets.LabelKeys, ", "))
	return cmd
}

// splitInjectArgs reads `inject`'s arguments after its flags: NAME TEXT,
// NAME -- TEXT (the "--" older usage put there), or NAME TEXT --no-enter
// (the flag where the synopsis shows it).
func splitInjectArgs(args []string) (name, text string, noEnter bool, err error) {
	switch {
	case len(args) == 2:
		return args[0], args[1], false, nil
	case len(args) == 3 && args[1] == "--":
		return args[0], args[2], false, nil
	case len(args) == 3 && args[2] == "--no-enter":
		return args[0], args[1], true, nil
	case len(args) < 2:
		return "", "", false, fmt.Errorf("inject: want NAME and TEXT (or --stdin NAME to read the text from stdin), e.g. herd inject worker-0 \"run the tests\"")
	}
	return "", "", false, fmt.Errorf("inject: want one TEXT argument after NAME, got %d (quote the text; flags go before NAME)", len(args)-1)
}

// readInjectText reads the text to inject from r, dropping one trailing
// newline: Enter is a separate key press.
func readInjectText(r io.Reader) (string, error) {
	return readStdinText(r, maxInjectText, "inject", "text")
}

// readStdinText reads a text given on stdin (r), at most limit bytes,
// dropping one trailing newline (the file's or the terminal's last line
// end, not part of the text). cmd and what name it in an error.
func readStdinText(r io.Reader, limit int, cmd, what string) (string, error) {
	b, err := io.ReadAll(io.LimitReader(r, int64(limit)+1))
	if err != nil {
		return "", fmt.Errorf("%s: read stdin: %w", cmd, err)
	}
	if len(b) > limit {
		return "", fmt.Errorf("%s: %s on stdin is over the %d-byte limit", cmd, what, limit)
	}
	s := string(b)
	if strings.HasSuffix(s, "\n") {
		s = strings.TrimSuffix(strings.TrimSuffix(s, "\n"), "\r")
	}
	return s, nil
}

// injectMany types text into every session t names and prints each
// outcome; any refusal makes the exit non-zero.
func injectMany(cmd *cobra.Command, g *globals, req api.InjectManyRequest, args []string, fromStdin bool) error {
	t := req.Targets
	var text string
	switch {
	case fromStdin && len(args) != 0:
		return fmt.Errorf("inject --stdin: want no TEXT argument with --role/--all/-l (the text comes from stdin), got %d", len(args))
	case fromStdin:
		var err error
		if text, err = readInjectText(cmd.InOrStdin()); err != nil {
			return err
		}
	case len(args) == 2 && args[1] == "--no-enter":
		text, req.Enter = args[0], false
	case len(args) != 1:
		return fmt.Errorf("inject: with --role, --all or -l, want one TEXT argument (no NAME), got %d", len(args))
	default:
		text = args[0]
	}
	if t.Role != "" {
		if err := checkRole("inject: --role", t.Role); err != nil {
			return err
		}
	}
	if _, err := targets.Check(t); err != nil {
		return fmt.Errorf("inject: %w", err)
	}
	if len(text) > maxInjectText {
		return fmt.Errorf("inject: text is %d bytes, limit %d", len(text), maxInjectText)
	}
	var res api.InjectManyResult
	req.Text = text
	if err := g.do(cmd.Context(), http.MethodPost, "/v1/inject", nil, req, &res); err != nil {
		return err
	}
	refused := 0
	w := cmd.OutOrStdout()
	for _, d := range res.Deliveries {
		if d.Delivered {
			fmt.Fprintf(w, "%s\tdelivered\n", d.Session)
		} else {
			refused++
			fmt.Fprintf(w, "%s\trefused\t%s\n", d.Session, d.Error)
		}
	}
	switch {
	case len(res.Deliveries) == 0:
		return fmt.Errorf("inject: %s names no session", targets.Describe(t))
	case refused > 0:
		return fmt.Errorf("inject: %d of %d session(s) refused the text", refused, len(res.Deliveries))
	}
	fmt.Fprintln(cmd.ErrOrStderr(), res.Message)
	return nil
}
