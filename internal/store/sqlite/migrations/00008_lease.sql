-- Leases and fencing tokens: a host's lease, renewed with its heartbeat
-- and judged by the database's clock, and each placement's generation,
-- raised by every put, which a launch of the slot checks.

-- +goose Up
ALTER TABLE hosts ADD COLUMN lease_until BIGINT NOT NULL DEFAULT 0;
ALTER TABLE placements ADD COLUMN generation BIGINT NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE placements DROP COLUMN generation;
ALTER TABLE hosts DROP COLUMN lease_until;
