-- Stored responses (responses.Stored): the Responses API's store: true,
-- kept so a later request can name one as previous_response_id and
-- GET/DELETE /v1/responses/{id} can answer, on whichever replica it
-- lands. response is the response object as the client received it;
-- items the whole conversation up to it, as a JSON array of input items.
-- Both are bytea, not jsonb: they are handed back byte for byte and
-- never queried inside, and jsonb would reorder keys and reformat
-- numbers.
CREATE TABLE responses (
    id         text PRIMARY KEY,
    project    text NOT NULL,
    model      text NOT NULL,
    created_at timestamptz NOT NULL,
    response   bytea NOT NULL,
    items      bytea NOT NULL
);

-- Retention deletes the oldest first, a batch at a time.
CREATE INDEX responses_created ON responses (created_at);
