-- Commands: a CLI served by one host's daemon asks another host's daemon to
-- act on one of its sessions (stop, resume, inject); the owner claims the
-- row, executes it and records the result.

-- +goose Up
CREATE TABLE commands (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    host        TEXT NOT NULL,
    origin      TEXT NOT NULL,
    kind        TEXT NOT NULL,
    session     TEXT NOT NULL,
    args        TEXT NOT NULL,
    state       TEXT NOT NULL,
    result      TEXT NOT NULL,
    created_at  BIGINT NOT NULL,
    claimed_at  BIGINT NOT NULL,
    done_at     BIGINT NOT NULL
);

CREATE INDEX commands_host_state ON commands (host, state, id);

-- +goose Down
DROP INDEX commands_host_state;
DROP TABLE commands;
