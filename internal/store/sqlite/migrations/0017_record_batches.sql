-- Issue 16: usage records a batch to a row. A row per record cost SQLite
-- most of what a record costs a request (29 values bound, the table and
-- five index b-trees); a row per sink batch costs that once a batch. The
-- row keeps what lets a reader pass a batch by without decoding it: its
-- time range, the distinct values of the filtered fields (summary) and a
-- 4-byte hash of each request id (ids). The encoding of summary, ids and
-- records is documented in batch_codec.go.
--
-- The rows of usage_records are moved into batches by the store in Go
-- when it opens the file (moveRecordRows), which then drops the table:
-- SQL cannot write the encoding. usage_hourly already holds them.
CREATE TABLE record_batches (
    id       INTEGER PRIMARY KEY,
    min_time INTEGER NOT NULL, -- Unix microseconds, the oldest record's time
    max_time INTEGER NOT NULL, -- the newest record's
    n        INTEGER NOT NULL, -- records in the batch
    summary  BLOB NOT NULL,
    ids      BLOB NOT NULL,
    records  BLOB NOT NULL
);

-- Batches newest first for the log viewer; those that may overlap a
-- window (max_time >= its start) for everything else.
CREATE INDEX record_batches_max_time ON record_batches (max_time);

-- How far moveRecordRows has come: the last rowid of usage_records moved.
CREATE TABLE usage_records_moved (last_rowid INTEGER NOT NULL);
INSERT INTO usage_records_moved VALUES (0);
