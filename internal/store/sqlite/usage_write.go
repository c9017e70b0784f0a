package sqlite

import (
	"context"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"gatehouse/internal/account"
)

// usageCols are the columns of usage_records in the order WriteRecords
// binds them.
const usageCols = `request_id, time, endpoint, key_id, project_id, project, customer, model, served_model, provider,
	deployment, status, error_kind, prompt_tokens, completion_tokens, cached_tokens, reasoning_tokens, cost_micros,
	usage_source, latency_ms, ttft_ms, overhead_ms, cache, attempts, stream, labels, request_body, response_body,
	saved_micros`

// insertSizes are the record counts of the INSERT statements a batch is
// cut into, largest first: a multi-row INSERT spends far less per
// record than one statement per record, and a few fixed sizes, prepared
// once, spare the parser (a 64-row statement costs more to prepare than
// to run; see BENCHMARKS.md).
var insertSizes = [...]int{64, 16, 4, 1}

// usageColCount is the number of columns in usageCols.
const usageColCount = 29

// insertSQL returns the INSERT of n records. A record whose request id
// is stored already is skipped by OR IGNORE, not by ON CONFLICT
// (request_id) DO NOTHING: with the upsert clause the other constraints
// (the NOT NULL columns) still abort, and a statement that writes
// several rows and may abort makes SQLite copy every page it first
// touches to a statement journal, a temporary file, so that it can undo
// just that statement; that copy cost a third of what a record costs
// (BENCHMARKS.md). No NOT NULL column is ever bound to NULL here, so
// IGNORE skips nothing but the stored request ids, and WriteRecords
// notices any row skipped by its count anyway.
func insertSQL(n int) string {
	var b strings.Builder
	b.WriteString("INSERT OR IGNORE INTO usage_records (" + usageCols + ") VALUES ")
	row := "(" + strings.Repeat("?,", usageColCount-1) + "?)"
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(row)
	}
	return b.String()
}

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

// recordWriter holds the statements WriteRecords runs, prepared by the
// driver itself on the writer connection, and the argument slice it
// binds them with. Records go to the driver directly (sql.Conn.Raw),
// not through database/sql: per statement that spares a copy and a
// type check of every argument, and, as the driver calls get a context
// that never ends, the watcher goroutine and progress callback the
// driver sets up to interrupt SQLite when a context can end. The
// batch's deadline is checked before each statement instead, and a
// statement waits for a lock at most busyTimeout, as every other one.
type recordWriter struct {
	on    driver.Conn   // the connection stmts are prepared on; nil before the first write
	stmts []driver.Stmt // the INSERTs by insertSizes, then stmtRollup, stmtBegin, stmtCommit, stmtRollback
	args  []driver.NamedValue
}

// The indexes in recordWriter.stmts of the statements after the INSERTs.
const (
	stmtRollup = len(insertSizes) + iota
	stmtBegin
	stmtCommit
	stmtRollback
)

// txSQL are the statements that begin and end a batch's transaction, in
// the order of stmtBegin, stmtCommit and stmtRollback. BEGIN IMMEDIATE,
// as the writer's DSN asks of every other transaction.
func txSQL() []string { return []string{"BEGIN IMMEDIATE", "COMMIT", "ROLLBACK"} }

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
	for _, q := range append(append(insertQueries(), rollupSQL), txSQL()...) {
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
		w.args = make([]driver.NamedValue, insertSizes[0]*usageColCount)
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

func insertQueries() []string {
	qs := make([]string, len(insertSizes))
	for i, n := range insertSizes {
		qs[i] = insertSQL(n)
	}
	return qs
}

// errReplayed says a batch held a record already stored: the batch is
// written again one record at a time, so the rollup counts only the
// records really inserted.
var errReplayed = errors.New("batch holds stored records")

// WriteRecords implements account.RecordStore: one transaction per
// batch on the writer connection, cut into multi-row INSERTs, and the
// batch's sums added to the hourly rollup, one upsert per hour and
// combination (a trigger's upsert per record cost more than the record's
// own insert). A request id already stored is skipped; such a batch (a
// replay, which is rare) is written again a record at a time so that
// only the records inserted reach the rollup.
func (s *Store) WriteRecords(ctx context.Context, rs []account.Record) error {
	if len(rs) == 0 {
		return nil
	}
	conn, err := s.w.Conn(ctx)
	if err != nil {
		return fmt.Errorf("sqlite: write usage records: %w", err)
	}
	defer conn.Close()
	err = conn.Raw(func(dc any) error {
		s.insertMu.Lock()
		defer s.insertMu.Unlock()
		w := &s.records
		if err := w.prepare(dc.(driver.Conn)); err != nil {
			return err
		}
		err := w.tx(ctx, func() error { return w.writeBatch(ctx, rs) })
		if errors.Is(err, errReplayed) {
			err = w.tx(ctx, func() error { return w.writeOneByOne(ctx, rs) })
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("sqlite: write usage records: %w", err)
	}
	return nil
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

// writeBatch inserts rs with the multi-row INSERTs and adds them all to
// the rollup; errReplayed when any was already stored.
func (w *recordWriter) writeBatch(ctx context.Context, rs []account.Record) error {
	for rest := rs; len(rest) > 0; {
		k := 0
		for insertSizes[k] > len(rest) {
			k++
		}
		n := insertSizes[k]
		args := w.args[:n*usageColCount]
		for i := range rest[:n] {
			if err := setRecordArgs(args[i*usageColCount:(i+1)*usageColCount], &rest[i]); err != nil {
				return err
			}
		}
		added, err := w.exec(ctx, k, args)
		if err != nil {
			return err
		}
		if added != int64(n) {
			return errReplayed
		}
		rest = rest[n:]
	}
	return w.addRollup(ctx, rs, nil)
}

// writeOneByOne inserts rs a record at a time and adds to the rollup
// only those inserted.
func (w *recordWriter) writeOneByOne(ctx context.Context, rs []account.Record) error {
	inserted := make([]bool, len(rs))
	args := w.args[:usageColCount]
	for i := range rs {
		if err := setRecordArgs(args, &rs[i]); err != nil {
			return err
		}
		added, err := w.exec(ctx, len(insertSizes)-1, args)
		if err != nil {
			return err
		}
		inserted[i] = added == 1
	}
	return w.addRollup(ctx, rs, inserted)
}

// hourCombo is a row of usage_hourly's key.
type hourCombo struct {
	hour                            int64
	keyID, project, model, provider string
}

// hourSums are what a batch adds to one row of usage_hourly.
type hourSums struct {
	projectID                                                string
	requests, errors, prompt, completion, cached, cost, hits int64
	latency, ttft                                            account.Histogram
}

// addRollup adds the records of rs (those marked in inserted, when it is
// not nil) to the hourly rollup, latency histograms included, one upsert
// per hour and combination. The combinations go in first-seen order, so
// replicas' batches touch rows in the same order and a run is
// reproducible.
func (w *recordWriter) addRollup(ctx context.Context, rs []account.Record, inserted []bool) error {
	const hour = int64(time.Hour / time.Microsecond)
	sums := make(map[hourCombo]*hourSums, 4)
	var order []hourCombo
	for i := range rs {
		if inserted != nil && !inserted[i] {
			continue
		}
		r := &rs[i]
		t := unixMicros(r.Time)
		c := hourCombo{t - t%hour, r.KeyID, r.Project, r.Model, r.Provider}
		h := sums[c]
		if h == nil {
			h = &hourSums{}
			sums[c] = h
			order = append(order, c)
		}
		h.projectID = max(h.projectID, r.ProjectID)
		h.requests++
		if r.Status >= 400 {
			h.errors++
		}
		h.prompt += int64(r.PromptTokens)
		h.completion += int64(r.CompletionTokens)
		h.cached += int64(r.CachedTokens)
		h.cost += int64(r.Cost)
		if r.Cache == "hit" || r.Cache == "semantic" {
			h.hits++
		}
		h.latency.Add(r.LatencyMS)
		if r.Stream && r.TTFTMS > 0 {
			h.ttft.Add(r.TTFTMS)
		}
	}
	var buf []byte
	args := w.args[:15]
	for _, c := range order {
		h := sums[c]
		buf = h.latency.AppendJSON(buf[:0])
		latency := string(buf)
		buf = h.ttft.AppendJSON(buf[:0])
		for i, v := range [...]any{c.hour, c.keyID, c.project, c.model, c.provider, h.projectID, h.requests, h.errors,
			h.prompt, h.completion, h.cached, h.cost, h.hits, latency, string(buf)} {
			args[i].Value = v
		}
		if _, err := w.exec(ctx, stmtRollup, args); err != nil {
			return err
		}
	}
	return nil
}

// setRecordArgs sets args (usageColCount of them) to r's column values
// in usageCols order, each already of a type the driver binds as it is
// (int64, float64, bool, string, nil).
func setRecordArgs(args []driver.NamedValue, r *account.Record) error {
	labels, err := labelsJSON(r.Labels)
	if err != nil {
		return err
	}
	for i, v := range [usageColCount]any{r.RequestID, unixMicros(r.Time), r.Endpoint, r.KeyID, r.ProjectID, r.Project,
		r.Customer, r.Model, r.ServedModel, r.Provider, r.Deployment, int64(r.Status), r.ErrorKind,
		int64(r.PromptTokens), int64(r.CompletionTokens), int64(r.CachedTokens), int64(r.ReasoningTokens),
		int64(r.Cost), r.UsageSource, r.LatencyMS, r.TTFTMS, r.OverheadMS, r.Cache, int64(r.Attempts), r.Stream,
		labels, nullText(r.RequestBody), nullText(r.ResponseBody), int64(r.Saved)} {
		args[i].Value = v
	}
	return nil
}

// PruneRecords implements account.RecordStore.
func (s *Store) PruneRecords(ctx context.Context, before time.Time, limit int) (int, error) {
	res, err := s.w.ExecContext(ctx, `DELETE FROM usage_records WHERE rowid IN
		(SELECT rowid FROM usage_records WHERE time < ? ORDER BY time LIMIT ?)`, unixMicros(before), limit)
	if err != nil {
		return 0, fmt.Errorf("sqlite: prune usage records: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, err
	}
	// The rollup's hours that lie wholly before the cut go too.
	hour := int64(time.Hour / time.Microsecond)
	if _, err := s.w.ExecContext(ctx, `DELETE FROM usage_hourly WHERE hour < ?`, unixMicros(before)-unixMicros(before)%hour); err != nil {
		return 0, fmt.Errorf("sqlite: prune usage rollup: %w", err)
	}
	return int(n), nil
}

func unixMicros(t time.Time) int64 { return t.UnixMicro() }

func labelsJSON(m map[string]string) (string, error) {
	if len(m) == 0 {
		return "{}", nil
	}
	b, err := json.Marshal(m)
	return string(b), err
}

func nullText(s string) any {
	if s == "" {
		return nil
	}
	return s
}

var _ account.RecordStore = (*Store)(nil)
