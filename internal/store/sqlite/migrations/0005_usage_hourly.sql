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

-- Records written before this migration.
INSERT INTO usage_hourly (hour, key_id, project, model, provider, project_id, requests, errors, prompt_tokens,
    completion_tokens, cached_tokens, cost_micros, cache_hits)
SELECT time - time % 3600000000, key_id, project, model, provider, max(project_id), count(*), sum(status >= 400),
    sum(prompt_tokens), sum(completion_tokens), sum(cached_tokens), sum(cost_micros), sum(cache IN ('hit', 'semantic'))
FROM usage_records GROUP BY 1, 2, 3, 4, 5;
