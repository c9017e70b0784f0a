-- Settled spend per budget counter (issue 5): one row per scope, ID and
-- period, in integer micro-dollars, so sums are exact. start is the
-- period's first day (YYYY-MM-DD), '' for total budgets; tag is the
-- Redis hash tag the counter lives under.

CREATE TABLE spend (
    scope      text NOT NULL,
    id         text NOT NULL,
    period     text NOT NULL,
    start      text NOT NULL,
    tag        text NOT NULL DEFAULT '',
    micros     bigint NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (scope, id, period, start)
);

-- Loading the current periods at start.
CREATE INDEX spend_start ON spend (start);
