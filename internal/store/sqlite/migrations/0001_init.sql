-- Projects, virtual keys and customers (issue 4).
-- Times are TEXT in one fixed-width UTC layout (2006-01-02T15:04:05.000000Z),
-- so they read well in the sqlite3 shell and compare correctly as text.
-- Lists (models) and maps (labels) are JSON text.

CREATE TABLE projects (
    id            TEXT PRIMARY KEY,
    name          TEXT NOT NULL UNIQUE,
    rpm           INTEGER NOT NULL DEFAULT 0,
    tpm           INTEGER NOT NULL DEFAULT 0,
    budget_usd    REAL,
    budget_period TEXT,
    models        TEXT NOT NULL DEFAULT '[]',
    labels        TEXT NOT NULL DEFAULT '{}',
    cache         INTEGER,
    log_bodies    INTEGER NOT NULL DEFAULT 0,
    read_only     INTEGER NOT NULL DEFAULT 0,
    created_at    TEXT NOT NULL,
    updated_at    TEXT NOT NULL
) STRICT;

CREATE TABLE keys (
    id            TEXT PRIMARY KEY,
    hash          BLOB NOT NULL UNIQUE CHECK (length(hash) = 32),
    prefix        TEXT NOT NULL,
    project_id    TEXT NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
    name          TEXT NOT NULL,
    rpm           INTEGER NOT NULL DEFAULT 0,
    tpm           INTEGER NOT NULL DEFAULT 0,
    budget_usd    REAL,
    budget_period TEXT,
    models        TEXT NOT NULL DEFAULT '[]',
    labels        TEXT NOT NULL DEFAULT '{}',
    expires_at    TEXT,
    revoked_at    TEXT,
    read_only     INTEGER NOT NULL DEFAULT 0,
    created_at    TEXT NOT NULL,
    updated_at    TEXT NOT NULL,
    last_used_at  TEXT
) STRICT;

-- Listing a project's keys pages by id within the project.
CREATE INDEX keys_project ON keys (project_id, id);

CREATE TABLE customers (
    id              TEXT PRIMARY KEY,
    project_id      TEXT NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
    external_id     TEXT NOT NULL,
    name            TEXT NOT NULL DEFAULT '',
    daily_usd       REAL,
    monthly_usd     REAL,
    on_exceed       TEXT NOT NULL DEFAULT 'block',
    downgrade_model TEXT NOT NULL DEFAULT '',
    labels          TEXT NOT NULL DEFAULT '{}',
    created_at      TEXT NOT NULL,
    updated_at      TEXT NOT NULL,
    UNIQUE (project_id, external_id)
) STRICT;

CREATE INDEX customers_project ON customers (project_id, id);
