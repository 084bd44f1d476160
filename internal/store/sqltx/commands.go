package sqltx

import (
	"fmt"
	"strings"

	"herd"
	"herd/internal/store"
)

var commandCols = []string{"id", "host", "origin", "kind", "session", "args", "state", "result", "created_at", "claimed_at", "done_at"}

var commandSelect = "SELECT " + strings.Join(commandCols, ", ") + " FROM commands"

// AddCommand stores c and sets c.ID.
func (t *tx) AddCommand(c *herd.Command) error {
	if c == nil || c.Host == "" || c.Session == "" || c.Kind == "" {
		return fmt.Errorf("%s: add command: host, session and kind are required", t.name)
	}
	v, err := commandValues(*c)
	if err != nil {
		return fmt.Errorf("%s: add command: %w", t.name, err)
	}
	var id int64
	err = t.queryRow("INSERT INTO commands ("+strings.Join(commandCols[1:], ", ")+") VALUES ("+placeholders(len(commandCols)-1)+") RETURNING id",
		v...).Scan(&id)
	if err != nil {
		return fmt.Errorf("%s: add command: %w", t.name, err)
	}
	c.ID = id
	if t.d.OnCommand != "" {
		if _, err := t.exec(t.d.OnCommand, c.Host); err != nil {
			return fmt.Errorf("%s: add command: %w", t.name, err)
		}
	}
	return nil
}

// Command returns the command with id.
func (t *tx) Command(id int64) (herd.Command, error) {
	c, err := scanCommand(t.queryRow(commandSelect+" WHERE id = ?", id))
	if err != nil {
		return herd.Command{}, t.notFound(err, "command", fmt.Sprint(id))
	}
	return c, nil
}

// CommandsOnHost lists host's commands in state, by id.
func (t *tx) CommandsOnHost(host, state string) ([]herd.Command, error) {
	return collect(t, "commands", scanCommand, commandSelect+" WHERE host = ? AND state = ? ORDER BY id", host, state)
}

// PutCommand replaces the command with c.ID.
func (t *tx) PutCommand(c herd.Command) error {
	v, err := commandValues(c)
	if err != nil {
		return fmt.Errorf("%s: put command %d: %w", t.name, c.ID, err)
	}
	sets := make([]string, 0, len(commandCols)-1)
	for _, col := range commandCols[1:] {
		sets = append(sets, col+" = ?")
	}
	res, err := t.exec("UPDATE commands SET "+strings.Join(sets, ", ")+" WHERE id = ?", append(v, c.ID)...)
	if err != nil {
		return fmt.Errorf("%s: put command %d: %w", t.name, c.ID, err)
	}
	if n, err := res.RowsAffected(); err == nil && n == 0 {
		return &store.NotFoundError{What: "command", Key: fmt.Sprint(c.ID)}
	}
	return nil
}

// commandValues are c's columns but the id, in commandCols order.
func commandValues(c herd.Command) ([]any, error) {
	args, err := encode(c.Args)
	if err != nil {
		return nil, fmt.Errorf("args: %w", err)
	}
	created, err := nanos(c.CreatedAt)
	if err != nil {
		return nil, fmt.Errorf("created_at: %w", err)
	}
	claimed, err := nanos(c.ClaimedAt)
	if err != nil {
		return nil, fmt.Errorf("claimed_at: %w", err)
	}
	done, err := nanos(c.DoneAt)
	if err != nil {
		return nil, fmt.Errorf("done_at: %w", err)
	}
	return []any{c.Host, c.From, c.Kind, c.Session, args, c.State, c.Result, created, claimed, done}, nil
}

func scanCommand(sc scanner) (herd.Command, error) {
	var (
		c                      herd.Command
		args                   string
		created, claimed, done int64
	)
	err := sc.Scan(&c.ID, &c.Host, &c.From, &c.Kind, &c.Session, &args, &c.State, &c.Result, &created, &claimed, &done)
	if err != nil {
		return c, err
	}
	if err := decode(args, &c.Args); err != nil {
		return c, fmt.Errorf("command %d args: %w", c.ID, err)
	}
	c.CreatedAt, c.ClaimedAt, c.DoneAt = fromNanos(created), fromNanos(claimed), fromNanos(done)
	return c, nil
}
