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

-- Hourly rollup of the records, so the usage API reads one row per hour
-- and combination instead of every record: a 30-day question over ten
-- million records would otherwise scan them all. Filled by a trigger, so
-- only records really inserted count (a replayed duplicate is skipped by
-- the records' primary key and never reaches it). hour is Unix
-- microseconds at the start of the UTC hour.
CREATE TABLE usage_hourly (
    hour              INTEGER NOT NULL,
    key_id            TEXT NOT NULL,
    project           TEXT NOT NULL,
    model             TEXT NOT NULL,
    provider          TEXT NOT NULL,
    project_id        TEXT NOT NULL DEFAULT '',
    requests          INTEGER NOT NULL DEFAULT 0,
    errors            INTEGER NOT NULL DEFAULT 0,
    prompt_tokens     INTEGER NOT NULL DEFAULT 0,
    completion_tokens INTEGER NOT NULL DEFAULT 0,
    cached_tokens     INTEGER NOT NULL DEFAULT 0,
    cost_micros       INTEGER NOT NULL DEFAULT 0,
    cache_hits        INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (hour, key_id, project, model, provider)
) WITHOUT ROWID;

CREATE TRIGGER usage_records_rollup AFTER INSERT ON usage_records
BEGIN
    INSERT INTO usage_hourly (hour, key_id, project, model, provider, project_id, requests, errors, prompt_tokens,
        completion_tokens, cached_tokens, cost_micros, cache_hits)
    VALUES (NEW.time - NEW.time % 3600000000, NEW.key_id, NEW.project, NEW.model, NEW.provider, NEW.project_id, 1,
        NEW.status >= 400, NEW.prompt_tokens, NEW.completion_tokens, NEW.cached_tokens, NEW.cost_micros,
        NEW.cache IN ('hit', 'semantic'))
    ON CONFLICT (hour, key_id, project, model, provider) DO UPDATE SET
        requests = requests + 1, errors = errors + excluded.errors,
        prompt_tokens = prompt_tokens + excluded.prompt_tokens,
        completion_tokens = completion_tokens + excluded.completion_tokens,
        cached_tokens = cached_tokens + excluded.cached_tokens,
        cost_micros = cost_micros + excluded.cost_micros, cache_hits = cache_hits + excluded.cache_hits;
END;
