-- Tasks: units of work for a role, each held by at most one replica at
-- a time. A task is a row, written only by the tasks component; its
-- body (prompt, check, counters) is JSON, its state and the replica
-- holding it are columns, so that "one task per replica" is an index.

-- +goose Up
CREATE TABLE tasks (
    seq         INTEGER PRIMARY KEY AUTOINCREMENT,
    role        TEXT NOT NULL,
    state       TEXT NOT NULL,
    session     TEXT NOT NULL,
    created_at  BIGINT NOT NULL,
    updated_at  BIGINT NOT NULL,
    body        TEXT NOT NULL
);

CREATE INDEX tasks_state ON tasks (state, seq);
CREATE INDEX tasks_role ON tasks (role, seq);
-- One task per replica: the states that hold a replica name it.
CREATE UNIQUE INDEX tasks_held ON tasks (session) WHERE session <> '';

-- +goose Down
DROP INDEX tasks_held;
DROP INDEX tasks_role;
DROP INDEX tasks_state;
DROP TABLE tasks;
