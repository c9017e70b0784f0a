-- Stored responses (responses.Stored): the Responses API's store: true,
-- kept so a later request can name one as previous_response_id and
-- GET/DELETE /v1/responses/{id} can answer. response is the response
-- object as the client received it; items the whole conversation up to
-- it, as a JSON array of input items. created_at is Unix microseconds.
--
-- An ordinary rowid table, not WITHOUT ROWID as the small tables here:
-- a row carries the bodies of a whole conversation, often many pages,
-- and a WITHOUT ROWID table keeps its rows in the primary key's b-tree,
-- which SQLite advises only for rows well under a page.
CREATE TABLE responses (
    id         TEXT PRIMARY KEY,
    project    TEXT NOT NULL,
    model      TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    response   BLOB NOT NULL,
    items      BLOB NOT NULL
);

-- Retention deletes the oldest first, a batch at a time.
CREATE INDEX responses_created ON responses (created_at);
