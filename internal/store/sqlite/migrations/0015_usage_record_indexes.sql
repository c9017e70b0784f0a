-- Fewer b-trees for each usage record to enter (issue 16: what a record
-- costs a request). Every index of usage_records is written on every
-- insert, so one that no query uses, or that holds mostly rows no query
-- asks for, is paid for by every request.
--
-- usage_records_project served no query: the project filter matches the
-- name or the id, (project = ? OR project_id = ?), and SQLite uses an
-- index for an OR only when every side has one; project_id has none.
-- Such filters run over the time window, and whole hours come from
-- usage_hourly, which has the project.
DROP INDEX IF EXISTS usage_records_project;

-- Most requests name no customer, and nothing asks for the records of
-- customer '': the customer index keeps only the records that name one.
-- A query uses it only when its WHERE says customer <> '' too (SQLite
-- proves a partial index usable from the query's literal terms, not
-- from a bound value), which filterOn adds beside customer = ?.
DROP INDEX IF EXISTS usage_records_customer;
CREATE INDEX usage_records_customer ON usage_records (customer, time) WHERE customer <> '';
