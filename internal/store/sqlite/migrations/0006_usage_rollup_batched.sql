-- The rollup is now added to once per batch, hour and combination by
-- WriteRecords, in the records' transaction: the trigger's upsert per
-- record cost more than the record's own insert.
DROP TRIGGER IF EXISTS usage_records_rollup;

-- One key's usage reads its own rollup rows, not every combination of
-- each hour.
CREATE INDEX usage_hourly_key ON usage_hourly (key_id, hour);
