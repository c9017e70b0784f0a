-- Latency histograms on the hourly rollup, so the usage API answers
-- latency and time-to-first-token percentiles (p50, p95) from it as it
-- answers sums. A percentile does not add up across hours or
-- combinations; counts in fixed buckets do. The buckets are
-- account.LatencyBounds: 20 a decade (the R20 numbers) from 1 ms to
-- 10 min; bucket 0 holds [0, 1 ms), bucket i [bound i-1, bound i), the
-- last everything from 10 min up. latency_hist counts every record's
-- latency_ms, ttft_hist the ttft_ms of streamed records with one above
-- 0, each as a JSON object of the non-empty buckets' counts keyed by
-- bucket number ({"40":3,"52":1}; account.Histogram.AppendJSON).
--
-- Columns on usage_hourly rather than a companion table of one row per
-- hour, combination and bucket: a busy combination fills ten or twenty
-- buckets an hour, and the usage API then read ten times as many rows
-- as usage_hourly has (over ten million records, the last 24 hours took
-- 621 ms instead of 60, 30 days by project 12 s instead of 1; see
-- BENCHMARKS.md). Here it reads each rollup row once and adds the
-- histograms up in Go, and WriteRecords merges a batch's counts into the
-- row it already upserts.
ALTER TABLE usage_hourly ADD COLUMN latency_hist TEXT NOT NULL DEFAULT '{}';
ALTER TABLE usage_hourly ADD COLUMN ttft_hist TEXT NOT NULL DEFAULT '{}';

-- Records written before this migration. The CASE lists the bounds of
-- account.LatencyBounds (TestLatencyBackfill holds the two together).
UPDATE usage_hourly SET latency_hist = h.latency, ttft_hist = h.ttft
FROM (
    SELECT hour, key_id, project, model, provider,
        coalesce(json_group_object(bucket, n) FILTER (WHERE metric = 'latency'), '{}') AS latency,
        coalesce(json_group_object(bucket, n) FILTER (WHERE metric = 'ttft'), '{}') AS ttft
    FROM (
        SELECT hour, key_id, project, model, provider, metric,
            CASE
                WHEN v < 1 THEN 0 WHEN v < 1.12 THEN 1 WHEN v < 1.25 THEN 2 WHEN v < 1.4 THEN 3 WHEN v < 1.6 THEN 4
                WHEN v < 1.8 THEN 5 WHEN v < 2 THEN 6 WHEN v < 2.24 THEN 7 WHEN v < 2.5 THEN 8 WHEN v < 2.8 THEN 9
                WHEN v < 3.15 THEN 10 WHEN v < 3.55 THEN 11 WHEN v < 4 THEN 12 WHEN v < 4.5 THEN 13 WHEN v < 5 THEN 14
                WHEN v < 5.6 THEN 15 WHEN v < 6.3 THEN 16 WHEN v < 7.1 THEN 17 WHEN v < 8 THEN 18 WHEN v < 9 THEN 19
                WHEN v < 10 THEN 20 WHEN v < 11.2 THEN 21 WHEN v < 12.5 THEN 22 WHEN v < 14 THEN 23 WHEN v < 16 THEN 24
                WHEN v < 18 THEN 25 WHEN v < 20 THEN 26 WHEN v < 22.4 THEN 27 WHEN v < 25 THEN 28 WHEN v < 28 THEN 29
                WHEN v < 31.5 THEN 30 WHEN v < 35.5 THEN 31 WHEN v < 40 THEN 32 WHEN v < 45 THEN 33 WHEN v < 50 THEN 34
                WHEN v < 56 THEN 35 WHEN v < 63 THEN 36 WHEN v < 71 THEN 37 WHEN v < 80 THEN 38 WHEN v < 90 THEN 39
                WHEN v < 100 THEN 40 WHEN v < 112 THEN 41 WHEN v < 125 THEN 42 WHEN v < 140 THEN 43 WHEN v < 160 THEN 44
                WHEN v < 180 THEN 45 WHEN v < 200 THEN 46 WHEN v < 224 THEN 47 WHEN v < 250 THEN 48 WHEN v < 280 THEN 49
                WHEN v < 315 THEN 50 WHEN v < 355 THEN 51 WHEN v < 400 THEN 52 WHEN v < 450 THEN 53 WHEN v < 500 THEN 54
                WHEN v < 560 THEN 55 WHEN v < 630 THEN 56 WHEN v < 710 THEN 57 WHEN v < 800 THEN 58 WHEN v < 900 THEN 59
                WHEN v < 1000 THEN 60 WHEN v < 1120 THEN 61 WHEN v < 1250 THEN 62 WHEN v < 1400 THEN 63 WHEN v < 1600 THEN 64
                WHEN v < 1800 THEN 65 WHEN v < 2000 THEN 66 WHEN v < 2240 THEN 67 WHEN v < 2500 THEN 68 WHEN v < 2800 THEN 69
                WHEN v < 3150 THEN 70 WHEN v < 3550 THEN 71 WHEN v < 4000 THEN 72 WHEN v < 4500 THEN 73 WHEN v < 5000 THEN 74
                WHEN v < 5600 THEN 75 WHEN v < 6300 THEN 76 WHEN v < 7100 THEN 77 WHEN v < 8000 THEN 78 WHEN v < 9000 THEN 79
                WHEN v < 10000 THEN 80 WHEN v < 11200 THEN 81 WHEN v < 12500 THEN 82 WHEN v < 14000 THEN 83 WHEN v < 16000 THEN 84
                WHEN v < 18000 THEN 85 WHEN v < 20000 THEN 86 WHEN v < 22400 THEN 87 WHEN v < 25000 THEN 88 WHEN v < 28000 THEN 89
                WHEN v < 31500 THEN 90 WHEN v < 35500 THEN 91 WHEN v < 40000 THEN 92 WHEN v < 45000 THEN 93 WHEN v < 50000 THEN 94
                WHEN v < 56000 THEN 95 WHEN v < 63000 THEN 96 WHEN v < 71000 THEN 97 WHEN v < 80000 THEN 98 WHEN v < 90000 THEN 99
                WHEN v < 100000 THEN 100 WHEN v < 112000 THEN 101 WHEN v < 125000 THEN 102 WHEN v < 140000 THEN 103 WHEN v < 160000 THEN 104
                WHEN v < 180000 THEN 105 WHEN v < 200000 THEN 106 WHEN v < 224000 THEN 107 WHEN v < 250000 THEN 108 WHEN v < 280000 THEN 109
                WHEN v < 315000 THEN 110 WHEN v < 355000 THEN 111 WHEN v < 400000 THEN 112 WHEN v < 450000 THEN 113 WHEN v < 500000 THEN 114
                WHEN v < 560000 THEN 115 WHEN v < 600000 THEN 116
                ELSE 117
            END AS bucket,
            count(*) AS n
        FROM (
            SELECT time - time % 3600000000 AS hour, key_id, project, model, provider, 'latency' AS metric, latency_ms AS v
            FROM usage_records
            UNION ALL
            SELECT time - time % 3600000000, key_id, project, model, provider, 'ttft', ttft_ms
            FROM usage_records WHERE stream AND ttft_ms > 0
        )
        GROUP BY hour, key_id, project, model, provider, metric, bucket
    )
    GROUP BY hour, key_id, project, model, provider
) AS h
WHERE usage_hourly.hour = h.hour AND usage_hourly.key_id = h.key_id AND usage_hourly.project = h.project
    AND usage_hourly.model = h.model AND usage_hourly.provider = h.provider;
