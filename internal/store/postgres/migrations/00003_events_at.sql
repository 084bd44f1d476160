-- Event retention deletes the oldest events by time: an index on it keeps
-- each bounded batch from scanning the table.
-- +goose Up
CREATE INDEX IF NOT EXISTS events_at ON events (at);

-- +goose Down
DROP INDEX IF EXISTS events_at;
