-- Usage records (issue 10): one row per API request. time is Unix
-- microseconds (UTC), so ranges and hour/day buckets are integer
-- arithmetic; cost is integer micro-dollars, so sums are exact. labels is
-- a JSON object. Bodies are kept only for projects with log_bodies on.

CREATE TABLE usage_records (
    request_id        TEXT PRIMARY KEY,
    time              INTEGER NOT NULL,
    endpoint          TEXT NOT NULL DEFAULT '',
    key_id            TEXT NOT NULL DEFAULT '',
    project_id        TEXT NOT NULL DEFAULT '',
    project           TEXT NOT NULL DEFAULT '',
    customer          TEXT NOT NULL DEFAULT '',
    model             TEXT NOT NULL DEFAULT '',
    served_model      TEXT NOT NULL DEFAULT '',
    provider          TEXT NOT NULL DEFAULT '',
    deployment        TEXT NOT NULL DEFAULT '',
    status            INTEGER NOT NULL,
    error_kind        TEXT NOT NULL DEFAULT '',
    prompt_tokens     INTEGER NOT NULL DEFAULT 0,
    completion_tokens INTEGER NOT NULL DEFAULT 0,
    cached_tokens     INTEGER NOT NULL DEFAULT 0,
    reasoning_tokens  INTEGER NOT NULL DEFAULT 0,
    cost_micros       INTEGER NOT NULL DEFAULT 0,
    usage_source      TEXT NOT NULL DEFAULT '',
    latency_ms        REAL NOT NULL DEFAULT 0,
    ttft_ms           REAL NOT NULL DEFAULT 0,
    overhead_ms       REAL NOT NULL DEFAULT 0,
    cache             TEXT NOT NULL DEFAULT '',
    attempts          INTEGER NOT NULL DEFAULT 0,
    stream            INTEGER NOT NULL DEFAULT 0,
    labels            TEXT NOT NULL DEFAULT '{}',
    request_body      TEXT,
    response_body     TEXT
);

-- The usage API filters by a time window and groups by one field; the
-- request log pages newest first. Each grouping field leads an index with
-- time, so a filter on it is a range scan too.
CREATE INDEX usage_records_time ON usage_records (time, request_id);
CREATE INDEX usage_records_key ON usage_records (key_id, time);
CREATE INDEX usage_records_project ON usage_records (project, time);
CREATE INDEX usage_records_customer ON usage_records (customer, time);
CREATE INDEX usage_records_model ON usage_records (model, time);
CREATE INDEX usage_records_provider ON usage_records (provider, time);
