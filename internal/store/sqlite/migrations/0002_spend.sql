-- Settled spend per budget counter (issue 5): one row per scope, ID and
-- period, in integer micro-dollars, so sums are exact. start is the
-- period's first day (YYYY-MM-DD), '' for total budgets; tag is the
-- Redis hash tag the counter lives under in cluster mode.

CREATE TABLE spend (
    scope      TEXT NOT NULL,
    id         TEXT NOT NULL,
    period     TEXT NOT NULL,
    start      TEXT NOT NULL,
    tag        TEXT NOT NULL DEFAULT '',
    micros     INTEGER NOT NULL,
    updated_at TEXT NOT NULL,
    PRIMARY KEY (scope, id, period, start)
) STRICT;

-- Loading the current periods at start.
CREATE INDEX spend_start ON spend (start);
