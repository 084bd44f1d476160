package main

import (
	"context"
	"slices"
	"time"

	"github.com/spf13/cobra"
	"herd/internal/api"
)

// completionTimeout bounds the daemon call behind one completion: a shell
// waiting on a tab press must not hang.
const completionTimeout = time.Second

// completeSessions completes session names from the daemon; with no daemon
// it completes nothing, silently (never file names).
func completeSessions(g *globals) cobra.CompletionFunc {
	return completeNames(g, "/v1/sessions", func(raw []api.SessionView) []string { return sessionNames(raw) })
}

// completeRoles completes role names from the daemon.
func completeRoles(g *globals) cobra.CompletionFunc {
	return completeNames(g, "/v1/roles", func(raw []api.RoleView) []string { return roleNames(raw) })
}

// completeTasks completes task ids from the daemon.
func completeTasks(g *globals) cobra.CompletionFunc {
	return completeNames(g, "/v1/tasks", taskIDs)
}

// completeFirstRole completes the first argument only (task add ROLE PROMPT).
func completeFirstRole(g *globals) cobra.CompletionFunc { return completeFirst(completeRoles(g)) }

// completeFirstSession completes the first argument only (inject NAME TEXT).
func completeFirstSession(g *globals) cobra.CompletionFunc { return completeFirst(completeSessions(g)) }

// completeFirstTask completes the first argument only (task comment ID TEXT).
func completeFirstTask(g *globals) cobra.CompletionFunc { return completeFirst(completeTasks(g)) }

// completeFirst completes with all the first argument only: the next
// ones are text.
func completeFirst(all cobra.CompletionFunc) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return all(cmd, args, toComplete)
	}
}

func completeNames[T any](g *globals, path string, names func([]T) []string) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
		// A tab press never starts a daemon.
		quiet := *g
		quiet.noAutostart = true
		ctx, cancel := context.WithTimeout(context.Background(), completionTimeout)
		defer cancel()
		var raw []T
		if err := getJSON(ctx, &quiet, path, &raw); err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var out []cobra.Completion
		for _, n := range names(raw) {
			// A name already on the line is not offered again.
			if !slices.Contains(args, n) {
				out = append(out, n)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}
