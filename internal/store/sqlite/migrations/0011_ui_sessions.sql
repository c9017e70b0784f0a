-- Dashboard sessions (auth.Session): the SHA-256 of the cookie's secret,
-- a fingerprint of the admin key it was opened with, and its server-side
-- expiry, in Unix microseconds.
CREATE TABLE ui_sessions (
    hash       BLOB PRIMARY KEY,
    admin_key  BLOB NOT NULL,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL
) WITHOUT ROWID;

CREATE INDEX ui_sessions_expiry ON ui_sessions (expires_at);
