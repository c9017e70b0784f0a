package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"gatehouse/internal/account"
	"gatehouse/internal/store"
	"gatehouse/internal/store/storetest"
)

// oldSchema makes a fresh schema as a gatehouse that knew the migrations
// up to version left it, for a test of the migrations after; mustExec
// runs statements on c. Close c before opening the schema with openTest.
func oldSchema(t *testing.T, version int) (dsn string, c *pgx.Conn, mustExec func(q string, args ...any)) {
	t.Helper()
	ctx := context.Background()
	dsn = testDSN(t)
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	ms, err := store.Migrations(migrationFiles, "migrations")
	if err != nil {
		t.Fatal(err)
	}
	mustExec = func(q string, args ...any) {
		t.Helper()
		if _, err := c.Exec(ctx, q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	mustExec(`CREATE TABLE schema_migrations (version integer PRIMARY KEY, name text NOT NULL,
		applied_at timestamptz NOT NULL DEFAULT now())`)
	for _, m := range ms {
		if m.Version > version {
			break
		}
		mustExec(m.SQL)
		mustExec(`INSERT INTO schema_migrations (version, name) VALUES ($1, $2)`, m.Version, m.Name)
	}
	return dsn, c, mustExec
}

// TestRollupBackfill opens a schema last written by a gatehouse that had
// usage records but no rollup (schema 4): migration 0005 must fill the
// rollup from the records already there, and records written afterwards,
// replayed or not, count once.
func TestRollupBackfill(t *testing.T) {
	ctx := context.Background()
	dsn, c, mustExec := oldSchema(t, 4)
	h := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	for _, r := range []struct {
		id     string
		min    int
		key    string
		status int
		prompt int
		cost   int64
		cache  string
	}{
		{"gh-old1", 5, "k1", 200, 10, 100, "miss"},
		{"gh-old2", 50, "k1", 429, 0, 0, ""},
		{"gh-old3", 70, "k2", 200, 7, 30, "hit"},
	} {
		mustExec(`INSERT INTO usage_records (request_id, time, key_id, project, model, provider, status, prompt_tokens,
			cost_micros, cache) VALUES ($1, $2, $3, 'p', 'm', 'up', $4, $5, $6, $7)`,
			r.id, h.Add(time.Duration(r.min)*time.Minute), r.key, r.status, r.prompt, r.cost, r.cache)
	}
	c.Close(ctx)

	s := openTest(t, dsn)
	defer s.Close()
	now := account.Record{RequestID: "gh-new", Time: h.Add(30 * time.Minute), KeyID: "k1", Project: "p", Model: "m",
		Provider: "up", Status: 200, PromptTokens: 1000, Cost: 5000}
	for range 2 {
		if err := s.WriteRecords(ctx, []account.Record{now}); err != nil {
			t.Fatal(err)
		}
	}
	type sums struct{ requests, errors, prompt, cost, hits int64 }
	var got sums
	if err := s.pool.QueryRow(ctx, `SELECT sum(requests)::bigint, sum(errors)::bigint, sum(prompt_tokens)::bigint,
		sum(cost_micros)::bigint, sum(cache_hits)::bigint FROM usage_hourly`).Scan(&got.requests, &got.errors,
		&got.prompt, &got.cost, &got.hits); err != nil {
		t.Fatal(err)
	}
	if want := (sums{4, 1, 1017, 5130, 1}); got != want {
		t.Fatalf("rollup %+v, want %+v", got, want)
	}
	rows, err := s.Usage(ctx, account.UsageQuery{Filter: account.Filter{From: h, To: h.Add(2 * time.Hour)},
		GroupBy: account.GroupKey})
	if err != nil {
		t.Fatal(err)
	}
	byKey := map[string]int64{}
	for _, r := range rows {
		byKey[r.Group] = r.Requests
	}
	if len(byKey) != 2 || byKey["k1"] != 3 || byKey["k2"] != 1 {
		t.Fatalf("requests by key %v, want k1:3 k2:1", byKey)
	}
}

// TestLatencyBackfill opens a schema last written by a gatehouse without
// latency histograms (schema 9): migration 0010 must fill the rollup's
// from the records already there, bucketing every bound as Go does, and
// WriteRecords add to them afterwards, a replay counting once.
func TestLatencyBackfill(t *testing.T) {
	ctx := context.Background()
	dsn, c, mustExec := oldSchema(t, 9)
	h := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	old := storetest.LatencyEdgeRecords(h.Add(20 * time.Minute)) // into the next hour
	for _, r := range old {
		mustExec(`INSERT INTO usage_records (request_id, time, key_id, project_id, project, customer, model, provider,
			status, latency_ms, ttft_ms, stream) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`,
			r.RequestID, r.Time, r.KeyID, r.ProjectID, r.Project, r.Customer, r.Model, r.Provider, r.Status,
			r.LatencyMS, r.TTFTMS, r.Stream)
	}
	// Their sums, as the WriteRecords of schema 9 added them.
	mustExec(`INSERT INTO usage_hourly (hour, key_id, project, model, provider, project_id, requests, errors)
		SELECT date_bin('1 hour', time, '2000-01-01 00:00:00+00'), key_id, project, model, provider, max(project_id),
			count(*), count(*) FILTER (WHERE status >= 400)
		FROM usage_records GROUP BY 1, 2, 3, 4, 5`)
	c.Close(ctx)

	s := openTest(t, dsn)
	defer s.Close()
	now := account.Record{RequestID: "gh-new", Time: h.Add(30 * time.Minute), KeyID: "key_edge", Project: "alpha",
		ProjectID: "proj_1", Customer: "cus", Model: "edge", Provider: "openai", Status: 200, LatencyMS: 1234, Stream: true,
		TTFTMS: 321}
	for range 2 {
		if err := s.WriteRecords(ctx, []account.Record{now}); err != nil {
			t.Fatal(err)
		}
	}
	recs := append(old, now)
	win := account.Filter{From: h, To: h.Add(2 * time.Hour)}
	for _, iv := range []account.Interval{account.IntervalNone, account.IntervalHour} {
		rollup := storetest.CheckLatency(t, "backfilled rollup", s, recs, account.UsageQuery{Filter: win, Interval: iv})
		if len(rollup) == 0 || rollup[0].Latency.Count() == 0 {
			t.Fatalf("no latency in the rollup: %+v", rollup)
		}
		win.Customer = "cus" // the records
		storetest.CheckLatency(t, "records", s, recs, account.UsageQuery{Filter: win, Interval: iv})
		win.Customer = ""
	}
}
