-- Role fields added after the first schema (worktrees, limits, ...), kept
-- together as one JSON object so a new one needs no migration.
-- +goose Up
ALTER TABLE roles ADD COLUMN options TEXT NOT NULL DEFAULT '{}';

-- +goose Down
ALTER TABLE roles DROP COLUMN options;
