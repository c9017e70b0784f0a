-- Issue 5: rates per key and model, and prices set through the admin API.
-- model_limits is a jsonb object {model: {"rpm": n, "tpm": n}}, by the
-- model name clients send. prices are USD per million tokens by upstream
-- model id; they override the config's pricing and the embedded catalog.

ALTER TABLE keys ADD COLUMN model_limits jsonb NOT NULL DEFAULT '{}';

CREATE TABLE prices (
    model        text PRIMARY KEY,
    input        double precision NOT NULL,
    cached_input double precision NOT NULL,
    output       double precision NOT NULL,
    updated_at   timestamptz NOT NULL
);
