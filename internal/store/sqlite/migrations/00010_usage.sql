-- The usage ledger: tokens and cost per incarnation, source, model and
-- hour, added to by the ledger of the incarnation's host; and per file
-- read, how far it was read (so a restarted daemon neither loses nor
-- recounts).

-- +goose Up
CREATE TABLE usage_ledger (
    incarnation        TEXT NOT NULL,
    source             TEXT NOT NULL,
    model              TEXT NOT NULL,
    hour               BIGINT NOT NULL,
    session            TEXT NOT NULL,
    role               TEXT NOT NULL,
    host               TEXT NOT NULL,
    input_tokens       BIGINT NOT NULL,
    output_tokens      BIGINT NOT NULL,
    cache_read_tokens  BIGINT NOT NULL,
    cache_write_tokens BIGINT NOT NULL,
    cost_usd           REAL NOT NULL,
    PRIMARY KEY (incarnation, source, model, hour)
);

CREATE INDEX usage_ledger_hour ON usage_ledger (hour);
CREATE INDEX usage_ledger_role ON usage_ledger (role, hour);

CREATE TABLE usage_cursors (
    host        TEXT NOT NULL,
    path        TEXT NOT NULL,
    incarnation TEXT NOT NULL,
    "offset"    BIGINT NOT NULL,
    ident       TEXT NOT NULL,
    state       TEXT NOT NULL,
    updated_at  BIGINT NOT NULL,
    PRIMARY KEY (host, path)
);

-- +goose Down
DROP TABLE usage_cursors;
DROP INDEX usage_ledger_role;
DROP INDEX usage_ledger_hour;
DROP TABLE usage_ledger;
