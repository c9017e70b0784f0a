-- The audit log of admin changes (audit.Entry): who, what, when, and the
-- object before and after as JSON, already masked by the admin API (no
-- secret, key hash or provider credential ever reaches this table).
-- at is Unix microseconds; ids sort in creation order.
CREATE TABLE audit_log (
    id          TEXT PRIMARY KEY,
    at          INTEGER NOT NULL,
    actor       TEXT NOT NULL,
    role        TEXT NOT NULL,
    method      TEXT NOT NULL,
    path        TEXT NOT NULL,
    object_type TEXT NOT NULL,
    object_id   TEXT NOT NULL,
    status      INTEGER NOT NULL,
    before      TEXT,
    after       TEXT
);

CREATE INDEX audit_log_at ON audit_log (at);
