-- Usage records (issue 10): one row per API request, written in batches
-- with COPY. cost is integer micro-dollars, so sums are exact; labels is
-- a jsonb object. Bodies are kept only for projects with log_bodies on.

CREATE TABLE usage_records (
    request_id        text PRIMARY KEY,
    time              timestamptz NOT NULL,
    endpoint          text NOT NULL DEFAULT '',
    key_id            text NOT NULL DEFAULT '',
    project_id        text NOT NULL DEFAULT '',
    project           text NOT NULL DEFAULT '',
    customer          text NOT NULL DEFAULT '',
    model             text NOT NULL DEFAULT '',
    served_model      text NOT NULL DEFAULT '',
    provider          text NOT NULL DEFAULT '',
    deployment        text NOT NULL DEFAULT '',
    status            integer NOT NULL,
    error_kind        text NOT NULL DEFAULT '',
    prompt_tokens     integer NOT NULL DEFAULT 0,
    completion_tokens integer NOT NULL DEFAULT 0,
    cached_tokens     integer NOT NULL DEFAULT 0,
    reasoning_tokens  integer NOT NULL DEFAULT 0,
    cost_micros       bigint NOT NULL DEFAULT 0,
    usage_source      text NOT NULL DEFAULT '',
    latency_ms        double precision NOT NULL DEFAULT 0,
    ttft_ms           double precision NOT NULL DEFAULT 0,
    overhead_ms       double precision NOT NULL DEFAULT 0,
    cache             text NOT NULL DEFAULT '',
    attempts          integer NOT NULL DEFAULT 0,
    stream            boolean NOT NULL DEFAULT false,
    labels            jsonb NOT NULL DEFAULT '{}',
    request_body      text,
    response_body     text
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
