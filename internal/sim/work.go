package sim

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// workQuiet is how long the input must stay quiet before a --work turn
// starts: a pasted prompt arrives as several lines.
const workQuiet = 300 * time.Millisecond

// workFile is the file a --work turn appends the prompt to.
const workFile = "WORK.md"

// turn is one --work turn on the prompt text: the UserPromptSubmit hook
// (working), the prompt appended to WORK.md and committed in the working
// directory's repository, then the Stop hook (idle). A failure is
// written to stderr and the turn still ends, as an agent's would.
func (a *agent) turn(ctx context.Context, text string) {
	cwd := a.stream.cwd
	a.hook(ctx, hookStep{Event: "UserPromptSubmit"})
	a.emit(a.stream.text("Working on: " + firstLine(text)))
	if err := commitWork(ctx, cwd, text, a.o.workPerBranch); err != nil {
		fmt.Fprintln(a.err, "sim:", err)
	}
	a.hook(ctx, hookStep{Event: "Stop"})
	a.prompt()
}

func (a *agent) hook(ctx context.Context, st hookStep) {
	if err := playHook(ctx, a.o.herd, st, a.o.sessionID, a.stream.cwd, 0); err != nil {
		fmt.Fprintln(a.err, err)
	}
}

// commitWork appends text to WORK.md in dir (perBranch: to
// work/<branch>.md) and commits it.
func commitWork(ctx context.Context, dir, text string, perBranch bool) error {
	name := workFile
	if perBranch {
		cmd := exec.CommandContext(ctx, "git", "rev-parse", "--abbrev-ref", "HEAD")
		cmd.Dir = dir
		out, err := cmd.Output()
		if err != nil {
			return fmt.Errorf("git rev-parse: %w", err)
		}
		name = filepath.Join("work", strings.ReplaceAll(strings.TrimSpace(string(out)), "/", "-")+".md")
		if err := os.MkdirAll(filepath.Join(dir, "work"), 0o755); err != nil {
			return err
		}
	}
	f, err := os.OpenFile(filepath.Join(dir, name), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(f, "%s\n", text)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	for _, args := range [][]string{
		{"add", "--", name},
		{"-c", "user.name=sim", "-c", "user.email=sim@localhost", "commit", "--quiet", "-m", "sim: " + firstLine(text)},
	} {
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		cmd := exec.CommandContext(ctx, "git", args...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		cancel()
		if err != nil {
			return fmt.Errorf("git %s: %w: %s", args[0], err, strings.TrimSpace(string(out)))
		}
	}
	return nil
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	if len(l) > 60 {
		l = l[:60]
	}
	return l
}
