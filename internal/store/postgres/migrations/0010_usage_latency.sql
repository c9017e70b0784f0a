-- Latency histograms on the hourly rollup, so the usage API answers
-- latency and time-to-first-token percentiles (p50, p95) from it as it
-- answers sums. A percentile does not add up across hours or
-- combinations; counts in fixed buckets do. The buckets are
-- account.LatencyBounds: 20 a decade (the R20 numbers) from 1 ms to
-- 10 min; bucket 0 holds [0, 1 ms), bucket i [bound i-1, bound i), the
-- last everything from 10 min up, as width_bucket numbers them.
-- latency_hist counts every record's latency_ms, ttft_hist the ttft_ms
-- of streamed records with one above 0, each as a JSON object of the
-- non-empty buckets' counts keyed by bucket number ({"40": 3, "52": 1};
-- account.Histogram.AppendJSON). json, not jsonb: the usage API reads
-- them as text, which json keeps and jsonb has to print (half the time
-- of a 30-day question went there).
--
-- Columns on usage_hourly rather than a companion table of one row per
-- hour, combination and bucket: a busy combination fills ten or twenty
-- buckets an hour, and the usage API then aggregated ten times as many
-- rows as usage_hourly has (over ten million records, the last 24 hours
-- took 207 ms instead of 12, 30 days by project 2.8 s instead of 0.4;
-- see BENCHMARKS.md). Here it reads each rollup row once, the usage API
-- adding the histograms up in Go, and WriteRecords merges a batch's
-- counts into the row it already upserts, with usage_hist_add.
ALTER TABLE usage_hourly ADD COLUMN latency_hist json NOT NULL DEFAULT '{}',
    ADD COLUMN ttft_hist json NOT NULL DEFAULT '{}';

-- usage_hist_add adds histogram b to a bucket by bucket: b's buckets
-- with a's counts added, over a (b is a batch's, usually the smaller).
CREATE FUNCTION usage_hist_add(a json, b json) RETURNS json LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT (a::jsonb || coalesce((SELECT jsonb_object_agg(bucket, n::bigint + coalesce((a ->> bucket)::bigint, 0))
        FROM json_each_text(b) AS e (bucket, n)), '{}'))::json
$$;

-- Records written before this migration. The array lists the bounds of
-- account.LatencyBounds (TestLatencyBackfill holds the two together).
UPDATE usage_hourly AS u SET latency_hist = h.latency, ttft_hist = h.ttft
FROM (
    SELECT hour, key_id, project, model, provider,
        coalesce(json_object_agg(bucket, n) FILTER (WHERE metric = 'latency'), '{}') AS latency,
        coalesce(json_object_agg(bucket, n) FILTER (WHERE metric = 'ttft'), '{}') AS ttft
    FROM (
        SELECT date_bin('1 hour', r.time, '2000-01-01 00:00:00+00') AS hour, r.key_id, r.project, r.model, r.provider,
            m.metric, width_bucket(m.v, ARRAY[
                1, 1.12, 1.25, 1.4, 1.6, 1.8, 2, 2.24, 2.5, 2.8, 3.15, 3.55, 4, 4.5, 5, 5.6, 6.3, 7.1, 8, 9, 10,
                11.2, 12.5, 14, 16, 18, 20, 22.4, 25, 28, 31.5, 35.5, 40, 45, 50, 56, 63, 71, 80, 90, 100, 112,
                125, 140, 160, 180, 200, 224, 250, 280, 315, 355, 400, 450, 500, 560, 630, 710, 800, 900, 1000,
                1120, 1250, 1400, 1600, 1800, 2000, 2240, 2500, 2800, 3150, 3550, 4000, 4500, 5000, 5600, 6300,
                7100, 8000, 9000, 10000, 11200, 12500, 14000, 16000, 18000, 20000, 22400, 25000, 28000, 31500,
                35500, 40000, 45000, 50000, 56000, 63000, 71000, 80000, 90000, 100000, 112000, 125000, 140000,
                160000, 180000, 200000, 224000, 250000, 280000, 315000, 355000, 400000, 450000, 500000, 560000,
                600000
            ]::double precision[]) AS bucket, count(*) AS n
        FROM usage_records r
        CROSS JOIN LATERAL (VALUES ('latency', r.latency_ms),
            ('ttft', CASE WHEN r.stream AND r.ttft_ms > 0 THEN r.ttft_ms END)) AS m (metric, v)
        WHERE m.v IS NOT NULL
        GROUP BY 1, 2, 3, 4, 5, 6, 7
    ) AS b
    GROUP BY 1, 2, 3, 4, 5
) AS h
WHERE u.hour = h.hour AND u.key_id = h.key_id AND u.project = h.project AND u.model = h.model
    AND u.provider = h.provider;
