-- The fingerprint of the role's command, workdir and env an incarnation
-- was launched from: a role changed since marks it OUTDATED.
-- +goose Up
ALTER TABLE incarnations ADD COLUMN template TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE incarnations DROP COLUMN template;
