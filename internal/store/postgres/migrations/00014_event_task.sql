-- The task an event belongs to (its data's "task"), a column of its own
-- with an index, so that a task's story is read without scanning the log.

-- +goose Up
ALTER TABLE events ADD COLUMN task TEXT NOT NULL DEFAULT '';
UPDATE events SET task = data::jsonb->>'task'
    WHERE data LIKE '%"task":%' AND jsonb_typeof(data::jsonb->'task') = 'string';
CREATE INDEX events_task_id ON events (task, id) WHERE task <> '';

-- +goose Down
DROP INDEX events_task_id;
ALTER TABLE events DROP COLUMN task;
