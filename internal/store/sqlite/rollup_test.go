package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"gatehouse/internal/account"
	"gatehouse/internal/store"
	"gatehouse/internal/store/storetest"
)

// oldDatabase makes a SQLite file as a gatehouse that knew the migrations
// up to version left it, for a test of the migrations after; mustExec
// runs statements on it. Close db before opening the file with Open.
func oldDatabase(t *testing.T, version int) (path string, db *sql.DB, mustExec func(q string, args ...any)) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "old.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	ms, err := store.Migrations(migrationFiles, "migrations")
	if err != nil {
		t.Fatal(err)
	}
	mustExec = func(q string, args ...any) {
		t.Helper()
		if _, err := db.ExecContext(context.Background(), q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	mustExec(`CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)`)
	for _, m := range ms {
		if m.Version > version {
			break
		}
		mustExec(m.SQL)
		mustExec(`INSERT INTO schema_migrations VALUES (?, ?, '2026-01-01T00:00:00Z')`, m.Version, m.Name)
	}
	return path, db, mustExec
}

// TestRollupBackfill opens a database last written by a gatehouse that
// had usage records but no rollup (schema 4): migration 0005 must fill
// the rollup from the records already there, and 0006 must leave the
// rollup to WriteRecords alone, so records written afterwards count once.
func TestRollupBackfill(t *testing.T) {
	ctx := context.Background()
	path, db, mustExec := oldDatabase(t, 4)
	h := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	old := []struct {
		id     string
		at     time.Time
		key    string
		status int
		prompt int
		cost   int64
		cache  string
	}{
		{"gh-old1", h.Add(5 * time.Minute), "k1", 200, 10, 100, "miss"},
		{"gh-old2", h.Add(50 * time.Minute), "k1", 429, 0, 0, ""},
		{"gh-old3", h.Add(70 * time.Minute), "k2", 200, 7, 30, "hit"},
	}
	for _, r := range old {
		mustExec(`INSERT INTO usage_records (request_id, time, key_id, project, model, provider, status, prompt_tokens,
			cost_micros, cache) VALUES (?, ?, ?, 'p', 'm', 'up', ?, ?, ?, ?)`,
			r.id, r.at.UnixMicro(), r.key, r.status, r.prompt, r.cost, r.cache)
	}
	db.Close()

	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// A record written now, in the first hour, and a replay of it.
	now := account.Record{RequestID: "gh-new", Time: h.Add(30 * time.Minute), KeyID: "k1", Project: "p", Model: "m",
		Provider: "up", Status: 200, PromptTokens: 1000, Cost: 5000}
	for range 2 {
		if err := s.WriteRecords(ctx, []account.Record{now}); err != nil {
			t.Fatal(err)
		}
	}
	var rollup struct{ requests, errors, prompt, cost, hits int64 }
	if err := s.r.QueryRowContext(ctx, `SELECT sum(requests), sum(errors), sum(prompt_tokens), sum(cost_micros),
		sum(cache_hits) FROM usage_hourly`).Scan(&rollup.requests, &rollup.errors, &rollup.prompt, &rollup.cost,
		&rollup.hits); err != nil {
		t.Fatal(err)
	}
	if want := (struct{ requests, errors, prompt, cost, hits int64 }{4, 1, 1017, 5130, 1}); rollup != want {
		t.Fatalf("rollup %+v, want %+v", rollup, want)
	}
	// The usage API over whole hours reads the rollup: by key.
	rows, err := s.Usage(ctx, account.UsageQuery{Filter: account.Filter{From: h, To: h.Add(2 * time.Hour)},
		GroupBy: account.GroupKey})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, r := range rows {
		got[r.Group] = r.Requests
	}
	if len(got) != 2 || got["k1"] != 3 || got["k2"] != 1 {
		t.Fatalf("requests by key %v, want k1:3 k2:1", got)
	}
}

// TestLatencyBackfill opens a database last written by a gatehouse
// without latency histograms (schema 11): migration 0012 must fill the
// rollup's from the records already there, bucketing every bound as Go
// does, and WriteRecords add to them afterwards, a replay counting once.
func TestLatencyBackfill(t *testing.T) {
	ctx := context.Background()
	path, db, mustExec := oldDatabase(t, 11)
	h := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	old := storetest.LatencyEdgeRecords(h.Add(20 * time.Minute)) // into the next hour
	for _, r := range old {
		mustExec(`INSERT INTO usage_records (request_id, time, key_id, project_id, project, customer, model, provider,
			status, latency_ms, ttft_ms, stream) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			r.RequestID, r.Time.UnixMicro(), r.KeyID, r.ProjectID, r.Project, r.Customer, r.Model, r.Provider,
			r.Status, r.LatencyMS, r.TTFTMS, r.Stream)
	}
	// Their sums, as the WriteRecords of schema 11 added them.
	mustExec(`INSERT INTO usage_hourly (hour, key_id, project, model, provider, project_id, requests, errors)
		SELECT time - time % 3600000000, key_id, project, model, provider, max(project_id), count(*), sum(status >= 400)
		FROM usage_records GROUP BY 1, 2, 3, 4, 5`)
	db.Close()

	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
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

// TestRollupCombos: a batch's records are summed per hour and
// combination whether their strings are the very ones of the record
// before or copies of them, a combination that returns after another is
// the same row, and a row's project id is the greatest of its records'.
// The want is worked out with ==, apart from the code under test.
func TestRollupCombos(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "g.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	at := time.Date(2026, 5, 2, 10, 59, 59, 0, time.UTC)
	fresh := strings.Clone
	var rs []account.Record
	for i, c := range []struct{ key, project, model, provider, projectID string }{
		{"key_1", "p", "chat", "openai", "proj_b"},
		{"key_1", "p", "chat", "openai", "proj_a"},                                    // the same combination, a lesser project id
		{fresh("key_1"), fresh("p"), fresh("chat"), fresh("openai"), fresh("proj_c")}, // copies: still the same
		{"key_2", "p", "chat", "openai", "proj_a"},
		{"key_1", "q", "chat", "openai", "proj_a"},
		{"key_1", "p", "mini", "openai", "proj_a"},
		{"key_1", "p", "chat", "anthropic", "proj_a"},
		{"key_1", "p", "chat", "openai", "proj_a"}, // back to the first
	} {
		r := account.Record{RequestID: fmt.Sprintf("combo-%d", i), Time: at, KeyID: c.key, Project: c.project,
			Model: c.model, Provider: c.provider, ProjectID: c.projectID, Status: 200, PromptTokens: 1 + i}
		rs = append(rs, r)
	}
	late := rs[0]
	late.RequestID, late.Time = "combo-late", at.Add(time.Second) // the next hour
	rs = append(rs, late)
	type row struct {
		hour                                     int64
		key, project, model, provider, projectID string
		requests, prompt                         int64
	}
	want := map[row]bool{}
	sums := map[[5]any]*row{}
	for _, r := range rs {
		hour := r.Time.UnixMicro() - r.Time.UnixMicro()%int64(time.Hour/time.Microsecond)
		k := [5]any{hour, r.KeyID, r.Project, r.Model, r.Provider}
		w := sums[k]
		if w == nil {
			w = &row{hour: hour, key: r.KeyID, project: r.Project, model: r.Model, provider: r.Provider}
			sums[k] = w
		}
		w.projectID = max(w.projectID, r.ProjectID)
		w.requests++
		w.prompt += int64(r.PromptTokens)
	}
	for _, w := range sums {
		want[*w] = true
	}
	if err := s.WriteFreshRecords(ctx, rs); err != nil {
		t.Fatal(err)
	}
	rows, err := s.r.QueryContext(ctx, `SELECT hour, key_id, project, model, provider, project_id, requests, prompt_tokens FROM usage_hourly`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	got := map[row]bool{}
	for rows.Next() {
		var w row
		if err := rows.Scan(&w.hour, &w.key, &w.project, &w.model, &w.provider, &w.projectID, &w.requests, &w.prompt); err != nil {
			t.Fatal(err)
		}
		got[w] = true
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("usage_hourly (-want +got):\n%s", diff)
	}
}
