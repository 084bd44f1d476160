package main

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/spf13/cobra"
	"herd"
)

// What a valid name looks like, for error messages.
const (
	roleNameHint    = "want [a-z0-9][a-z0-9-]{0,40}, e.g. worker"
	sessionNameHint = "want ROLE-INDEX, e.g. worker-0"
)

// checkSession rejects anything that is not a session name (<role>-<index>),
// so a name from the command line cannot reach another API path or a tmux
// target it does not name.
func checkSession(cmd, name string) error {
	if !herd.InNamespace(name) {
		return fmt.Errorf("%s: %q is not a session name (%s)", cmd, name, sessionNameHint)
	}
	return nil
}

// checkRole rejects anything that is not a role name.
func checkRole(cmd, name string) error {
	if !herd.ValidRoleName(name) {
		return fmt.Errorf("%s: %q is not a role name (%s)", cmd, name, roleNameHint)
	}
	return nil
}

// sessionArg is a cobra.PositionalArgs: exactly one argument, a session name.
func sessionArg(cmd *cobra.Command, args []string) error {
	if len(args) != 1 {
		return fmt.Errorf("%s: want one session NAME (e.g. worker-0), got %d arguments", cmdPath(cmd), len(args))
	}
	return checkSession(cmdPath(cmd), args[0])
}

// roleArg is a cobra.PositionalArgs: exactly one argument, a role name.
func roleArg(cmd *cobra.Command, args []string) error {
	if len(args) != 1 {
		return fmt.Errorf("%s: want one ROLE name (e.g. worker), got %d arguments", cmdPath(cmd), len(args))
	}
	return checkRole(cmdPath(cmd), args[0])
}

// sessionPath is the API path of session name, followed by suffix
// ("" or "/stop", "/logs", ...). The name is escaped even though it was
// checked: a path is never built from raw input.
func sessionPath(name, suffix string) string {
	return "/v1/sessions/" + url.PathEscape(name) + suffix
}

// rolePath is the API path of role name, followed by suffix.
func rolePath(name, suffix string) string {
	return "/v1/roles/" + url.PathEscape(name) + suffix
}

// requireSubcommand makes parent (get, describe, delete, hooks) fail with one
// line when its subcommand is missing or unknown, instead of printing help on
// stdout and exiting 0. what names the subcommand ("resource", "action").
func requireSubcommand(parent *cobra.Command, what string) {
	parent.Args = cobra.ArbitraryArgs
	parent.RunE = func(cmd *cobra.Command, args []string) error {
		var names []string
		for _, c := range cmd.Commands() {
			if c.IsAvailableCommand() {
				names = append(names, c.Name())
			}
		}
		want := orList(names)
		if len(args) == 0 {
			return fmt.Errorf("%s: missing %s (want %s)", cmdPath(cmd), what, want)
		}
		return fmt.Errorf("%s: unknown %s %q (want %s)", cmdPath(cmd), what, args[0], want)
	}
}

// cmdPath names cmd for an error message, e.g. "delete role"; main adds "herd: ".
func cmdPath(cmd *cobra.Command) string {
	return strings.TrimPrefix(cmd.CommandPath(), cmd.Root().Name()+" ")
}

// orList joins names as "a", "a or b", "a, b or c".
func orList(names []string) string {
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}
