-- Projects, virtual keys and customers (issue 4). Lists (models) and maps
-- (labels) are jsonb; times are timestamptz (microseconds, UTC).

CREATE TABLE projects (
    id            text PRIMARY KEY,
    name          text NOT NULL UNIQUE,
    rpm           integer NOT NULL DEFAULT 0,
    tpm           integer NOT NULL DEFAULT 0,
    budget_usd    double precision,
    budget_period text,
    models        jsonb NOT NULL DEFAULT '[]',
    labels        jsonb NOT NULL DEFAULT '{}',
    cache         boolean,
    log_bodies    boolean NOT NULL DEFAULT false,
    read_only     boolean NOT NULL DEFAULT false,
    created_at    timestamptz NOT NULL,
    updated_at    timestamptz NOT NULL
);

CREATE TABLE keys (
    id            text PRIMARY KEY,
    hash          bytea NOT NULL UNIQUE CHECK (octet_length(hash) = 32),
    prefix        text NOT NULL,
    project_id    text NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
    name          text NOT NULL,
    rpm           integer NOT NULL DEFAULT 0,
    tpm           integer NOT NULL DEFAULT 0,
    budget_usd    double precision,
    budget_period text,
    models        jsonb NOT NULL DEFAULT '[]',
    labels        jsonb NOT NULL DEFAULT '{}',
    expires_at    timestamptz,
    revoked_at    timestamptz,
    read_only     boolean NOT NULL DEFAULT false,
    created_at    timestamptz NOT NULL,
    updated_at    timestamptz NOT NULL,
    last_used_at  timestamptz
);

-- Listing a project's keys pages by id within the project.
CREATE INDEX keys_project ON keys (project_id, id);

CREATE TABLE customers (
    id              text PRIMARY KEY,
    project_id      text NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
    external_id     text NOT NULL,
    name            text NOT NULL DEFAULT '',
    daily_usd       double precision,
    monthly_usd     double precision,
    on_exceed       text NOT NULL DEFAULT 'block',
    downgrade_model text NOT NULL DEFAULT '',
    labels          jsonb NOT NULL DEFAULT '{}',
    created_at      timestamptz NOT NULL,
    updated_at      timestamptz NOT NULL,
    UNIQUE (project_id, external_id)
);

CREATE INDEX customers_project ON customers (project_id, id);
