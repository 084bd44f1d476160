package sqltx

import (
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"herd"
	"herd/internal/errs"
	"herd/internal/store"
)

const taskSelect = "SELECT seq, body FROM tasks"

// AddTask stores t as a new task and sets its ID (t-<n>, n increasing).
func (t *tx) AddTask(task *herd.Task) error {
	if task == nil || task.Role == "" || task.CreatedAt.IsZero() {
		return fmt.Errorf("%s: add task: role and created_at are required", t.name)
	}
	v, err := taskValues(*task)
	if err != nil {
		return fmt.Errorf("%s: add task: %w", t.name, err)
	}
	if err := t.checkHeld(*task, 0); err != nil {
		return err
	}
	var seq int64
	if err := t.queryRow("INSERT INTO tasks (role, state, session, created_at, updated_at, body) VALUES (?, ?, ?, ?, ?, ?) RETURNING seq",
		v...).Scan(&seq); err != nil {
		return fmt.Errorf("%s: add task: %w", t.name, err)
	}
	task.ID = herd.TaskID(seq)
	// The body carries the id too: written again now that it is known.
	return t.PutTask(*task)
}

// Task returns the task with id.
func (t *tx) Task(id string) (herd.Task, error) {
	seq := herd.TaskSeq(id)
	if seq == 0 {
		return herd.Task{}, errs.Badf("%q is not a task id (t-<n>)", id)
	}
	task, err := scanTask(t.queryRow(taskSelect+" WHERE seq = ?", seq))
	if err != nil {
		return herd.Task{}, t.notFound(err, "task", id)
	}
	return task, nil
}

// Tasks lists the tasks f selects, oldest first.
func (t *tx) Tasks(f store.TaskFilter) ([]herd.Task, error) {
	var (
		where []string
		args  []any
	)
	if f.Role != "" {
		where, args = append(where, "role = ?"), append(args, f.Role)
	}
	if len(f.States) > 0 {
		ph := make([]string, len(f.States))
		for i, s := range f.States {
			ph[i] = "?"
			args = append(args, string(s))
		}
		where = append(where, "state IN ("+strings.Join(ph, ", ")+")")
	}
	if f.Held != "" {
		where, args = append(where, "session = ?"), append(args, f.Held)
	}
	if f.AfterSeq > 0 {
		where, args = append(where, "seq > ?"), append(args, f.AfterSeq)
	}
	q := taskSelect
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY seq"
	if f.Limit > 0 {
		q += fmt.Sprintf(" LIMIT %d", f.Limit)
	}
	return collect(t, "tasks", scanTask, q, args...)
}

// PutTask replaces the task with task.ID. A task that holds a replica
// another task holds is a conflict.
func (t *tx) PutTask(task herd.Task) error {
	seq := herd.TaskSeq(task.ID)
	if seq == 0 {
		return errs.Badf("%q is not a task id (t-<n>)", task.ID)
	}
	if err := t.checkHeld(task, seq); err != nil {
		return err
	}
	v, err := taskValues(task)
	if err != nil {
		return fmt.Errorf("%s: put task %s: %w", t.name, task.ID, err)
	}
	res, err := t.exec("UPDATE tasks SET role = ?, state = ?, session = ?, created_at = ?, updated_at = ?, body = ? WHERE seq = ?", append(v, seq)...)
	if err != nil {
		return fmt.Errorf("%s: put task %s: %w", t.name, task.ID, err)
	}
	if n, err := t.affected(res, "put task"); err != nil || n == 0 {
		if err != nil {
			return err
		}
		return &store.NotFoundError{What: "task", Key: task.ID}
	}
	return nil
}

// checkHeld refuses a task holding a session another task (not seq)
// holds: one task per replica.
func (t *tx) checkHeld(task herd.Task, seq int64) error {
	held := heldBy(task)
	if held == "" {
		return nil
	}
	var other int64
	err := t.queryRow("SELECT seq FROM tasks WHERE session = ? AND seq <> ?", held, seq).Scan(&other)
	if err == nil {
		return errs.New(errs.Conflict, fmt.Sprintf("session %s already holds task %s", held, herd.TaskID(other)))
	}
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	return fmt.Errorf("%s: task held by %s: %w", t.name, held, err)
}

// heldBy is the session column of task: its session while its state
// holds the replica, else "".
func heldBy(task herd.Task) string {
	if task.State.Holds() {
		return task.Session
	}
	return ""
}

// taskValues are task's columns but seq, in the order of AddTask's insert.
func taskValues(task herd.Task) ([]any, error) {
	body, err := encode(task)
	if err != nil {
		return nil, err
	}
	created, err := nanos(task.CreatedAt)
	if err != nil {
		return nil, err
	}
	return []any{task.Role, string(task.State), heldBy(task), created, clampNanos(task.UpdatedAt), body}, nil
}

func scanTask(sc scanner) (herd.Task, error) {
	var (
		task herd.Task
		seq  int64
		body string
	)
	if err := sc.Scan(&seq, &body); err != nil {
		return task, err
	}
	if err := decode(body, &task); err != nil {
		return task, fmt.Errorf("task %s: %w", herd.TaskID(seq), err)
	}
	task.ID = herd.TaskID(seq)
	return task, nil
}
