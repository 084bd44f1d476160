-- The answers people gave to the sessions' needs, by need (session and the
-- time the need began), and the answer links spent: kept until they
-- expire, so a need is answered once and a link works once, across
-- restarts of the daemon.

-- +goose Up
CREATE TABLE answers (
    session     TEXT NOT NULL,
    since       BIGINT NOT NULL,
    incarnation TEXT NOT NULL,
    who         TEXT NOT NULL,
    choice      TEXT NOT NULL,
    nonce       TEXT NOT NULL,
    answered_at BIGINT NOT NULL,
    expires     BIGINT NOT NULL,
    PRIMARY KEY (session, since)
);

CREATE INDEX answers_expires ON answers (expires);

CREATE TABLE answer_nonces (
    nonce   TEXT PRIMARY KEY,
    expires BIGINT NOT NULL
);

CREATE INDEX answer_nonces_expires ON answer_nonces (expires);

-- +goose Down
DROP INDEX answer_nonces_expires;
DROP TABLE answer_nonces;
DROP INDEX answers_expires;
DROP TABLE answers;
