-- The exact cache's lower tier in embedded mode (issue 11): entries
-- survive a restart and are promoted to the in-process tier on a hit.
-- value is cache.Encode's bytes; expires is Unix microseconds.
CREATE TABLE cache_entries (
    key     TEXT PRIMARY KEY,
    project TEXT NOT NULL,
    expires INTEGER NOT NULL,
    value   BLOB NOT NULL
) WITHOUT ROWID;

CREATE INDEX cache_entries_project ON cache_entries (project);
CREATE INDEX cache_entries_expires ON cache_entries (expires);
