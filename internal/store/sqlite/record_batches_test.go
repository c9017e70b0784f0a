package sqlite

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"gatehouse/internal/account"
)

// openBatches opens a store in a fresh file, closed when t ends.
func openBatches(t *testing.T) *Store {
	t.Helper()
	s, _ := openTemp(t)
	t.Cleanup(func() { s.Close() })
	return s
}

// varied makes n records from rng: a few keys, projects, models,
// providers, customers, statuses and cache outcomes, times spread over
// two hours around at, out of order as requests of different lengths
// finish.
func varied(rng *rand.Rand, at time.Time, n int, prefix string) []account.Record {
	rs := make([]account.Record, n)
	for i := range rs {
		k := rng.IntN(6)
		rs[i] = account.Record{RequestID: fmt.Sprintf("%s-%d", prefix, i),
			Time:  at.Add(time.Duration(rng.Int64N(int64(2*time.Hour))) / time.Microsecond * time.Microsecond),
			KeyID: fmt.Sprintf("key_%d", k), ProjectID: fmt.Sprintf("proj_%d", k%3), Project: fmt.Sprintf("p%d", k%3),
			Model: []string{"chat", "mini", "claude"}[rng.IntN(3)], Provider: []string{"openai", "anthropic"}[rng.IntN(2)],
			Status: []int{200, 200, 200, 429, 502}[rng.IntN(5)], Cache: []string{"hit", "miss", "bypass"}[rng.IntN(3)],
			Endpoint: "/v1/chat/completions", PromptTokens: rng.IntN(500), CompletionTokens: rng.IntN(900),
			CachedTokens: rng.IntN(50), Cost: account.Micros(rng.IntN(10000)), LatencyMS: rng.Float64() * 3000,
			Stream: rng.IntN(2) == 0, TTFTMS: rng.Float64() * 300, Attempts: 1 + rng.IntN(2)}
		if rng.IntN(4) == 0 {
			rs[i].Customer = fmt.Sprintf("cus-%d", rng.IntN(3))
		}
		if rng.IntN(5) == 0 {
			rs[i].Labels = map[string]string{"team": "blue", "env": fmt.Sprint(rng.IntN(3))}
		}
	}
	return rs
}

// writeInBatches writes rs in batches of random sizes, some through
// WriteFreshRecords as the sink writes them, and returns how many
// batches it wrote.
func writeInBatches(t *testing.T, s *Store, rng *rand.Rand, rs []account.Record) int {
	t.Helper()
	ctx := context.Background()
	n := 0
	for len(rs) > 0 {
		k := min(len(rs), 1+rng.IntN(40))
		write := s.WriteRecords
		if n%2 == 0 {
			write = s.WriteFreshRecords
		}
		if err := write(ctx, rs[:k]); err != nil {
			t.Fatal(err)
		}
		rs, n = rs[k:], n+1
	}
	return n
}

// scanMatches is what a store without batches would answer: the records
// of rs f matches, newest first by (time, request id).
func scanMatches(rs []account.Record, f account.Filter) []account.Record {
	from, to := window(f)
	var out []account.Record
	for i := range rs {
		if matches(&rs[i], &f, from, to) {
			out = append(out, rs[i])
		}
	}
	slices.SortFunc(out, func(a, b account.Record) int {
		if c := b.Time.Compare(a.Time); c != 0 {
			return c
		}
		return strings.Compare(b.RequestID, a.RequestID)
	})
	return out
}

// TestRecordBatchesAgainstScan holds the readers over many batches whose
// time ranges overlap to what a scan of every record answers: every log
// page under each filter, each record by id, the usage sums.
func TestRecordBatchesAgainstScan(t *testing.T) {
	ctx := context.Background()
	s := openBatches(t)
	rng := rand.New(rand.NewPCG(1, 2))
	at := time.Date(2026, 4, 1, 9, 0, 0, 0, time.UTC)
	rs := varied(rng, at, 700, "gh-scan")
	writeInBatches(t, s, rng, rs)

	filters := []account.Filter{
		{},
		{Key: "key_2"},
		{Project: "p1"},
		{Project: "proj_2"},
		{Customer: "cus-1"},
		{Model: "claude", Provider: "openai"},
		{Status: 429},
		{Cache: "hit", Key: "key_0"},
		{From: at.Add(17 * time.Minute), To: at.Add(75 * time.Minute)},
		{From: at.Add(30 * time.Minute), Model: "mini"},
		{To: at.Add(40 * time.Minute), Status: 502},
		{Key: "key_none"},
	}
	for _, f := range filters {
		want := scanMatches(rs, f)
		var got []account.Record
		q := account.LogQuery{Filter: f, Limit: 23}
		for pages := 0; ; pages++ {
			if pages > len(rs) {
				t.Fatalf("%+v: the pages never end", f)
			}
			page, err := s.Logs(ctx, q)
			if err != nil {
				t.Fatalf("%+v: %v", f, err)
			}
			got = append(got, page.Records...)
			if page.Next == "" {
				break
			}
			q.Cursor = page.Next
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("logs %+v (-scan +pages):\n%s", f, diff)
		}

		for _, g := range []account.GroupBy{account.GroupNone, account.GroupKey, account.GroupCustomer} {
			for _, iv := range []account.Interval{account.IntervalNone, account.IntervalMinute, account.IntervalHour} {
				uq := account.UsageQuery{Filter: f, GroupBy: g, Interval: iv}
				gotRows, err := s.usageRecords(ctx, uq)
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(scanUsage(want, uq), gotRows, sameHistogram); diff != "" {
					t.Errorf("usage %+v (-scan +batches):\n%s", uq, diff)
				}
			}
		}
	}
	for _, r := range rs {
		got, err := s.Record(ctx, r.RequestID)
		if err != nil {
			t.Fatalf("record %s: %v", r.RequestID, err)
		}
		if diff := cmp.Diff(r, got); diff != "" {
			t.Fatalf("record %s (-written +read):\n%s", r.RequestID, diff)
		}
	}
	if _, err := s.Record(ctx, "gh-none"); !errors.Is(err, account.ErrNotFound) {
		t.Fatalf("a missing record: %v, want ErrNotFound", err)
	}
}

// sameHistogram compares histograms by their counts.
var sameHistogram = cmp.Comparer(func(a, b account.Histogram) bool {
	return string(a.AppendJSON(nil)) == string(b.AppendJSON(nil))
})

// scanUsage adds rs up as the usage API answers q from records.
func scanUsage(rs []account.Record, q account.UsageQuery) []account.UsageRow {
	var sums account.UsageSums
	for _, r := range rs {
		u := account.UsageRow{Group: groupValue(&r, q.GroupBy), Requests: 1, PromptTokens: int64(r.PromptTokens),
			CompletionTokens: int64(r.CompletionTokens), CachedTokens: int64(r.CachedTokens), Cost: r.Cost}
		if w := bucketMicros[q.Interval]; w > 0 {
			u.Bucket = r.Time.Truncate(time.Duration(w) * time.Microsecond)
		}
		if r.Status >= 400 {
			u.Errors = 1
		}
		if r.Cache == "hit" || r.Cache == "semantic" {
			u.CacheHits = 1
		}
		u.Latency.Add(r.LatencyMS)
		if r.Stream && r.TTFTMS > 0 {
			u.TTFT.Add(r.TTFTMS)
		}
		sums.Add(&u)
	}
	return sums.Rows()
}

// TestRecordBatchSkipping holds the readers to passing by, undecoded,
// the batches whose summary or time range shows they hold no match.
func TestRecordBatchSkipping(t *testing.T) {
	ctx := context.Background()
	s := openBatches(t)
	at := time.Date(2026, 4, 1, 9, 0, 0, 0, time.UTC)
	// Ten batches, each from one key and an hour of its own.
	const batches = 10
	for b := range batches {
		var rs []account.Record
		for i := range 20 {
			rs = append(rs, account.Record{RequestID: fmt.Sprintf("gh-skip-%d-%d", b, i),
				Time: at.Add(time.Duration(b)*time.Hour + time.Duration(i)*time.Minute), KeyID: fmt.Sprintf("key_%d", b),
				Project: "p", ProjectID: "proj_p", Model: "m", Provider: "openai", Status: 200, Cache: "miss"})
		}
		if err := s.WriteFreshRecords(ctx, rs); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		name    string
		read    func() (int, error) // returns the records it found
		found   int
		decoded int64
	}{
		{"logs of a key no batch has", func() (int, error) {
			p, err := s.Logs(ctx, account.LogQuery{Filter: account.Filter{Key: "key_x"}, Limit: 50})
			return len(p.Records), err
		}, 0, 0},
		{"logs of a model, a status, a customer, a cache outcome, a project no batch has", func() (int, error) {
			n := 0
			for _, f := range []account.Filter{{Model: "x"}, {Status: 500}, {Customer: "c"}, {Cache: "hit"}, {Project: "q"}} {
				p, err := s.Logs(ctx, account.LogQuery{Filter: f, Limit: 50})
				if err != nil {
					return 0, err
				}
				n += len(p.Records)
			}
			return n, nil
		}, 0, 0},
		{"logs of one key", func() (int, error) {
			p, err := s.Logs(ctx, account.LogQuery{Filter: account.Filter{Key: "key_3"}, Limit: 50})
			return len(p.Records), err
		}, 20, 1},
		{"logs of a project by its id", func() (int, error) {
			p, err := s.Logs(ctx, account.LogQuery{Filter: account.Filter{Project: "proj_p"}, Limit: 10})
			return len(p.Records), err
		}, 10, 1}, // the newest batch fills the page, and the next ends before its last record
		{"usage of a window of two batches' hours", func() (int, error) {
			rows, err := s.usageRecords(ctx, account.UsageQuery{Filter: account.Filter{From: at.Add(4 * time.Hour),
				To: at.Add(6 * time.Hour)}})
			if err != nil || len(rows) == 0 {
				return 0, err
			}
			return int(rows[0].Requests), nil
		}, 40, 2},
		{"usage of a customer no batch has", func() (int, error) {
			rows, err := s.Usage(ctx, account.UsageQuery{Filter: account.Filter{Customer: "cus"}})
			return len(rows), err
		}, 0, 0},
		{"a record by id", func() (int, error) {
			_, err := s.Record(ctx, "gh-skip-7-3")
			return 1, err
		}, 1, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := s.decoded.Load()
			found, err := c.read()
			if err != nil {
				t.Fatal(err)
			}
			if found != c.found {
				t.Errorf("found %d records, want %d", found, c.found)
			}
			if got := s.decoded.Load() - before; got != c.decoded {
				t.Errorf("decoded %d batches of %d, want %d", got, batches, c.decoded)
			}
		})
	}
}

// TestCorruptRecordBatch: a batch whose blob is damaged fails the reads
// that decode it with an error naming the batch, never a panic, and the
// reads that pass it by still work.
func TestCorruptRecordBatch(t *testing.T) {
	ctx := context.Background()
	s := openBatches(t)
	at := time.Date(2026, 4, 1, 9, 0, 0, 0, time.UTC)
	rng := rand.New(rand.NewPCG(3, 4))
	good := varied(rng, at.Add(10*time.Hour), 30, "gh-good")
	for i := range good {
		good[i].KeyID = "key_good"
	}
	bad := varied(rng, at, 30, "gh-bad")
	for i := range bad {
		bad[i].KeyID = "key_bad"
	}
	for _, rs := range [][]account.Record{good, bad} {
		if err := s.WriteFreshRecords(ctx, rs); err != nil {
			t.Fatal(err)
		}
	}
	for _, damage := range []string{
		`substr(records, 1, length(records) - 7)`, // cut short
		`records || x'00'`,                        // a byte too many
		`x'02' || substr(records, 2)`,             // an unknown version
		`substr(records, 1, 5) || x'ffffffffffffffffffff' || substr(records, 16)`, // a varint too long
		`x'01ffffff7f'`, // a count no blob this short holds
	} {
		if _, err := s.w.ExecContext(ctx, `UPDATE record_batches SET records = `+damage+` WHERE id =
			(SELECT max(id) FROM record_batches)`); err != nil {
			t.Fatal(err)
		}
		check := func(what string, err error) {
			t.Helper()
			if !errors.Is(err, errCorruptBatch) || !strings.Contains(err.Error(), "batch 2") {
				t.Errorf("%s over %s: %v, want the corrupt batch 2 named", what, damage, err)
			}
		}
		_, err := s.Logs(ctx, account.LogQuery{Filter: account.Filter{Key: "key_bad"}, Limit: 10})
		check("logs", err)
		_, err = s.Record(ctx, "gh-bad-3")
		check("record", err)
		_, err = s.Usage(ctx, account.UsageQuery{Filter: account.Filter{Customer: "cus-1"}})
		check("usage", err)
		_, err = s.PruneRecords(ctx, at.Add(time.Hour), 1)
		check("prune", err)
		if p, err := s.Logs(ctx, account.LogQuery{Filter: account.Filter{Key: "key_good"}, Limit: 100}); err != nil || len(p.Records) != 30 {
			t.Errorf("logs of the good batch over %s: %d records, %v", damage, len(p.Records), err)
		}
		// Put the batch back for the next damage.
		if _, err := s.w.ExecContext(ctx, `DELETE FROM record_batches WHERE id = 2`); err != nil {
			t.Fatal(err)
		}
		var e batchEncoder
		e.reset()
		for i := range bad {
			e.add(&bad[i])
		}
		if _, err := s.w.ExecContext(ctx, `INSERT INTO record_batches (id, min_time, max_time, n, summary, ids, records)
			VALUES (2, ?, ?, ?, ?, ?, ?)`, e.minT, e.maxT, e.n, e.sum.appendTo(nil), e.ids, e.blob()); err != nil {
			t.Fatal(err)
		}
	}
}

// TestWriteFreshRecords: the sink's path skips the repeats within a
// batch, and WriteRecords after it skips what it stored.
func TestWriteFreshRecords(t *testing.T) {
	ctx := context.Background()
	s := openBatches(t)
	at := time.Date(2026, 4, 1, 9, 0, 0, 0, time.UTC)
	rs := varied(rand.New(rand.NewPCG(5, 6)), at, 10, "gh-fresh")
	if err := s.WriteFreshRecords(ctx, append(slices.Clone(rs), rs[3], rs[7], rs[3])); err != nil {
		t.Fatal(err)
	}
	more := varied(rand.New(rand.NewPCG(7, 8)), at, 5, "gh-more")
	if err := s.WriteRecords(ctx, append(slices.Clone(more), rs[0], rs[9])); err != nil {
		t.Fatal(err)
	}
	p, err := s.Logs(ctx, account.LogQuery{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(scanMatches(append(rs, more...), account.Filter{}), p.Records); diff != "" {
		t.Fatalf("stored (-want +got):\n%s", diff)
	}
	var requests int64
	if err := s.r.QueryRowContext(ctx, `SELECT sum(requests) FROM usage_hourly`).Scan(&requests); err != nil {
		t.Fatal(err)
	}
	if requests != 15 {
		t.Fatalf("the rollup counts %d requests, want 15", requests)
	}
}

// TestPruneStraddlingBatch: retention takes the old records out of a
// batch that holds newer ones too, and leaves those readable.
func TestPruneStraddlingBatch(t *testing.T) {
	ctx := context.Background()
	s := openBatches(t)
	at := time.Date(2026, 4, 1, 9, 0, 0, 0, time.UTC)
	rs := varied(rand.New(rand.NewPCG(9, 10)), at, 50, "gh-prune")
	if err := s.WriteFreshRecords(ctx, rs); err != nil {
		t.Fatal(err)
	}
	cut := at.Add(time.Hour)
	old := len(rs) - len(scanMatches(rs, account.Filter{From: cut}))
	n, err := s.PruneRecords(ctx, cut, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if n != old {
		t.Fatalf("pruned %d, want the %d before the cut", n, old)
	}
	p, err := s.Logs(ctx, account.LogQuery{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(scanMatches(rs, account.Filter{From: cut}), p.Records); diff != "" {
		t.Fatalf("left (-want +got):\n%s", diff)
	}
}

// oldDatabaseWithRecords is a database a gatehouse before migration 0017
// left, with n varied records in usage_records (two with the fields added
// last set), and those records.
func oldDatabaseWithRecords(t *testing.T, n int) (string, []account.Record) {
	t.Helper()
	path, db, mustExec := oldDatabase(t, 16)
	at := time.Date(2026, 4, 1, 9, 0, 0, 0, time.UTC)
	rs := varied(rand.New(rand.NewPCG(11, 12)), at, n, "gh-old")
	rs[5].RequestBody, rs[5].ResponseBody = `{"model":"chat"}`, "data: [DONE]\n\n"
	rs[6].Saved, rs[6].ReasoningTokens, rs[6].UsageSource, rs[6].OverheadMS = 77, 3, "reported", 0.25
	db.SetMaxOpenConns(1) // one transaction: a commit per row would take minutes
	mustExec(`BEGIN`)
	for _, r := range rs {
		labels := "{}"
		if len(r.Labels) > 0 {
			labels = fmt.Sprintf(`{"env":%q,"team":%q}`, r.Labels["env"], r.Labels["team"])
		}
		var req, resp any
		if r.RequestBody != "" {
			req, resp = r.RequestBody, r.ResponseBody
		}
		mustExec(`INSERT INTO usage_records (`+oldRecordCols[:strings.Index(oldRecordCols, "coalesce")]+`request_body,
			response_body, saved_micros) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)`,
			r.RequestID, r.Time.UnixMicro(), r.Endpoint, r.KeyID, r.ProjectID, r.Project, r.Customer, r.Model,
			r.ServedModel, r.Provider, r.Deployment, r.Status, r.ErrorKind, r.PromptTokens, r.CompletionTokens,
			r.CachedTokens, r.ReasoningTokens, int64(r.Cost), r.UsageSource, r.LatencyMS, r.TTFTMS, r.OverheadMS,
			r.Cache, r.Attempts, r.Stream, labels, req, resp, int64(r.Saved))
	}
	mustExec(`COMMIT`)
	db.Close()
	return path, rs
}

// TestMoveRecordRows opens a database a gatehouse before migration 0017
// left, its records in usage_records (more than one move's chunk): every
// record is read back as written, once, and the old table is gone.
func TestMoveRecordRows(t *testing.T) {
	ctx := context.Background()
	path, rs := oldDatabaseWithRecords(t, 2345)
	for range 2 { // the second open finds nothing left to move
		s, err := Open(ctx, path)
		if err != nil {
			t.Fatal(err)
		}
		var got []account.Record
		q := account.LogQuery{Limit: 1000}
		for {
			p, err := s.Logs(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, p.Records...)
			if q.Cursor = p.Next; q.Cursor == "" {
				break
			}
		}
		if diff := cmp.Diff(scanMatches(rs, account.Filter{}), got); diff != "" {
			t.Fatalf("moved (-old rows +batches):\n%s", diff)
		}
		var batches, tables int
		if err := s.r.QueryRowContext(ctx, `SELECT (SELECT count(*) FROM record_batches), (SELECT count(*) FROM
			sqlite_master WHERE name IN ('usage_records', 'usage_records_moved'))`).Scan(&batches, &tables); err != nil {
			t.Fatal(err)
		}
		if batches != 3 || tables != 0 {
			t.Fatalf("%d batches and %d old tables, want 3 and 0", batches, tables)
		}
		s.Close()
	}
}

// TestMoveRecordRowsLogsProgress: a move says how many records it has to
// move, how far it is every so many records (here 1,000), and when it is
// done; the lines carry counts, never a record's content; a database with
// nothing left to move logs nothing.
func TestMoveRecordRowsLogsProgress(t *testing.T) {
	ctx := context.Background()
	path, _ := oldDatabaseWithRecords(t, 2345)
	type line struct {
		Msg                string
		Records, Moved, Of int
		Seconds            *float64
	}
	opens := [][]line{
		{
			{Msg: "moving usage records into batches: a one-time upgrade of this database, done before the gateway starts serving", Records: 2345},
			{Msg: "moving usage records into batches", Moved: 1000, Of: 2345},
			{Msg: "moving usage records into batches", Moved: 2000, Of: 2345},
			{Msg: "usage records moved into batches", Records: 2345},
		},
		nil, // the second open finds nothing left to move
	}
	for i, want := range opens {
		var out bytes.Buffer
		s, err := OpenWith(ctx, path, Options{Log: slog.New(slog.NewJSONHandler(&out, nil)), moveLogRows: 1000})
		if err != nil {
			t.Fatal(err)
		}
		s.Close()
		var got []line
		for _, l := range bytes.Split(bytes.TrimSpace(out.Bytes()), []byte("\n")) {
			if len(l) == 0 {
				continue
			}
			var g line
			if err := json.Unmarshal(l, &g); err != nil {
				t.Fatalf("open %d: log line %q: %v", i+1, l, err)
			}
			if g.Seconds != nil && *g.Seconds < 0 {
				t.Fatalf("open %d: %q took negative time", i+1, l)
			}
			g.Seconds = nil
			got = append(got, g)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("open %d: log lines (-want +got):\n%s\nlog:\n%s", i+1, diff, out.String())
		}
		// Request ids (all "gh-old-…") and rs[5]'s stored bodies.
		for _, content := range []string{"gh-old", "chat", "DONE"} {
			if strings.Contains(out.String(), content) {
				t.Fatalf("open %d: the log shows a record's content (%q):\n%s", i+1, content, out.String())
			}
		}
	}
}

// TestLargeBatchSplit: records with large bodies go into several rows,
// none much past maxBatchBytes, and read back whole.
func TestLargeBatchSplit(t *testing.T) {
	ctx := context.Background()
	s := openBatches(t)
	at := time.Date(2026, 4, 1, 9, 0, 0, 0, time.UTC)
	rs := varied(rand.New(rand.NewPCG(13, 14)), at, 12, "gh-large")
	for i := range rs {
		rs[i].RequestBody = strings.Repeat(fmt.Sprint(i%10), 300<<10)
	}
	if err := s.WriteFreshRecords(ctx, rs); err != nil {
		t.Fatal(err)
	}
	var rows int
	var largest int64
	if err := s.r.QueryRowContext(ctx, `SELECT count(*), max(length(records)) FROM record_batches`).Scan(&rows, &largest); err != nil {
		t.Fatal(err)
	}
	if rows < 3 || largest > maxBatchBytes+400<<10 {
		t.Fatalf("%d rows, the largest %d bytes: want 12 records of 300 KiB in rows of about %d", rows, largest, maxBatchBytes)
	}
	p, err := s.Logs(ctx, account.LogQuery{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(scanMatches(rs, account.Filter{}), p.Records); diff != "" {
		t.Fatalf("read back (-want +got):\n%s", diff)
	}
}

// TestRecordBatchBloom: a field with more distinct values in a batch
// than the summary lists is kept as a Bloom filter, which never loses a
// value and passes by batches without the one asked for.
func TestRecordBatchBloom(t *testing.T) {
	ctx := context.Background()
	s := openBatches(t)
	at := time.Date(2026, 4, 1, 9, 0, 0, 0, time.UTC)
	const batches, per = 10, 300
	for b := range batches {
		var rs []account.Record
		for i := range per {
			rs = append(rs, account.Record{RequestID: fmt.Sprintf("gh-bloom-%d-%d", b, i), Time: at.Add(time.Duration(b*per+i) * time.Second),
				KeyID: "key", Customer: fmt.Sprintf("cus-%d-%d", b, i), Status: 200})
		}
		if err := s.WriteFreshRecords(ctx, rs); err != nil {
			t.Fatal(err)
		}
	}
	var bloomed int
	if err := s.r.QueryRowContext(ctx, `SELECT count(*) FROM record_batches WHERE length(summary) > ?`, 10*per/8).Scan(&bloomed); err != nil {
		t.Fatal(err)
	}
	if bloomed != batches {
		t.Fatalf("%d summaries hold a filter of %d customers, want %d", bloomed, per, batches)
	}
	for b := range batches {
		for _, i := range []int{0, per / 2, per - 1} {
			before := s.decoded.Load()
			p, err := s.Logs(ctx, account.LogQuery{Filter: account.Filter{Customer: fmt.Sprintf("cus-%d-%d", b, i)}, Limit: 5})
			if err != nil {
				t.Fatal(err)
			}
			if len(p.Records) != 1 {
				t.Fatalf("customer cus-%d-%d: %d records, want 1", b, i, len(p.Records))
			}
			// Its own batch, and now and then another the filter takes for one.
			if got := s.decoded.Load() - before; got < 1 || got > 3 {
				t.Errorf("customer cus-%d-%d: %d batches decoded of %d", b, i, got, batches)
			}
		}
	}
	before := s.decoded.Load()
	for i := range 20 {
		if _, err := s.Logs(ctx, account.LogQuery{Filter: account.Filter{Customer: fmt.Sprintf("cus-none-%d", i)}, Limit: 5}); err != nil {
			t.Fatal(err)
		}
	}
	if got := s.decoded.Load() - before; got > 10 {
		t.Errorf("20 absent customers decoded %d batches of %d each, want about 1%%", got, batches)
	}
}
