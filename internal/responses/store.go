package responses

import (
	"context"
	"time"
)

// Stored is a response the client asked the gateway to keep (store:
// true). It belongs to one project: a key of another project cannot see,
// continue or delete it.
type Stored struct {
	ID string // "resp_…", unique across projects
	// Project scopes the response: the project's id, or "config:" and
	// the name for a project that lives in the config only.
	Project   string
	Model     string    // the model the client asked for
	CreatedAt time.Time // kept to the microsecond; read back in UTC
	// Response is the response object exactly as the client received
	// it; GET /v1/responses/{id} answers with it.
	Response []byte
	// Items is the conversation up to and including this response, as a
	// JSON array of Responses input items (the input of every turn of
	// the chain, then the output items). A request naming this response
	// as previous_response_id is this array followed by its own input;
	// keeping it whole makes a continuation one read however long the
	// chain.
	Items []byte
}

// Store keeps stored responses where every replica sees them (SQLite in
// embedded mode, PostgreSQL in cluster mode).
type Store interface {
	// PutResponse keeps r; an existing response with the same ID is
	// replaced (a retried write is harmless).
	PutResponse(ctx context.Context, r *Stored) error
	// Response returns the response with this id in this project; ok is
	// false when there is none (or it belongs to another project).
	Response(ctx context.Context, project, id string) (r *Stored, ok bool, err error)
	// DeleteResponse removes the response; ok is false when there was
	// none in this project.
	DeleteResponse(ctx context.Context, project, id string) (ok bool, err error)
	// DeleteResponsesBefore removes at most limit responses created
	// before the time, oldest first, and reports how many it removed
	// (none when limit is below 1); retention calls it in small batches
	// so no transaction holds the table long.
	DeleteResponsesBefore(ctx context.Context, before time.Time, limit int) (int, error)
}
