-- The people of the console: each a name, read-only or not, and the
-- bearer tokens minted for them, kept only as their SHA-256. A user is
-- its seq: a name removed and added again is another user, whose
-- predecessor's tokens and browser sessions do not revive.

-- +goose Up
CREATE TABLE users (
    seq        INTEGER PRIMARY KEY AUTOINCREMENT,
    name       TEXT NOT NULL UNIQUE,
    read_only  INTEGER NOT NULL,
    created_at BIGINT NOT NULL
);

CREATE TABLE user_tokens (
    hash       TEXT PRIMARY KEY,
    user_seq   BIGINT NOT NULL,
    created_at BIGINT NOT NULL
);

CREATE INDEX user_tokens_user ON user_tokens (user_seq);

-- +goose Down
DROP INDEX user_tokens_user;
DROP TABLE user_tokens;
DROP TABLE users;
