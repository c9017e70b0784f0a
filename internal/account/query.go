package account

import (
	"context"
	"errors"
	"time"

	"gatehouse/internal/limit"
)

// RecordStore is where the Sink writes records. Stores implement it;
// sqlite and postgres in this repository.
type RecordStore interface {
	// WriteRecords stores a batch atomically. A record whose RequestID is
	// already stored is skipped, so replaying a batch after a failure of
	// unknown outcome never duplicates one.
	WriteRecords(ctx context.Context, rs []Record) error
	// PruneRecords deletes at most limit records older than before and
	// reports how many it deleted (retention runs it in small batches, so
	// no single statement holds the table for long).
	PruneRecords(ctx context.Context, before time.Time, limit int) (int, error)
}

// Querier answers the usage API's questions from the stored records.
type Querier interface {
	// Usage aggregates the records of q's window in the database.
	Usage(ctx context.Context, q UsageQuery) ([]UsageRow, error)
	// Logs lists records newest first, a page at a time.
	Logs(ctx context.Context, q LogQuery) (LogPage, error)
	// Record returns one record by request id; ErrNotFound when there is
	// none.
	Record(ctx context.Context, requestID string) (Record, error)
}

// ErrNotFound is returned for a request id with no record.
var ErrNotFound = errors.New("usage record not found")

// GroupBy is a field the usage API aggregates by.
type GroupBy string

const (
	GroupNone     GroupBy = ""
	GroupKey      GroupBy = "key"      // key_id
	GroupProject  GroupBy = "project"  // project name
	GroupCustomer GroupBy = "customer" // customer
	GroupModel    GroupBy = "model"    // the model as the client sent it
	GroupProvider GroupBy = "provider" // the provider's configured name
)

// Interval buckets usage by time.
type Interval string

const (
	IntervalNone Interval = ""
	IntervalHour Interval = "hour"
	IntervalDay  Interval = "day" // UTC days
)

// Filter narrows records; empty fields match everything.
type Filter struct {
	From, To time.Time // [From, To): time >= From and time < To; zero: unbounded
	Key      string    // key_id
	Project  string    // project name or project id
	Customer string
	Model    string // as the client sent it
	Provider string
	Status   int // exact HTTP status; 0: any
}

// UsageQuery is GET /admin/usage.
type UsageQuery struct {
	Filter
	GroupBy  GroupBy
	Interval Interval
}

// UsageRow is one group (and bucket) of a usage answer. Requests counts
// every request, refusals included; Errors those with status >= 400;
// CacheHits those served from a cache (hit or semantic).
type UsageRow struct {
	Group            string       // the value of the GroupBy field; "" without grouping
	Bucket           time.Time    // bucket start, when an Interval is given
	Requests         int64        //
	Errors           int64        //
	PromptTokens     int64        //
	CompletionTokens int64        //
	CachedTokens     int64        //
	Cost             limit.Micros // exact sum of the records' costs
	CacheHits        int64        //
}

// LogQuery is GET /admin/logs.
type LogQuery struct {
	Filter
	Limit  int    // page size
	Cursor string // from the previous page's Next; "" for the first page
}

// LogPage is a page of records, newest first. Next is the cursor of the
// following page; "" when this is the last one.
type LogPage struct {
	Records []Record
	Next    string
}
