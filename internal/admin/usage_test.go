package admin

import (
	"context"
	"encoding/csv"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"gatehouse/internal/account"
	"gatehouse/internal/auth"
)

// usageEnv is an admin API over a SQLite store holding seven records:
// two projects, three models, one refusal, a labelled one.
func usageEnv(t *testing.T) (*env, time.Time) {
	t.Helper()
	st := openSQLite(t)
	now := time.Now().UTC().Truncate(time.Hour)
	var recs []account.Record
	for i := range 7 {
		r := account.Record{RequestID: fmt.Sprintf("gh-u%d", i), Time: now.Add(-time.Duration(i) * 30 * time.Minute),
			KeyID: []string{"key_a", "key_b"}[i%2], Project: []string{"alpha", "beta"}[i%2], Model: []string{"chat", "embed", "mini"}[i%3],
			Provider: "openai", Status: 200, PromptTokens: 10 * i, CompletionTokens: i, Cost: account.Micros(1000 * i),
			UsageSource: account.SourceReported, Cache: account.CacheBypass, Labels: map[string]string{}}
		if i == 3 {
			r.Status, r.ErrorKind, r.Cost = 429, "rate_limit", 0
		}
		if i == 4 {
			r.Labels = map[string]string{"team": "blue", "env": "prod"}
		}
		if i == 5 {
			r.Cache = account.CacheHit
		}
		recs = append(recs, r)
	}
	if err := st.(account.RecordStore).WriteRecords(context.Background(), recs); err != nil {
		t.Fatal(err)
	}
	return newEnv(t, st), now
}

func TestUsageEndpoints(t *testing.T) {
	e, now := usageEnv(t)
	from := now.Add(-6 * time.Hour).Format(time.RFC3339)
	to := now.Add(time.Hour).Format(time.RFC3339)
	window := "from=" + from + "&to=" + to
	rows := func(body map[string]any) []map[string]any {
		var out []map[string]any
		for _, d := range body["data"].([]any) {
			out = append(out, d.(map[string]any))
		}
		return out
	}
	e.run([]step{
		{name: "default window: the last 24 hours", method: "GET", path: "/admin/usage", status: 200, check: func(t *testing.T, b map[string]any) {
			r := rows(b)
			if len(r) != 1 || r[0]["requests"] != 7.0 || r[0]["errors"] != 1.0 || r[0]["cost_usd"] != "0.018000" || r[0]["prompt_tokens"] != 210.0 {
				t.Errorf("usage %v", b)
			}
			if _, ok := r[0]["bucket"]; ok {
				t.Errorf("bucket without interval: %v", r[0])
			}
		}},
		{name: "by model", method: "GET", path: "/admin/usage?group_by=model&" + window, status: 200, check: func(t *testing.T, b map[string]any) {
			got := map[string]float64{}
			for _, r := range rows(b) {
				got[r["model"].(string)] = r["requests"].(float64)
			}
			if got["chat"] != 3 || got["embed"] != 2 || got["mini"] != 2 || len(got) != 3 {
				t.Errorf("by model: %v", got)
			}
			if b["from"] != from || b["to"] != to {
				t.Errorf("window echoed as %v – %v", b["from"], b["to"])
			}
		}},
		{name: "by key and hour, one project", method: "GET", path: "/admin/usage?group_by=key&interval=hour&project=beta&" + window, status: 200,
			check: func(t *testing.T, b map[string]any) {
				var n float64
				for _, r := range rows(b) {
					if r["key"] != "key_b" || !strings.HasSuffix(r["bucket"].(string), ":00:00Z") {
						t.Errorf("row %v", r)
					}
					n += r["requests"].(float64)
				}
				if n != 3 {
					t.Errorf("beta: %v requests, want 3", n)
				}
			}},
		{name: "bad group_by", method: "GET", path: "/admin/usage?group_by=team", status: 400, param: "group_by", code: "invalid_group_by"},
		{name: "bad interval", method: "GET", path: "/admin/usage?interval=week", status: 400, param: "interval", code: "invalid_interval"},
		{name: "minutes over two days", method: "GET", path: "/admin/usage?interval=minute&from=" + now.Add(-48*time.Hour).Format(time.RFC3339), status: 400, param: "interval", code: "window_too_long"},
		{name: "minutes", method: "GET", path: "/admin/usage?interval=minute", status: 200, check: func(t *testing.T, b map[string]any) {
			r := rows(b)
			if len(r) != 7 { // one record every 30 minutes: each its own minute
				t.Fatalf("minute buckets: %v", b)
			}
			for _, row := range r {
				if bt, err := time.Parse(time.RFC3339, row["bucket"].(string)); err != nil || bt.Second() != 0 {
					t.Errorf("bucket %v is not the start of a minute", row["bucket"])
				}
			}
		}},
		{name: "bad time", method: "GET", path: "/admin/usage?from=yesterday", status: 400, param: "from", code: "invalid_time"},
		{name: "empty window", method: "GET", path: "/admin/usage?from=" + to + "&to=" + from, status: 400, param: "from", code: "invalid_window"},
		{name: "bad status", method: "GET", path: "/admin/logs?status=abc", status: 400, param: "status", code: "invalid_status"},
		{name: "unknown parameter", method: "GET", path: "/admin/usage?modle=chat", status: 400, param: "modle", code: "unknown_parameter"},
		{name: "logs, first page", method: "GET", path: "/admin/logs?limit=4", status: 200, save: map[string]string{"cursor": "next_cursor"},
			check: func(t *testing.T, b map[string]any) {
				r := rows(b)
				if len(r) != 4 || r[0]["request_id"] != "gh-u0" || r[3]["request_id"] != "gh-u3" || r[3]["cost_usd"] != "0.000000" {
					t.Errorf("page 1: %v", b)
				}
			}},
		{name: "logs, last page", method: "GET", path: "/admin/logs?limit=4&cursor={cursor}", status: 200, check: func(t *testing.T, b map[string]any) {
			r := rows(b)
			if len(r) != 3 || r[0]["request_id"] != "gh-u4" || b["next_cursor"] != nil {
				t.Errorf("page 2: %v", b)
			}
			if l := r[0]["labels"].(map[string]any); l["team"] != "blue" {
				t.Errorf("labels %v", r[0]["labels"])
			}
		}},
		{name: "logs filtered", method: "GET", path: "/admin/logs?status=429&key=key_b", status: 200, check: func(t *testing.T, b map[string]any) {
			if r := rows(b); len(r) != 1 || r[0]["request_id"] != "gh-u3" || r[0]["error_kind"] != "rate_limit" {
				t.Errorf("filtered: %v", b)
			}
		}},
		{name: "logs by cache outcome", method: "GET", path: "/admin/logs?cache=hit", status: 200, check: func(t *testing.T, b map[string]any) {
			if r := rows(b); len(r) != 1 || r[0]["request_id"] != "gh-u5" || r[0]["cache"] != "hit" {
				t.Errorf("cache=hit: %v", b)
			}
		}},
		{name: "bad cache outcome", method: "GET", path: "/admin/logs?cache=warm", status: 400, param: "cache", code: "invalid_cache"},
		{name: "bad cursor", method: "GET", path: "/admin/logs?cursor=xyz", status: 400, param: "cursor", code: "invalid_cursor"},
		{name: "limit too big", method: "GET", path: "/admin/logs?limit=501", status: 400, param: "limit"},
		{name: "one record", method: "GET", path: "/admin/logs/gh-u2", status: 200, check: func(t *testing.T, b map[string]any) {
			wantField(t, b, "request_id", "gh-u2")
			wantField(t, b, "cost_usd", "0.002000")
			wantField(t, b, "model", "mini")
		}},
		{name: "no such record", method: "GET", path: "/admin/logs/gh-none", status: 404, code: "request_not_found"},
	})
}

func TestUsageExportCSV(t *testing.T) {
	e, _ := usageEnv(t)
	get := func(path string) (*http.Response, string) {
		req, _ := http.NewRequest(http.MethodGet, e.srv.URL+path, nil)
		req.Header.Set("Authorization", "Bearer "+adminKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	resp, body := get("/admin/usage/export?project=alpha")
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/csv") {
		t.Fatalf("export: %d %s %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	rows, err := csv.NewReader(strings.NewReader(body)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(rows[0], ",") != strings.Join(csvColumns, ",") || len(rows) != 5 {
		t.Fatalf("export rows %v", rows)
	}
	col := map[string]int{}
	for i, c := range rows[0] {
		col[c] = i
	}
	for _, r := range rows[1:] {
		if r[col["project"]] != "alpha" {
			t.Fatalf("row of another project: %v", r)
		}
	}
	if r := rows[3]; r[col["request_id"]] != "gh-u4" || r[col["labels"]] != "env=prod;team=blue" || r[col["cost_usd"]] != "0.004000" {
		t.Fatalf("row gh-u4: %v", r)
	}
	if resp, body := get("/admin/usage/export?group_by=model"); resp.StatusCode != 400 || !strings.Contains(body, "unknown_parameter") {
		t.Fatalf("export with group_by: %d %s", resp.StatusCode, body)
	}
}

// TestUsageExportPages: an export longer than one page of the store
// lists every record once.
func TestUsageExportPages(t *testing.T) {
	st := openSQLite(t)
	now := time.Now().UTC()
	var recs []account.Record
	for i := range 1203 {
		recs = append(recs, account.Record{RequestID: fmt.Sprintf("gh-p%04d", i), Time: now.Add(-time.Duration(i) * time.Second), Status: 200})
	}
	if err := st.(account.RecordStore).WriteRecords(context.Background(), recs); err != nil {
		t.Fatal(err)
	}
	h := New(Options{Store: st, AdminKey: auth.HashKey(adminKey), Usage: st.(account.Querier)})
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodGet, "/admin/usage/export", nil)
	req.Header.Set("Authorization", "Bearer "+adminKey)
	h.ServeHTTP(rec, req)
	rows, err := csv.NewReader(rec.Body).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, r := range rows[1:] {
		if seen[r[0]] {
			t.Fatalf("%s exported twice", r[0])
		}
		seen[r[0]] = true
	}
	if len(seen) != 1203 {
		t.Fatalf("exported %d records, want 1203", len(seen))
	}
}

// TestUsageLatency: rows carry latency and ttft percentiles (ttft from
// streamed requests with one only, null without), minute buckets come
// back on the minute, and a minute interval over more than 24 hours is
// refused.
func TestUsageLatency(t *testing.T) {
	st := openSQLite(t)
	at := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	var recs []account.Record
	// chat: 100 streamed requests, latency 10, 20 … 1000 ms, ttft a
	// tenth of it; embed: 10 non-streamed requests of 50 ms whose ttft
	// must not count. One request a minute from 11:20 on, so the window
	// below holds partial hours at both ends and a whole one between.
	for i := range 110 {
		r := account.Record{RequestID: fmt.Sprintf("gh-l%03d", i), Time: at.Add(-40*time.Minute + time.Duration(i)*time.Minute),
			KeyID: "key_a", Project: "alpha", Model: "chat", Provider: "openai", Status: 200, Stream: true,
			LatencyMS: float64(10 * (i + 1)), TTFTMS: float64(i + 1)}
		if i >= 100 {
			r.Model, r.Stream, r.LatencyMS, r.TTFTMS = "embed", false, 50, 7
		}
		recs = append(recs, r)
	}
	if err := st.(account.RecordStore).WriteRecords(context.Background(), recs); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, st)
	rows := func(body map[string]any) []map[string]any {
		var out []map[string]any
		for _, d := range body["data"].([]any) {
			out = append(out, d.(map[string]any))
		}
		return out
	}
	// near: the estimate lies within 14.3% (the widest bucket) of the
	// exact figure.
	near := func(t *testing.T, what string, got any, exact float64) {
		t.Helper()
		v, ok := got.(float64)
		if !ok || v < exact/1.143 || v > exact*1.143 {
			t.Errorf("%s = %v, want about %v", what, got, exact)
		}
	}
	window := "from=" + at.Add(-50*time.Minute).Format(time.RFC3339) + "&to=" + at.Add(80*time.Minute).Format(time.RFC3339)
	e.run([]step{
		{name: "percentiles by model", method: "GET", path: "/admin/usage?group_by=model&" + window, status: 200,
			check: func(t *testing.T, b map[string]any) {
				r := rows(b)
				if len(r) != 2 || r[0]["model"] != "chat" || r[1]["model"] != "embed" {
					t.Fatalf("rows %v", r)
				}
				near(t, "chat latency p50", r[0]["latency_ms_p50"], 500)
				near(t, "chat latency p95", r[0]["latency_ms_p95"], 950)
				near(t, "chat ttft p50", r[0]["ttft_ms_p50"], 50)
				near(t, "chat ttft p95", r[0]["ttft_ms_p95"], 95)
				near(t, "embed latency p50", r[1]["latency_ms_p50"], 50)
				for _, f := range []string{"ttft_ms_p50", "ttft_ms_p95"} {
					if v, ok := r[1][f]; !ok || v != nil {
						t.Errorf("embed (no stream) %s = %v, want null", f, v)
					}
				}
			}},
		{name: "by minute", method: "GET", path: "/admin/usage?interval=minute&model=chat&from=" + at.Add(-5*time.Minute).Format(time.RFC3339) +
			"&to=" + at.Add(5*time.Minute).Format(time.RFC3339), status: 200,
			check: func(t *testing.T, b map[string]any) {
				r := rows(b)
				if len(r) != 10 {
					t.Fatalf("%d minute rows, want 10: %v", len(r), r)
				}
				for i, row := range r {
					want := at.Add(time.Duration(i-5) * time.Minute)
					if row["bucket"] != want.Format(time.RFC3339) || row["requests"] != 1.0 {
						t.Errorf("row %d: %v, want bucket %v with one request", i, row, want)
					}
					// One sample: its bucket's interpolated middle.
					near(t, "latency p50 of "+want.Format("15:04"), row["latency_ms_p50"], float64(10*(i+36)))
				}
			}},
		{name: "by minute, the default 24 hours", method: "GET", path: "/admin/usage?interval=minute", status: 200},
		{name: "by minute over 25 hours", method: "GET", path: "/admin/usage?interval=minute&from=" + at.Add(-25*time.Hour).Format(time.RFC3339) +
			"&to=" + at.Format(time.RFC3339), status: 400, param: "interval", code: "window_too_long", msg: "at most 24 hours"},
	})
}
