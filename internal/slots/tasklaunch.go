package slots

// What a launch takes from the task its slot holds: the task's worktree
// and, for an exec role, the turn its agent is given.

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"herd"
	"herd/internal/store"
	"herd/internal/worktree"
)

// worktree returns the session's own git worktree when its role asks for
// one, made (or found again: it outlives crashes and restarts) before the
// launch; nil when the role runs in its workdir. A failure fails the
// launch with its reason, the setup command's output included.
func (s *Slots) worktree(ctx context.Context, role herd.Role, session string) (*worktree.Worktree, *herd.Task, error) {
	if role.Tasks {
		task, held, err := s.heldTask(ctx, session)
		if err != nil || held {
			if err != nil {
				return nil, nil, err
			}
			// A replica holding a task runs in the task's worktree, on
			// its branch (made again, from its branch, when removed by
			// hand).
			wt, err := s.o.Worktrees.Ensure(ctx, worktree.TaskOptions(role, task))
			if err != nil {
				return nil, nil, fmt.Errorf("task %s: %w", task.ID, err)
			}
			return &wt, &task, nil
		}
	}
	if !role.Worktree {
		return nil, nil, nil
	}
	wt, err := s.o.Worktrees.Ensure(ctx, worktree.OptionsFor(role, session))
	if err != nil {
		return nil, nil, err
	}
	return &wt, nil, nil
}

// heldTask returns the task session holds, if any.
func (s *Slots) heldTask(ctx context.Context, session string) (herd.Task, bool, error) {
	var held []herd.Task
	err := s.st.Store().View(ctx, func(tx store.Tx) (err error) {
		held, err = tx.Tasks(store.TaskFilter{Held: session})
		return err
	})
	if err != nil || len(held) == 0 {
		return herd.Task{}, false, err
	}
	return held[0], true, nil
}

// giveTurn ends an exec task role's argv in the held task's turn: the
// text its agent works on — the prompt, or what a reaction sent, after
// the prompt when the agent's conversation is not continued (it would
// not know the task otherwise). The incarnation records it cut short.
func (l *slotLaunch) giveTurn() {
	l.argv = append(slices.Clip(l.argv), turnText(*l.task, l.resumedConv != ""))
	l.spec.Argv, l.turn = l.argv, true
	l.inc.Argv = l.shownArgv()
	l.data["task"] = l.task.ID
}

// turnText is the argument of task t's next launch: its turn, with its
// prompt first unless the conversation goes on, within the kernel's
// limit of one argument (the prompt cut short when both are too long).
func turnText(t herd.Task, continued bool) string {
	switch {
	case t.Turn == "":
		return t.Prompt
	case continued:
		return t.Turn
	}
	const sep, cut = "\n\n", "\n[…]"
	prompt := t.Prompt
	if room := herd.MaxExecTurn - len(t.Turn) - len(sep); len(prompt) > room {
		prompt = strings.ToValidUTF8(prompt[:max(room-len(cut), 0)], "") + cut
	}
	return prompt + sep + t.Turn
}

// shownArgv is the launch's argv as its events show it: a task's turn
// text, up to a megabyte, is cut to its start.
func (l *slotLaunch) shownArgv() []string {
	if !l.turn || len(l.argv) == 0 {
		return l.argv
	}
	out := slices.Clone(l.argv)
	if last := out[len(out)-1]; len(last) > shownTurn {
		out[len(out)-1] = fmt.Sprintf("%s… (%d bytes)", strings.ToValidUTF8(last[:shownTurn], ""), len(last))
	}
	return out
}

// shownTurn bounds the turn text a launch's events show.
const shownTurn = 200
