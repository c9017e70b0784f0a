-- Dashboard sessions (auth.Session): the SHA-256 of the cookie's secret,
-- a fingerprint of the admin key it was opened with, and its server-side
-- expiry. Shared by every replica, so a logout on one ends it on all.
CREATE TABLE ui_sessions (
    hash       bytea PRIMARY KEY,
    admin_key  bytea NOT NULL,
    created_at timestamptz NOT NULL,
    expires_at timestamptz NOT NULL
);

CREATE INDEX ui_sessions_expiry ON ui_sessions (expires_at);
