-- A project's semantic-cache overrides (NULL: the config's).
ALTER TABLE projects ADD COLUMN semantic boolean;
ALTER TABLE projects ADD COLUMN semantic_threshold double precision;
