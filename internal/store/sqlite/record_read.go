package sqlite

import (
	"context"
	"database/sql"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"gatehouse/internal/account"
)

// The records' readers walk record_batches newest first (by max_time),
// a chunk of rows at a time, read each row's summary, and fetch and
// decode only the batches whose summary and time range may hold a
// match. A filter on a key, project, customer, model, provider, status
// or cache outcome that no record of a batch has passes the batch by
// without decoding it.

// batchChunk is how many batch rows' summaries a reader reads per query;
// maxFetch the most blobs it fetches in one query. A log page usually
// needs the first batch or two, so the fetches start at one blob and
// double.
const (
	batchChunk = 256
	maxFetch   = 64
)

// chunkSQL reads the summaries of a chunk of batches that meet a window
// [?, ?), newest first from a keyset position (max_time, id).
const chunkSQL = `SELECT id, min_time, max_time, summary FROM record_batches
	WHERE max_time >= ? AND min_time < ? AND (max_time, id) < (?, ?)
	ORDER BY max_time DESC, id DESC LIMIT ?`

// idsChunkSQL reads the id hashes of a chunk of batches, newest first
// from a keyset position (max_time, id).
const idsChunkSQL = `SELECT id, max_time, ids FROM record_batches
	WHERE (max_time, id) < (?, ?) ORDER BY max_time DESC, id DESC LIMIT ?`

// batchRef is a batch row without its blobs.
type batchRef struct {
	id, minT, maxT int64
}

// batchWalk is one walk over the batches that may hold records of f.
type batchWalk struct {
	s *Store
	f account.Filter
	// upTo, when not MaxInt64, leaves out the batches whose records all
	// lie after it (a log page's cursor).
	upTo int64
	// stop, when set, is asked before each batch is fetched: true ends
	// the walk there (a log page that is full and older than the batch).
	stop func(batchRef) bool
}

// window is f's time range in microseconds, [from, to).
func window(f account.Filter) (from, to int64) {
	from, to = math.MinInt64, math.MaxInt64
	if !f.From.IsZero() {
		from = unixMicros(f.From)
	}
	if !f.To.IsZero() {
		to = unixMicros(f.To)
	}
	return from, to
}

// run calls fn with each record of each batch that may hold a match,
// newest batch first; fn filters, and must copy what it keeps (the
// record is reused, see eachRecord).
func (w *batchWalk) run(ctx context.Context, fn func(r *account.Record) error) error {
	from, to := window(w.f)
	if w.upTo < math.MaxInt64 {
		to = min(to, w.upTo+1)
	}
	if from >= to {
		return nil
	}
	lastMax, lastID := int64(math.MaxInt64), int64(math.MaxInt64)
	grow := 1
	for {
		refs, more, err := w.chunk(ctx, from, to, lastMax, lastID)
		if err != nil {
			return err
		}
		for i := 0; i < len(refs); {
			if w.stop != nil && w.stop(refs[i]) {
				return nil
			}
			n := min(grow, len(refs)-i)
			grow = min(grow*2, maxFetch)
			blobs, err := w.s.fetchBlobs(ctx, refs[i:i+n])
			if err != nil {
				return err
			}
			for j, ref := range refs[i : i+n] {
				if j > 0 && w.stop != nil && w.stop(ref) {
					return nil
				}
				if blobs[j] == "" {
					continue // deleted by retention since its summary was read
				}
				if err := w.s.eachRecord(ref.id, blobs[j], fn); err != nil {
					return err
				}
			}
			i += n
		}
		if more.id == 0 {
			return nil
		}
		lastMax, lastID = more.maxT, more.id
	}
}

// chunk reads up to batchChunk batch rows before (lastMax, lastID) that
// meet [from, to), newest first, and returns those whose summary may
// match w.f, and the last row read (id 0 when there are no more).
func (w *batchWalk) chunk(ctx context.Context, from, to, lastMax, lastID int64) ([]batchRef, batchRef, error) {
	rows, err := w.s.r.QueryContext(ctx, chunkSQL, from, to, lastMax, lastID, batchChunk)
	if err != nil {
		return nil, batchRef{}, err
	}
	defer rows.Close()
	var refs []batchRef
	var last batchRef
	read := 0
	for rows.Next() {
		var ref batchRef
		var sum sql.RawBytes
		if err := rows.Scan(&ref.id, &ref.minT, &ref.maxT, &sum); err != nil {
			return nil, batchRef{}, err
		}
		read++
		last = ref
		ok, err := summaryMatches(sum, &w.f)
		if err != nil {
			return nil, batchRef{}, fmt.Errorf("batch %d: %w", ref.id, err)
		}
		if ok {
			refs = append(refs, ref)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, batchRef{}, err
	}
	if read < batchChunk {
		last = batchRef{}
	}
	return refs, last, nil
}

// fetchBlobs reads the records blobs of refs, in refs' order; "" for a
// batch no longer there (no stored blob is empty).
func (s *Store) fetchBlobs(ctx context.Context, refs []batchRef) ([]string, error) {
	var b strings.Builder
	b.WriteString("SELECT id, records FROM record_batches WHERE id IN (")
	args := make([]any, len(refs))
	at := make(map[int64]int, len(refs))
	for i, ref := range refs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('?')
		args[i] = ref.id
		at[ref.id] = i
	}
	b.WriteByte(')')
	rows, err := s.r.QueryContext(ctx, b.String(), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := make([]string, len(refs))
	for rows.Next() {
		var id int64
		var blob sql.RawBytes
		if err := rows.Scan(&id, &blob); err != nil {
			return nil, err
		}
		if i, ok := at[id]; ok {
			out[i] = string(blob)
		}
	}
	return out, rows.Err()
}

// eachRecord decodes batch id's blob a record at a time (eachRecord in
// batch_codec.go), counting the batch for the tests that hold the
// readers to skipping the rest.
func (s *Store) eachRecord(id int64, blob string, fn func(*account.Record) error) error {
	s.decoded.Add(1)
	if err := eachRecord(blob, nil, fn); err != nil {
		return fmt.Errorf("batch %d: %w", id, err)
	}
	return nil
}

// matches reports whether r is one of f's records.
func matches(r *account.Record, f *account.Filter, from, to int64) bool {
	at := unixMicros(r.Time)
	return at >= from && at < to &&
		(f.Key == "" || r.KeyID == f.Key) &&
		(f.Project == "" || r.Project == f.Project || r.ProjectID == f.Project) &&
		(f.Customer == "" || r.Customer == f.Customer) &&
		(f.Model == "" || r.Model == f.Model) &&
		(f.Provider == "" || r.Provider == f.Provider) &&
		(f.Status == 0 || r.Status == f.Status) &&
		(f.Cache == "" || r.Cache == f.Cache)
}

// Logs implements account.Querier: newest first, keyset-paged on
// (time, request_id). Batches overlap in time (a record's time is when
// its request arrived), so the walk goes on until the next batch's
// newest record is older than the page's last.
func (s *Store) Logs(ctx context.Context, q account.LogQuery) (account.LogPage, error) {
	var curAt int64
	var curID string
	upTo := int64(math.MaxInt64)
	if q.Cursor != "" {
		at, id, err := account.DecodeCursor(q.Cursor)
		if err != nil {
			return account.LogPage{}, err
		}
		curAt, curID, upTo = unixMicros(at), id, unixMicros(at)
	}
	from, to := window(q.Filter)
	keep := q.Limit + 1
	// page holds the newest keep records seen, newest first; once full,
	// a newer record takes the storage of the one it pushes out.
	page := make([]*account.Record, 0, min(keep, 1024))
	w := batchWalk{s: s, f: q.Filter, upTo: upTo, stop: func(ref batchRef) bool {
		return len(page) == keep && ref.maxT < unixMicros(page[keep-1].Time)
	}}
	err := w.run(ctx, func(r *account.Record) error {
		if !matches(r, &q.Filter, from, to) {
			return nil
		}
		if q.Cursor != "" {
			at := unixMicros(r.Time)
			if at > curAt || at == curAt && r.RequestID >= curID {
				return nil
			}
		}
		if len(page) == keep && !newer(r, page[keep-1]) {
			return nil
		}
		i, _ := slices.BinarySearchFunc(page, r, func(have, r *account.Record) int {
			if newer(r, have) {
				return 1
			}
			return -1
		})
		var slot *account.Record
		if len(page) == keep {
			slot, page = page[keep-1], page[:keep-1]
		} else {
			slot = new(account.Record)
		}
		*slot = *r
		page = slices.Insert(page, i, slot)
		return nil
	})
	if err != nil {
		return account.LogPage{}, fmt.Errorf("sqlite: logs: %w", err)
	}
	rs := make([]account.Record, len(page))
	for i, r := range page {
		rs[i] = *r
	}
	return account.Paginate(rs, q.Limit), nil
}

// newer reports whether a comes before b in the log: a later time, or
// the same time and a greater request id.
func newer(a, b *account.Record) bool {
	if c := a.Time.Compare(b.Time); c != 0 {
		return c > 0
	}
	return a.RequestID > b.RequestID
}

// Record implements account.Querier: the batches' id hashes, newest
// batch first, and the batches whose hashes hold the id's decoded to
// find it.
func (s *Store) Record(ctx context.Context, requestID string) (account.Record, error) {
	h := idHash(requestID)
	lastMax, lastID := int64(math.MaxInt64), int64(math.MaxInt64)
	for {
		var hits []batchRef
		read := 0
		rows, err := s.r.QueryContext(ctx, idsChunkSQL, lastMax, lastID, batchChunk)
		if err != nil {
			return account.Record{}, fmt.Errorf("sqlite: record: %w", err)
		}
		for rows.Next() {
			var ref batchRef
			var ids sql.RawBytes
			if err := rows.Scan(&ref.id, &ref.maxT, &ids); err != nil {
				rows.Close()
				return account.Record{}, fmt.Errorf("sqlite: record: %w", err)
			}
			read++
			lastMax, lastID = ref.maxT, ref.id
			for k := 0; k+4 <= len(ids); k += 4 {
				if binary.LittleEndian.Uint32(ids[k:]) == h {
					hits = append(hits, ref)
					break
				}
			}
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return account.Record{}, fmt.Errorf("sqlite: record: %w", err)
		}
		for _, ref := range hits {
			blobs, err := s.fetchBlobs(ctx, []batchRef{ref})
			if err != nil {
				return account.Record{}, fmt.Errorf("sqlite: record: %w", err)
			}
			if blobs[0] == "" {
				continue // deleted by retention since its hashes were read
			}
			var found *account.Record
			err = s.eachRecord(ref.id, blobs[0], func(r *account.Record) error {
				if found == nil && r.RequestID == requestID {
					c := *r
					found = &c
				}
				return nil
			})
			if err != nil {
				return account.Record{}, fmt.Errorf("sqlite: record: %w", err)
			}
			if found != nil {
				return *found, nil
			}
		}
		if read < batchChunk {
			return account.Record{}, account.ErrNotFound
		}
	}
}

// usageRecords answers q from the records themselves (the partial hours
// of a window, and what the rollup does not hold): the matching records
// of each batch that may hold one, added up by group and time bucket in
// Go.
func (s *Store) usageRecords(ctx context.Context, q account.UsageQuery) ([]account.UsageRow, error) {
	type rowKey struct {
		group  string
		bucket int64
	}
	width := bucketMicros[q.Interval]
	from, to := window(q.Filter)
	rows := map[rowKey]*account.UsageRow{}
	w := batchWalk{s: s, f: q.Filter, upTo: math.MaxInt64}
	err := w.run(ctx, func(r *account.Record) error {
		if !matches(r, &q.Filter, from, to) {
			return nil
		}
		k := rowKey{group: groupValue(r, q.GroupBy)}
		if width > 0 {
			at := unixMicros(r.Time)
			k.bucket = at - at%width
		}
		u := rows[k]
		if u == nil {
			u = &account.UsageRow{Group: k.group}
			if width > 0 {
				u.Bucket = time.UnixMicro(k.bucket).UTC()
			}
			rows[k] = u
		}
		u.Requests++
		if r.Status >= 400 {
			u.Errors++
		}
		u.PromptTokens += int64(r.PromptTokens)
		u.CompletionTokens += int64(r.CompletionTokens)
		u.CachedTokens += int64(r.CachedTokens)
		u.Cost += r.Cost
		if r.Cache == account.CacheHit || r.Cache == account.CacheSemantic {
			u.CacheHits++
		}
		u.Latency.Add(r.LatencyMS)
		if r.Stream && r.TTFTMS > 0 {
			u.TTFT.Add(r.TTFTMS)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("sqlite: usage: %w", err)
	}
	var sums account.UsageSums
	for _, u := range rows {
		sums.Add(u)
	}
	return sums.Rows(), nil
}

// groupValue is r's value of the field g groups by ("" for none).
func groupValue(r *account.Record, g account.GroupBy) string {
	switch g {
	case account.GroupKey:
		return r.KeyID
	case account.GroupProject:
		return r.Project
	case account.GroupCustomer:
		return r.Customer
	case account.GroupModel:
		return r.Model
	case account.GroupProvider:
		return r.Provider
	}
	return ""
}
