-- A project's cache TTL override in seconds (NULL: the config's), next
-- to its exact-cache on/off (the cache column); a key barred from the
-- cache.
ALTER TABLE projects ADD COLUMN cache_ttl INTEGER;
ALTER TABLE keys ADD COLUMN no_cache INTEGER NOT NULL DEFAULT 0;
