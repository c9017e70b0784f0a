-- Issue 17: keys and projects limited to some providers (by the
-- provider's configured name), a jsonb list like models; '[]' allows
-- every provider.
ALTER TABLE keys ADD COLUMN providers jsonb NOT NULL DEFAULT '[]';
ALTER TABLE projects ADD COLUMN providers jsonb NOT NULL DEFAULT '[]';
