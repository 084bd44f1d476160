-- Hosts: one row per machine whose daemon uses this store (its boot, its
-- version, when it started and its last heartbeat); sessions by host.

-- +goose Up
CREATE TABLE hosts (
    name         TEXT COLLATE "C" PRIMARY KEY,
    boot_id      TEXT NOT NULL,
    version      TEXT NOT NULL,
    started_at   BIGINT NOT NULL,
    heartbeat_at BIGINT NOT NULL
);

CREATE INDEX sessions_host ON sessions (host, name);
CREATE INDEX incarnations_open_host ON incarnations (host, started_at) WHERE ended_at IS NULL;

-- +goose Down
DROP INDEX incarnations_open_host;
DROP INDEX sessions_host;
DROP TABLE hosts;
