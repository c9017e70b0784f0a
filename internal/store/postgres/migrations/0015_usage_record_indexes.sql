-- Fewer b-trees for each usage record to enter (issue 16: what a record
-- costs PostgreSQL, the largest share of a cluster-mode request's CPU
-- outside the gateway). Every index of usage_records is written on every
-- insert, so one that no query uses, or that holds mostly rows no query
-- asks for, is paid for by every request. Together the two changes took
-- about a third off PostgreSQL's CPU a record without a customer
-- (BENCHMARKS.md, "Two indexes fewer a record").
--
-- usage_records_project served no query: the project filter matches the
-- name or the id, (project = $1 OR project_id = $1), and PostgreSQL uses
-- indexes for an OR only when every side has one; project_id has none.
-- Such filters scan the time window (usage_records_time), and whole
-- hours come from usage_hourly, which has the project.
DROP INDEX IF EXISTS usage_records_project;

-- Most requests name no customer, and nothing asks for the records of
-- customer '': the customer index keeps only the records that name one.
-- A query uses it only when its WHERE says customer <> '' too (the
-- planner proves a partial index usable from the query's own terms, and
-- a generic plan knows no parameter's value), which filterOn adds
-- beside customer = $n. Rebuilding it reads the table once, with writes
-- to it held meanwhile: the usage sink keeps the records in its queue,
-- or spills them, until the migration ends.
DROP INDEX IF EXISTS usage_records_customer;
CREATE INDEX usage_records_customer ON usage_records (customer, time) WHERE customer <> '';
