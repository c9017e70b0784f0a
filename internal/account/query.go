package account

import (
	"context"
	"encoding/base64"
	"errors"
	"sort"
	"strconv"
	"strings"
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

// FreshRecordStore is a RecordStore that can store a batch faster when
// told that none of its records was handed to the store before (the
// sink's batches taken from its queue; replays of the spill file go
// through WriteRecords). Such a batch needs no look for its request ids
// among the stored records, which in a store that keeps no index by
// request id (SQLite's batches) is the dear part of a write.
type FreshRecordStore interface {
	RecordStore
	// WriteFreshRecords is WriteRecords for records never written
	// before; duplicates within rs are still stored once.
	WriteFreshRecords(ctx context.Context, rs []Record) error
}

// ParallelRecordStore is a RecordStore that takes several batches at
// once, each on a connection of its own: the sink writes that many of a
// backlog together (SinkOptions.Writers).
type ParallelRecordStore interface {
	RecordStore
	// ParallelWrites is how many batches it takes at once.
	ParallelWrites() int
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
	IntervalNone   Interval = ""
	IntervalMinute Interval = "minute" // from the records only: the rollup is hourly
	IntervalHour   Interval = "hour"
	IntervalDay    Interval = "day" // UTC days
)

// MaxMinuteWindow bounds a window bucketed by minute: 1,440 buckets,
// read from the records themselves.
const MaxMinuteWindow = 24 * time.Hour

// Filter narrows records; empty fields match everything.
type Filter struct {
	From, To time.Time // [From, To): time >= From and time < To; zero: unbounded
	Key      string    // key_id
	Project  string    // project name or project id
	Customer string
	Model    string // as the client sent it
	Provider string
	Status   int    // exact HTTP status; 0: any
	Cache    string // the record's cache outcome (hit, semantic, miss, bypass); "": any
}

// UsageQuery is GET /admin/usage.
type UsageQuery struct {
	Filter
	GroupBy  GroupBy
	Interval Interval
}

// UsageRow is one group (and bucket) of a usage answer. Requests counts
// every request, refusals included; Errors those with status >= 400;
// CacheHits those served from a cache (hit or semantic). Latency counts
// the latency_ms of every request, TTFT the ttft_ms of streamed requests
// that have one (above 0): histograms, so that rows merge.
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
	Latency          Histogram    //
	TTFT             Histogram    //
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

// Micros is limit.Micros, for stores that build rows without importing
// limit themselves.
type Micros = limit.Micros

// GroupColumn is the record column a GroupBy aggregates by.
func GroupColumn(g GroupBy) string {
	switch g {
	case GroupKey:
		return "key_id"
	case GroupProject, GroupCustomer, GroupModel, GroupProvider:
		return string(g)
	}
	return ""
}

// ParseGroupBy reads the group_by parameter ("" for none).
func ParseGroupBy(s string) (GroupBy, bool) {
	switch g := GroupBy(s); g {
	case GroupNone, GroupKey, GroupProject, GroupCustomer, GroupModel, GroupProvider:
		return g, true
	}
	return "", false
}

// ParseInterval reads the interval parameter ("" for none).
func ParseInterval(s string) (Interval, bool) {
	switch i := Interval(s); i {
	case IntervalNone, IntervalMinute, IntervalHour, IntervalDay:
		return i, true
	}
	return "", false
}

// FilterColumn is one equality condition of a Filter: a column and the
// value it must have. The "project" column matches the project's name or
// its id.
type FilterColumn struct {
	Column string
	Value  any
}

// FilterColumns lists f's equality conditions (its time window apart),
// so every store builds the same WHERE clause.
func FilterColumns(f Filter) []FilterColumn {
	var out []FilterColumn
	for _, c := range [...]struct {
		col, v string
	}{{"key_id", f.Key}, {"project", f.Project}, {"customer", f.Customer}, {"model", f.Model}, {"provider", f.Provider},
		{"cache", f.Cache}} {
		if c.v != "" {
			out = append(out, FilterColumn{c.col, c.v})
		}
	}
	if f.Status != 0 {
		out = append(out, FilterColumn{"status", f.Status})
	}
	return out
}

// ErrBadCursor is returned for a cursor that no page handed out.
var ErrBadCursor = errors.New("invalid cursor")

// EncodeCursor is the opaque cursor of the page after r: the position
// of the last record listed.
func EncodeCursor(r Record) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(r.Time.UnixMicro(), 10) + ":" + r.RequestID))
}

// DecodeCursor reads EncodeCursor's position.
func DecodeCursor(c string) (time.Time, string, error) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return time.Time{}, "", ErrBadCursor
	}
	at, id, ok := strings.Cut(string(b), ":")
	us, err := strconv.ParseInt(at, 10, 64)
	if !ok || err != nil || id == "" {
		return time.Time{}, "", ErrBadCursor
	}
	return time.UnixMicro(us).UTC(), id, nil
}

// Paginate turns up to limit+1 records read into a page: the extra one,
// if there, says another page follows.
func Paginate(rs []Record, limit int) LogPage {
	if len(rs) <= limit {
		return LogPage{Records: rs}
	}
	rs = rs[:limit]
	return LogPage{Records: rs, Next: EncodeCursor(rs[len(rs)-1])}
}

// Hourly rollup: stores keep, besides the records, their sums per UTC
// hour, key, project, model and provider, and answer a usage question
// from it for the whole hours of its window and from the records for the
// partial hours at its edges. These decide the split and merge the
// parts, the same way for every store.

// RollupAnswers reports whether the rollup holds what q asks: it has no
// customer, status or cache outcome, so a question about those reads the
// records, and it is hourly, so minute buckets do too.
func RollupAnswers(q UsageQuery) bool {
	return q.Customer == "" && q.Status == 0 && q.Cache == "" && q.GroupBy != GroupCustomer && q.Interval != IntervalMinute
}

// SplitHours cuts q's window into the partial hour at its start (head),
// the whole hours (body) and the partial hour at its end (tail); ok is
// false when the window holds no whole hour, or is open at either end.
// A part with From == To is empty.
func SplitHours(f Filter) (head, body, tail Filter, ok bool) {
	if f.From.IsZero() || f.To.IsZero() {
		return f, f, f, false
	}
	start := f.From.Truncate(time.Hour)
	if start.Before(f.From) {
		start = start.Add(time.Hour)
	}
	end := f.To.Truncate(time.Hour)
	if !start.Before(end) {
		return f, f, f, false
	}
	head, body, tail = f, f, f
	head.To, body.From, body.To, tail.From = start, start, end, end
	return head, body, tail, true
}

// AnswerUsage answers q with a store's two aggregations: rollup for the
// whole hours of the window, records for the partial hours at its edges
// and for everything the rollup cannot answer; the parts are merged.
func AnswerUsage(ctx context.Context, q UsageQuery, records, rollup func(context.Context, UsageQuery) ([]UsageRow, error)) ([]UsageRow, error) {
	if !RollupAnswers(q) {
		return records(ctx, q)
	}
	head, body, tail, ok := SplitHours(q.Filter)
	if !ok {
		return records(ctx, q)
	}
	var parts [][]UsageRow
	for i, f := range []Filter{head, body, tail} {
		if f.Empty() {
			continue
		}
		part := q
		part.Filter = f
		query := records
		if i == 1 {
			query = rollup
		}
		rows, err := query(ctx, part)
		if err != nil {
			return nil, err
		}
		parts = append(parts, rows)
	}
	return MergeUsage(parts...), nil
}

// MergeUsage adds up rows of the same group and bucket from the parts of
// a split question, histograms included, ordered by bucket then group.
func MergeUsage(parts ...[]UsageRow) []UsageRow {
	var sums UsageSums
	for _, rows := range parts {
		for i := range rows {
			sums.Add(&rows[i])
		}
	}
	return sums.Rows()
}

// UsageSums adds up the partial rows of a usage answer by group and
// bucket as a store reads them: a store's query may return several per
// group and bucket (one per latency bucket, say), and a split question
// has parts. The zero value is empty.
type UsageSums struct {
	at   map[usageKey]int
	rows []UsageRow
}

type usageKey struct {
	group  string
	bucket time.Time
}

// add adds r's sums (not its histograms) to the row of its group and
// bucket, started at zero the first time, and returns that row; the
// pointer is good until the next call.
func (s *UsageSums) add(r *UsageRow) *UsageRow {
	k := usageKey{r.Group, r.Bucket}
	i, ok := s.at[k]
	if !ok {
		if s.at == nil {
			s.at = map[usageKey]int{}
		}
		i = len(s.rows)
		s.at[k] = i
		s.rows = append(s.rows, UsageRow{Group: r.Group, Bucket: r.Bucket})
	}
	m := &s.rows[i]
	m.Requests += r.Requests
	m.Errors += r.Errors
	m.PromptTokens += r.PromptTokens
	m.CompletionTokens += r.CompletionTokens
	m.CachedTokens += r.CachedTokens
	m.Cost += r.Cost
	m.CacheHits += r.CacheHits
	return m
}

// Add adds r to the row of its group and bucket.
func (s *UsageSums) Add(r *UsageRow) {
	m := s.add(r)
	m.Latency.Merge(r.Latency)
	m.TTFT.Merge(r.TTFT)
}

// UsagePartial is one row of a store's usage query before the adding
// up: sums over some records of a group and bucket (its UsageRow,
// histograms left empty), of which Samples fall in latency bucket
// LatencyBucket and ttft bucket TTFTBucket (-1: none).
type UsagePartial struct {
	UsageRow
	LatencyBucket, TTFTBucket int
	Samples                   int64
}

// AddPartial adds p to the row of its group and bucket.
func (s *UsageSums) AddPartial(p *UsagePartial) {
	m := s.add(&p.UsageRow)
	if p.LatencyBucket >= 0 {
		m.Latency.AddCount(p.LatencyBucket, p.Samples)
	}
	if p.TTFTBucket >= 0 {
		m.TTFT.AddCount(p.TTFTBucket, p.Samples)
	}
}

// AddRollup adds r, a rollup row with its histograms in the rollup's
// JSON form (Histogram.AppendJSON; several objects may be run
// together), to the row of its group and bucket. r's own histograms are
// ignored.
func (s *UsageSums) AddRollup(r *UsageRow, latency, ttft string) error {
	m := s.add(r)
	if err := m.Latency.AddJSON(latency); err != nil {
		return err
	}
	return m.TTFT.AddJSON(ttft)
}

// Rows returns the rows, ordered by bucket then group (never nil).
func (s *UsageSums) Rows() []UsageRow {
	out := s.rows
	if out == nil {
		out = []UsageRow{}
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].Bucket.Equal(out[j].Bucket) {
			return out[i].Bucket.Before(out[j].Bucket)
		}
		return out[i].Group < out[j].Group
	})
	return out
}

// Empty reports whether f's window holds no time.
func (f Filter) Empty() bool { return !f.From.IsZero() && !f.To.IsZero() && !f.From.Before(f.To) }
