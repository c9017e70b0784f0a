package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"slices"
	"time"

	"gatehouse/internal/account"
)

// insertBatchSQL stores one encoded batch (batch_codec.go).
const insertBatchSQL = `INSERT INTO record_batches (min_time, max_time, n, summary, ids, records) VALUES (?,?,?,?,?,?)`

// overlapSQL lists the id hashes of the batches whose time range meets
// [?, ?]: the only ones that can hold a record of a batch with that
// range again (a record keeps its time).
const overlapSQL = `SELECT id, ids FROM record_batches WHERE max_time >= ? AND min_time <= ?`

// batchBlobSQL reads one batch's records.
const batchBlobSQL = `SELECT records FROM record_batches WHERE id = ?`

// maxBatchBytes bounds one row's records blob: a batch whose encoding
// grows past it (records with logged bodies) goes into several rows, so
// that a reader never holds one huge blob for a page of a few records.
const maxBatchBytes = 1 << 20

// rollupSQL adds one combination's sums and latency histograms to its
// hour of usage_hourly. The histograms are JSON objects of bucket counts
// (migration 0012), merged with the stored ones by histAdd; a batch
// without streams adds no ttft.
const rollupSQL = `INSERT INTO usage_hourly (hour, key_id, project, model, provider, project_id, requests, errors,
	prompt_tokens, completion_tokens, cached_tokens, cost_micros, cache_hits, latency_hist, ttft_hist)
	VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)
	ON CONFLICT (hour, key_id, project, model, provider) DO UPDATE SET
	requests = requests + excluded.requests, errors = errors + excluded.errors,
	prompt_tokens = prompt_tokens + excluded.prompt_tokens,
	completion_tokens = completion_tokens + excluded.completion_tokens,
	cached_tokens = cached_tokens + excluded.cached_tokens,
	cost_micros = cost_micros + excluded.cost_micros, cache_hits = cache_hits + excluded.cache_hits,
	latency_hist = ` + histAddFunc + `(usage_hourly.latency_hist, excluded.latency_hist),
	ttft_hist = CASE excluded.ttft_hist WHEN '{}' THEN usage_hourly.ttft_hist
		ELSE ` + histAddFunc + `(usage_hourly.ttft_hist, excluded.ttft_hist) END`

// recordWriter holds the statements WriteRecords and AddSpend run,
// prepared by the driver itself on the writer connection, the argument
// slice it binds them with and the batch encoder. Both run on timers
// (the usage sink's batches, the spend log's flush), and both go to the
// driver directly (sql.Conn.Raw), not through database/sql: per
// statement that spares a copy and a type check of every argument, and,
// as the driver calls get a context that never ends, the watcher
// goroutine and progress callback the driver sets up to interrupt SQLite
// when a context can end. The batch's deadline is checked before each
// statement instead, and a statement waits for a lock at most
// busyTimeout, as every other one.
type recordWriter struct {
	on     driver.Conn   // the connection stmts are prepared on; nil before the first write
	stmts  []driver.Stmt // by the stmt constants below
	args   []driver.NamedValue
	enc    batchEncoder
	sum    []byte
	order  []uint64 // id hash << 32 | index, sorted: the batch's ids for the duplicate checks
	hashes []uint32 // the idHash of each record of the batch, by index
	slots  []int32  // repeatedIDs' table: index+1 of a record, 0 empty
}

// The indexes in recordWriter.stmts, in writerSQL's order.
const (
	stmtInsertBatch = iota
	stmtOverlap
	stmtBatchBlob
	stmtRollup
	stmtAddSpend
	stmtBegin
	stmtCommit
	stmtRollback
)

// writerSQL are the statements of recordWriter.stmts. BEGIN IMMEDIATE,
// as the writer's DSN asks of every other transaction.
func writerSQL() []string {
	return []string{insertBatchSQL, overlapSQL, batchBlobSQL, rollupSQL, addSpendSQL, "BEGIN IMMEDIATE", "COMMIT", "ROLLBACK"}
}

// prepare readies w on dc: the writer pool keeps one connection for the
// store's life, so this happens once, unless database/sql had to
// replace a broken one (whose statements died with it).
func (w *recordWriter) prepare(dc driver.Conn) error {
	if w.on == dc {
		return nil
	}
	w.on, w.stmts = nil, w.stmts[:0]
	pc, ok := dc.(driver.ConnPrepareContext)
	if !ok {
		return fmt.Errorf("driver connection %T cannot prepare with a context", dc)
	}
	for _, q := range writerSQL() {
		st, err := pc.PrepareContext(context.Background(), q)
		if err != nil {
			w.closeStmts()
			return err
		}
		if _, ok := st.(driver.StmtExecContext); !ok {
			st.Close()
			w.closeStmts()
			return fmt.Errorf("driver statement %T cannot execute with a context", st)
		}
		w.stmts = append(w.stmts, st)
	}
	if w.args == nil {
		w.args = make([]driver.NamedValue, 16)
		for i := range w.args {
			w.args[i].Ordinal = i + 1
		}
	}
	w.on = dc
	return nil
}

func (w *recordWriter) closeStmts() error {
	var errs []error
	for _, st := range w.stmts {
		errs = append(errs, st.Close())
	}
	w.stmts = w.stmts[:0]
	return errors.Join(errs...)
}

// exec runs stmts[k] with args, after checking that ctx has not ended.
func (w *recordWriter) exec(ctx context.Context, k int, args []driver.NamedValue) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	res, err := w.stmts[k].(driver.StmtExecContext).ExecContext(context.Background(), args)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// WriteRecords implements account.RecordStore: one transaction per
// batch on the writer connection, the batch's records encoded into one
// row of record_batches, and its sums added to the hourly rollup, one
// upsert per hour and combination. A request id already stored, or
// twice in rs, is skipped, and only the records stored reach the
// rollup: the id hashes of the stored batches whose time range meets
// the batch's are compared with the batch's, and a batch with a
// matching hash is decoded to compare the ids themselves.
func (s *Store) WriteRecords(ctx context.Context, rs []account.Record) error {
	return s.writeRecords(ctx, rs, true)
}

// WriteFreshRecords implements account.FreshRecordStore: WriteRecords
// without looking for rs's request ids among the stored records, which
// the sink vouches hold none of them (a batch taken from its queue, never
// handed to a store before). Duplicates within rs are still skipped.
// The check is what a long request makes dear: a record's time is when
// its request arrived, so a batch holding the record of a ten-minute
// stream meets every batch written in those ten minutes.
func (s *Store) WriteFreshRecords(ctx context.Context, rs []account.Record) error {
	return s.writeRecords(ctx, rs, false)
}

func (s *Store) writeRecords(ctx context.Context, rs []account.Record, checkStored bool) error {
	if len(rs) == 0 {
		return nil
	}
	err := s.writerTx(ctx, func(w *recordWriter) error { return w.writeBatch(ctx, rs, checkStored) })
	if err != nil {
		return fmt.Errorf("sqlite: write usage records: %w", err)
	}
	return nil
}

// writerTx runs fn in one transaction of w's statements on the writer
// connection, its statements prepared there first if they are not yet.
func (s *Store) writerTx(ctx context.Context, fn func(w *recordWriter) error) error {
	conn, err := s.w.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	return conn.Raw(func(dc any) error {
		s.insertMu.Lock()
		defer s.insertMu.Unlock()
		w := &s.records
		if err := w.prepare(dc.(driver.Conn)); err != nil {
			return err
		}
		return w.tx(ctx, func() error { return fn(w) })
	})
}

// tx runs fn in a transaction begun and ended by w's own prepared
// statements. The driver's BeginTx and Commit parse "begin immediate"
// and "commit" afresh each time, and with the sink's batches as small as
// they are at a modest request rate (a few records a tick), parsing the
// two cost a record about as much as binding its 29 values
// (BENCHMARKS.md). A batch that fails, or whose COMMIT fails (it can
// leave the transaction open, SQLITE_BUSY for one), is rolled back, so
// the connection always comes back outside a transaction.
func (w *recordWriter) tx(ctx context.Context, fn func() error) error {
	if _, err := w.exec(ctx, stmtBegin, nil); err != nil {
		return err
	}
	err := fn()
	if err == nil {
		_, err = w.exec(context.Background(), stmtCommit, nil)
	}
	if err != nil {
		// Its own error says only that no transaction was open.
		w.exec(context.Background(), stmtRollback, nil)
	}
	return err
}

// closeRecordWriter finalizes the record statements on the writer
// connection, before the pool closes it.
// The connection first, then insertMu, as WriteRecords takes them.
func (s *Store) closeRecordWriter() error {
	conn, err := s.w.Conn(context.Background())
	if err != nil {
		return err
	}
	defer conn.Close()
	return conn.Raw(func(dc any) error {
		s.insertMu.Lock()
		defer s.insertMu.Unlock()
		if s.records.on == nil || dc != s.records.on {
			return nil // nothing prepared, or on a connection the pool has closed
		}
		s.records.on = nil
		return s.records.closeStmts()
	})
}

// writeBatch stores the records of rs not stored yet (with
// checkStored; otherwise those not repeated within rs) in as many rows
// as maxBatchBytes asks, and adds them to the rollup.
func (w *recordWriter) writeBatch(ctx context.Context, rs []account.Record, checkStored bool) error {
	skip, err := w.duplicates(ctx, rs, checkStored)
	if err != nil {
		return err
	}
	e := &w.enc
	e.reset()
	for i := range rs {
		if skip != nil && skip[i] {
			continue
		}
		e.addHashed(&rs[i], w.hashes[i])
		if len(e.buf) >= maxBatchBytes {
			if err := w.insertEncoded(ctx); err != nil {
				return err
			}
			e.reset()
		}
	}
	if e.n > 0 {
		if err := w.insertEncoded(ctx); err != nil {
			return err
		}
	}
	var stored []bool
	if skip != nil {
		stored = make([]bool, len(rs))
		for i := range skip {
			stored[i] = !skip[i]
		}
	}
	return w.addRollup(ctx, rs, stored)
}

// insertEncoded stores the encoder's batch as one row.
func (w *recordWriter) insertEncoded(ctx context.Context) error {
	e := &w.enc
	w.sum = e.sum.appendTo(w.sum)
	args := w.args[:6]
	for i, v := range [...]any{e.minT, e.maxT, int64(e.n), w.sum, e.ids, e.blob()} {
		args[i].Value = v
	}
	_, err := w.exec(ctx, stmtInsertBatch, args)
	return err
}

// duplicates marks the records of rs to skip: the second and later of
// one request id in rs, and with checkStored those whose id is stored.
// nil when there are none, which is nearly always.
func (w *recordWriter) duplicates(ctx context.Context, rs []account.Record, checkStored bool) ([]bool, error) {
	if !checkStored {
		return w.repeatedIDs(rs), nil
	}
	w.order, w.hashes = w.order[:0], w.hashes[:0]
	lo, hi := int64(math.MaxInt64), int64(math.MinInt64)
	for i := range rs {
		h := idHash(rs[i].RequestID)
		w.hashes = append(w.hashes, h) // the encoder's too
		w.order = append(w.order, uint64(h)<<32|uint64(i))
		at := unixMicros(rs[i].Time)
		lo, hi = min(lo, at), max(hi, at)
	}
	slices.Sort(w.order)
	var skip []bool
	mark := func(i int) {
		if skip == nil {
			skip = make([]bool, len(rs))
		}
		skip[i] = true
	}
	// Equal ids have equal hashes, so they sit side by side, the first
	// written (lowest index) first.
	for a := 0; a < len(w.order); {
		b := a + 1
		for b < len(w.order) && w.order[b]>>32 == w.order[a]>>32 {
			b++
		}
		for j := a + 1; j < b; j++ {
			for k := a; k < j; k++ {
				if rs[w.order[j]&math.MaxUint32].RequestID == rs[w.order[k]&math.MaxUint32].RequestID {
					mark(int(w.order[j] & math.MaxUint32))
					break
				}
			}
		}
		a = b
	}
	if !checkStored {
		return skip, nil
	}
	suspects, err := w.suspectBatches(ctx, lo, hi)
	if err != nil {
		return nil, err
	}
	for _, id := range suspects {
		stored, err := w.batchIDs(ctx, id)
		if err != nil {
			return nil, err
		}
		for i := range rs {
			if _, ok := stored[rs[i].RequestID]; ok {
				mark(i)
			}
		}
	}
	return skip, nil
}

// repeatedIDs is duplicates without the look among stored records (a
// fresh batch): it marks the second and later of equal ids in rs, and
// fills w.hashes. The ids' hashes go into an open-addressed table of at
// least twice len(rs) slots, cleared per batch, where duplicates sorts
// them: a record costs an insert, a few instructions, where the sort
// cost it a hundred or so (BENCHMARKS.md, "recordcut3"); the sorted
// order is needed only to look the batch's hashes up among stored
// batches' (suspectBatches).
func (w *recordWriter) repeatedIDs(rs []account.Record) []bool {
	if len(rs) == 0 {
		w.hashes = w.hashes[:0]
		return nil
	}
	size := 1 << bits.Len(uint(2*len(rs)-1)) // a power of two, ≥ 2·len(rs)
	w.slots = slices.Grow(w.slots[:0], size)[:size]
	clear(w.slots)
	w.hashes = w.hashes[:0]
	mask := uint32(size - 1)
	var skip []bool
	for i := range rs {
		h := idHash(rs[i].RequestID)
		w.hashes = append(w.hashes, h)
		for at := h & mask; ; at = (at + 1) & mask {
			j := w.slots[at]
			if j == 0 {
				w.slots[at] = int32(i + 1)
				break
			}
			if w.hashes[j-1] == h && rs[j-1].RequestID == rs[i].RequestID {
				if skip == nil {
					skip = make([]bool, len(rs))
				}
				skip[i] = true // the first of its id is in the table
				break
			}
		}
	}
	return skip
}

// suspectBatches lists the stored batches in [lo, hi] holding an id
// hash of w.order's.
func (w *recordWriter) suspectBatches(ctx context.Context, lo, hi int64) ([]int64, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	args := w.args[:2]
	args[0].Value, args[1].Value = lo, hi
	rows, err := w.stmts[stmtOverlap].(driver.StmtQueryContext).QueryContext(context.Background(), args)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []int64
	dest := make([]driver.Value, 2)
	for {
		if err := rows.Next(dest); err == io.EOF {
			return out, nil
		} else if err != nil {
			return nil, err
		}
		id, _ := dest[0].(int64)
		ids, _ := dest[1].([]byte)
		for k := 0; k+4 <= len(ids); k += 4 {
			h := uint64(binary.LittleEndian.Uint32(ids[k:]))
			at, _ := slices.BinarySearch(w.order, h<<32)
			if at < len(w.order) && w.order[at]>>32 == h {
				out = append(out, id)
				break
			}
		}
	}
}

// batchIDs decodes stored batch id and returns the set of its request
// ids.
func (w *recordWriter) batchIDs(ctx context.Context, id int64) (map[string]struct{}, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	args := w.args[:1]
	args[0].Value = id
	rows, err := w.stmts[stmtBatchBlob].(driver.StmtQueryContext).QueryContext(context.Background(), args)
	if err != nil {
		return nil, err
	}
	dest := make([]driver.Value, 1)
	err = rows.Next(dest)
	rows.Close()
	if err != nil {
		return nil, fmt.Errorf("batch %d: %w", id, err)
	}
	blob, _ := dest[0].([]byte)
	rs, err := decodeBatch(string(blob))
	if err != nil {
		return nil, fmt.Errorf("batch %d: %w", id, err)
	}
	out := make(map[string]struct{}, len(rs))
	for i := range rs {
		out[rs[i].RequestID] = struct{}{}
	}
	return out, nil
}

// addRollup adds the records of rs (those marked in inserted, when it is
// not nil) to the hourly rollup, latency histograms included, one upsert
// per hour and combination, in account.Rollup's order.
func (w *recordWriter) addRollup(ctx context.Context, rs []account.Record, inserted []bool) error {
	var buf []byte
	args := w.args[:15]
	rows := account.Rollup(rs, inserted)
	for i := range rows {
		h := &rows[i]
		buf = h.Latency.AppendJSON(buf[:0])
		latency := string(buf)
		buf = h.TTFT.AppendJSON(buf[:0])
		for i, v := range [...]any{h.Hour, h.KeyID, h.Project, h.Model, h.Provider, h.ProjectID, h.Requests, h.Errors,
			h.Prompt, h.Completion, h.Cached, h.Cost, h.Hits, latency, string(buf)} {
			args[i].Value = v
		}
		if _, err := w.exec(ctx, stmtRollup, args); err != nil {
			return err
		}
	}
	return nil
}

// PruneRecords implements account.RecordStore, in one transaction: a
// batch wholly before the cut is deleted when the limit allows all of
// it; otherwise it is decoded and written again without its oldest
// records before the cut, as many as the limit allows. Batches go in
// the order they were written, near enough oldest first.
func (s *Store) PruneRecords(ctx context.Context, before time.Time, limit int) (int, error) {
	cut := unixMicros(before)
	deleted := 0
	err := s.tx(ctx, func(tx *sql.Tx) error {
		var enc batchEncoder
		for deleted < limit {
			refs, err := oldBatches(ctx, tx, cut)
			if err != nil || len(refs) == 0 {
				return err
			}
			for _, ref := range refs {
				left := limit - deleted
				if left == 0 {
					return nil
				}
				if ref.maxT < cut && ref.n <= left {
					if _, err := tx.ExecContext(ctx, `DELETE FROM record_batches WHERE id = ?`, ref.id); err != nil {
						return err
					}
					deleted += ref.n
					continue
				}
				n, err := s.pruneBatch(ctx, tx, &enc, ref.id, cut, left)
				if err != nil {
					return err
				}
				deleted += n
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("sqlite: prune usage records: %w", err)
	}
	// The rollup's hours that lie wholly before the cut go too.
	hour := int64(time.Hour / time.Microsecond)
	if _, err := s.w.ExecContext(ctx, `DELETE FROM usage_hourly WHERE hour < ?`, cut-cut%hour); err != nil {
		return 0, fmt.Errorf("sqlite: prune usage rollup: %w", err)
	}
	return deleted, nil
}

// oldBatch is a batch row holding records before a cut.
type oldBatch struct {
	id, maxT int64
	n        int
}

// oldBatches lists a few batches holding records before cut, first
// written first. (No index by min_time: retention runs every few
// minutes, and the oldest batches are the first rows.)
func oldBatches(ctx context.Context, tx *sql.Tx, cut int64) ([]oldBatch, error) {
	rows, err := tx.QueryContext(ctx, `SELECT id, max_time, n FROM record_batches WHERE min_time < ? ORDER BY id LIMIT 16`, cut)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []oldBatch
	for rows.Next() {
		var b oldBatch
		if err := rows.Scan(&b.id, &b.maxT, &b.n); err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, rows.Err()
}

// pruneBatch deletes up to limit of batch id's records older than cut,
// oldest first, by writing the batch again without them (or deleting
// it when none is left), and reports how many it deleted.
func (s *Store) pruneBatch(ctx context.Context, tx *sql.Tx, enc *batchEncoder, id, cut int64, limit int) (int, error) {
	var blob []byte
	if err := tx.QueryRowContext(ctx, batchBlobSQL, id).Scan(&blob); err != nil {
		return 0, err
	}
	rs, err := decodeBatch(string(blob))
	if err != nil {
		return 0, fmt.Errorf("batch %d: %w", id, err)
	}
	var old []int
	for i := range rs {
		if unixMicros(rs[i].Time) < cut {
			old = append(old, i)
		}
	}
	slices.SortStableFunc(old, func(a, b int) int { return rs[a].Time.Compare(rs[b].Time) })
	gone := make([]bool, len(rs))
	for _, i := range old[:min(len(old), limit)] {
		gone[i] = true
	}
	n := min(len(old), limit)
	if n == len(rs) {
		_, err := tx.ExecContext(ctx, `DELETE FROM record_batches WHERE id = ?`, id)
		return n, err
	}
	enc.reset()
	for i := range rs {
		if !gone[i] {
			enc.add(&rs[i])
		}
	}
	_, err = tx.ExecContext(ctx, `UPDATE record_batches SET min_time = ?, max_time = ?, n = ?, summary = ?, ids = ?,
		records = ? WHERE id = ?`, enc.minT, enc.maxT, enc.n, enc.sum.appendTo(nil), enc.ids, enc.blob(), id)
	return n, err
}

func unixMicros(t time.Time) int64 { return t.UnixMicro() }

var (
	_ account.RecordStore      = (*Store)(nil)
	_ account.FreshRecordStore = (*Store)(nil)
)
