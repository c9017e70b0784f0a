-- The audit log of admin changes (audit.Entry): who, what, when, and the
-- object before and after as JSON text, already masked by the admin API
-- (no secret, key hash or provider credential ever reaches this table).
-- Every replica appends here and reads the same log. ids sort in
-- creation order.
CREATE TABLE audit_log (
    id          text PRIMARY KEY,
    at          timestamptz NOT NULL,
    actor       text NOT NULL,
    role        text NOT NULL,
    method      text NOT NULL,
    path        text NOT NULL,
    object_type text NOT NULL,
    object_id   text NOT NULL,
    status      integer NOT NULL,
    before      text,
    after       text
);

CREATE INDEX audit_log_at ON audit_log (at);
