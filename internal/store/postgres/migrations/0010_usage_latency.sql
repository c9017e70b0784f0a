-- Latency histograms of the hourly rollup, so the usage API answers
-- latency and time-to-first-token percentiles (p50, p95) from it as it
-- answers sums. A percentile does not add up across hours or
-- combinations; counts in fixed buckets do. The buckets are
-- account.LatencyBounds: 20 a decade (the R20 numbers) from 1 ms to
-- 10 min; bucket 0 holds [0, 1 ms), bucket i [bound i-1, bound i), the
-- last everything from 10 min up, as width_bucket numbers them.
--
-- A companion table rather than histogram columns on usage_hourly: a
-- rollup row's samples fill a handful of the 118 buckets, so one row per
-- non-empty bucket stores what is there and nothing else, and SQL sums
-- the counts per group and interval as it sums usage_hourly; a row of
-- 236 counters, or an array SQL cannot add without unnesting it, would
-- not. The rows share usage_hourly's hour and combination (and its
-- project_id, for the project filter), and are written by WriteRecords
-- in the same statement. metric is 'latency' (every record's latency_ms)
-- or 'ttft' (ttft_ms of streamed records with one above 0).
CREATE TABLE usage_latency_hourly (
    hour       timestamptz NOT NULL,
    key_id     text NOT NULL,
    project    text NOT NULL,
    model      text NOT NULL,
    provider   text NOT NULL,
    project_id text NOT NULL DEFAULT '',
    metric     text NOT NULL,
    bucket     smallint NOT NULL,
    count      bigint NOT NULL,
    PRIMARY KEY (hour, key_id, project, model, provider, metric, bucket)
);

-- Records written before this migration. The array lists the bounds of
-- account.LatencyBounds (TestLatencyBackfill holds the two together).
INSERT INTO usage_latency_hourly (hour, key_id, project, model, provider, project_id, metric, bucket, count)
SELECT date_bin('1 hour', r.time, '2000-01-01 00:00:00+00'), r.key_id, r.project, r.model, r.provider, max(r.project_id),
    m.metric, width_bucket(m.v, ARRAY[
        1, 1.12, 1.25, 1.4, 1.6, 1.8, 2, 2.24, 2.5, 2.8, 3.15, 3.55, 4, 4.5, 5, 5.6, 6.3, 7.1, 8, 9, 10,
        11.2, 12.5, 14, 16, 18, 20, 22.4, 25, 28, 31.5, 35.5, 40, 45, 50, 56, 63, 71, 80, 90, 100, 112,
        125, 140, 160, 180, 200, 224, 250, 280, 315, 355, 400, 450, 500, 560, 630, 710, 800, 900, 1000,
        1120, 1250, 1400, 1600, 1800, 2000, 2240, 2500, 2800, 3150, 3550, 4000, 4500, 5000, 5600, 6300,
        7100, 8000, 9000, 10000, 11200, 12500, 14000, 16000, 18000, 20000, 22400, 25000, 28000, 31500,
        35500, 40000, 45000, 50000, 56000, 63000, 71000, 80000, 90000, 100000, 112000, 125000, 140000,
        160000, 180000, 200000, 224000, 250000, 280000, 315000, 355000, 400000, 450000, 500000, 560000,
        600000
    ]::double precision[]), count(*)
FROM usage_records r
CROSS JOIN LATERAL (VALUES ('latency', r.latency_ms),
    ('ttft', CASE WHEN r.stream AND r.ttft_ms > 0 THEN r.ttft_ms END)) AS m (metric, v)
WHERE m.v IS NOT NULL
GROUP BY 1, 2, 3, 4, 5, 7, 8;
