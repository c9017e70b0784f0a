-- Hourly rollup of the records, so the usage API reads one row per hour
-- and combination instead of every record: a 30-day question over ten
-- million records would otherwise scan them all. WriteRecords adds to it
-- the records its INSERT really inserted (RETURNING), in the same
-- transaction, so a replayed duplicate never counts twice.
CREATE TABLE usage_hourly (
    hour              timestamptz NOT NULL,
    key_id            text NOT NULL,
    project           text NOT NULL,
    model             text NOT NULL,
    provider          text NOT NULL,
    project_id        text NOT NULL DEFAULT '',
    requests          bigint NOT NULL DEFAULT 0,
    errors            bigint NOT NULL DEFAULT 0,
    prompt_tokens     bigint NOT NULL DEFAULT 0,
    completion_tokens bigint NOT NULL DEFAULT 0,
    cached_tokens     bigint NOT NULL DEFAULT 0,
    cost_micros       bigint NOT NULL DEFAULT 0,
    cache_hits        bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (hour, key_id, project, model, provider)
);

-- Records written before this migration.
INSERT INTO usage_hourly (hour, key_id, project, model, provider, project_id, requests, errors, prompt_tokens,
    completion_tokens, cached_tokens, cost_micros, cache_hits)
SELECT date_bin('1 hour', time, '2000-01-01 00:00:00+00'), key_id, project, model, provider, max(project_id), count(*),
    count(*) FILTER (WHERE status >= 400), sum(prompt_tokens), sum(completion_tokens), sum(cached_tokens),
    sum(cost_micros), count(*) FILTER (WHERE cache IN ('hit', 'semantic'))
FROM usage_records GROUP BY 1, 2, 3, 4, 5;
