-- Issue 5: rates per key and model, and prices set through the admin API.
-- model_limits is a JSON object {model: {"rpm": n, "tpm": n}}, by the
-- model name clients send. prices are USD per million tokens by upstream
-- model id; they override the config's pricing and the embedded catalog.

ALTER TABLE keys ADD COLUMN model_limits TEXT NOT NULL DEFAULT '{}';

CREATE TABLE prices (
    model        TEXT PRIMARY KEY,
    input        REAL NOT NULL,
    cached_input REAL NOT NULL,
    output       REAL NOT NULL,
    updated_at   TEXT NOT NULL
) STRICT;
