-- What a cache hit saved: the stored answer's cost when it was fetched
-- (integer micro-dollars); 0 for every other record.
ALTER TABLE usage_records ADD COLUMN saved_micros INTEGER NOT NULL DEFAULT 0;
