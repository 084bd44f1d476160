package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"herd/internal/api"
)

// maxInjectText bounds the text of one inject. The daemon reads at most
// 8 MiB of JSON, and JSON escaping can make text up to six times larger.
const maxInjectText = 1 << 20

func newInjectCmd(g *globals) *cobra.Command {
	var noEnter, noClear, fromStdin bool
	cmd := &cobra.Command{
		Use:   "inject [--no-enter] [--no-clear] NAME TEXT | inject --stdin [--no-enter] [--no-clear] NAME",
		Short: "Type TEXT into the agent (literal; text starting with - is safe; large text works)",
		Long: `Type TEXT into a live tmux session's agent, literally, then press Enter.

For Claude Code, Codex and Gemini CLI the agent's input line is emptied
first (C-e, then C-u presses), so text left there (the prompt an Esc puts
back after an interrupted turn) is not glued to TEXT; --no-clear keeps it.
An empty TEXT clears nothing: it presses Enter on what is there. Other
agents get TEXT typed as it is.

Everything after NAME is text, never a flag: 'herd inject w-0 -v' types "-v",
and 'herd inject w-0 -' types "-". Give flags before NAME; --no-enter is also
understood right after TEXT. TEXT is one argument: quote it.

--stdin reads the text from stdin instead (up to 1 MiB; one trailing newline
is dropped, Enter is pressed unless --no-enter), for text too large for the
command line or kept in a file.`,
		Example: `  herd inject worker-0 "run the tests"
  herd inject worker-0 "-v: verbose, please"
  herd inject --no-enter worker-0 "draft, not sent"
  herd inject --no-clear worker-0 " and one more thing"
  herd inject --stdin worker-0 < prompt.md`,
		Args:              cobra.ArbitraryArgs,
		ValidArgsFunction: completeFirstSession(g),
		RunE: func(cmd *cobra.Command, args []string) error {
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
			req := api.InjectRequest{Text: text, Enter: !noEnter && !trailingNoEnter, NoClear: noClear}
			return post(cmd, g, sessionPath(name, "/inject"), req)
		},
	}
	// Flags end at NAME, so text that looks like a flag stays text.
	cmd.Flags().SetInterspersed(false)
	cmd.Flags().BoolVar(&noEnter, "no-enter", false, "type the text without pressing Enter (default: press Enter)")
	cmd.Flags().BoolVar(&noClear, "no-clear", false, "keep what is on the agent's input line (default: empty it first, for Claude, Codex and Gemini)")
	cmd.Flags().BoolVar(&fromStdin, "stdin", false, "read the text from stdin (up to 1 MiB) instead of TEXT")
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
	b, err := io.ReadAll(io.LimitReader(r, maxInjectText+1))
	if err != nil {
		return "", fmt.Errorf("inject: read stdin: %w", err)
	}
	if len(b) > maxInjectText {
		return "", fmt.Errorf("inject: text on stdin is over the %d-byte limit", maxInjectText)
	}
	s := string(b)
	if strings.HasSuffix(s, "\n") {
		s = strings.TrimSuffix(strings.TrimSuffix(s, "\n"), "\r")
	}
	return s, nil
}
