package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"herd/internal/api"
	"herd/internal/waitfor"
)

// exitError is an error with an exit code of its own (herd wait: 1 on a
// timeout, 2 on an error).
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func newWaitCmd(g *globals) *cobra.Command {
	var role, goal string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "wait NAME... [--role R] --for STATE|ACTIVITY [--timeout DUR]",
		Short: "Wait until sessions reach a state or an activity",
		Long: `Wait until every session named (and every session of --role) reaches a
state (running, stopped, failed, ...) or an activity (idle, waiting,
working, blocked). The daemon watches; the answer comes as soon as the last
one gets there.

Exit 0 when all reached it, 1 on the timeout (the sessions lagging are
named), 2 on an error or when interrupted. "unknown" is the state;
--for activity=unknown is the activity.`,
		Example: `  herd wait worker-0 --for idle
  herd wait --role worker --for idle --timeout 10m
  herd wait reviewer-0 --for stopped`,
		Args:              namesArg(checkSession),
		ValidArgsFunction: completeSessions(g),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := runWait(cmd, g, args, role, goal, timeout); err != nil {
				var ee *exitError
				if !errors.As(err, &ee) {
					err = &exitError{code: 2, err: err}
				}
				return err
			}
			return nil
		},
	}
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &exitError{code: 2, err: err} })
	cmd.Flags().StringVar(&role, "role", "", "every session of this role too")
	cmd.Flags().StringVar(&goal, "for", "", "the state or activity to wait for (required)")
	cmd.Flags().DurationVar(&timeout, "timeout", 30*time.Second, "give up after this long (exit 1)")
	return cmd
}

func runWait(cmd *cobra.Command, g *globals, names []string, role, goal string, timeout time.Duration) error {
	if goal == "" {
		return fmt.Errorf("wait: --for is required (a state or an activity, e.g. --for idle)")
	}
	if _, err := waitfor.ParseGoal(goal); err != nil {
		return fmt.Errorf("wait: %w", err)
	}
	if len(names) == 0 && role == "" {
		return fmt.Errorf("wait: name sessions or a --role")
	}
	if role != "" {
		if err := checkRole("wait: --role", role); err != nil {
			return err
		}
	}
	if timeout < 0 || timeout > waitfor.MaxTimeout {
		return fmt.Errorf("wait: --timeout %s: want 0s to %s", timeout, waitfor.MaxTimeout)
	}
	req := api.WaitRequest{Targets: api.Targets{Names: names, Role: role}, For: goal, Timeout: timeout.String()}
	var res api.WaitResult
	err := g.do(cmd.Context(), http.MethodPost, "/v1/wait", nil, req, &res)
	if err != nil {
		if errors.Is(err, context.Canceled) || cmd.Context().Err() != nil {
			return fmt.Errorf("wait: interrupted before %s reached %s", strings.Join(append(names, roleWord(role)...), ", "), goal)
		}
		return err
	}
	w := cmd.OutOrStdout()
	for _, t := range res.Sessions {
		mark := "reached"
		if !t.Reached {
			mark = "lagging"
		}
		now := t.State + "/" + t.Activity
		if t.Gone {
			now = "gone"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t(was %s/%s)\n", t.Session, mark, now, t.FromState, t.FromActivity)
	}
	if !res.Reached {
		return &exitError{code: 1, err: fmt.Errorf("wait: %s", res.Message)}
	}
	return nil
}

func roleWord(role string) []string {
	if role == "" {
		return nil
	}
	return []string{"role " + role}
}
