-- A project's semantic-cache overrides (NULL: the config's), and the
-- semantic cache's vectors, loaded into the in-process index at start:
-- one per stored answer (key), the unit-length float32 embedding of its
-- question, little-endian, within its scope.
ALTER TABLE projects ADD COLUMN semantic INTEGER;
ALTER TABLE projects ADD COLUMN semantic_threshold REAL;

CREATE TABLE semantic_vectors (
    key     TEXT PRIMARY KEY,
    scope   TEXT NOT NULL,
    vector  BLOB NOT NULL,
    created INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX semantic_vectors_created ON semantic_vectors (created);
