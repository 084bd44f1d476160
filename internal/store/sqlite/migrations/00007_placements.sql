-- Placements: the host each slot of a placed role runs on, written by the
-- placement leader and read by every daemon's reconciler.

-- +goose Up
CREATE TABLE placements (
    role        TEXT NOT NULL,
    idx         INTEGER NOT NULL,
    host        TEXT NOT NULL,
    assigned_at BIGINT NOT NULL,
    PRIMARY KEY (role, idx)
);

CREATE INDEX placements_host ON placements (host, role, idx);

-- +goose Down
DROP INDEX placements_host;
DROP TABLE placements;
