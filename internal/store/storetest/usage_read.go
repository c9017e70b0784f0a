package storetest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"gatehouse/internal/account"
	"gatehouse/internal/auth"
)

// testUsageReads holds a store to account.Querier: every field of a
// record comes back as written; usage aggregates by field and by UTC
// hour or day, refusals counted as requests; the log pages newest first
// through every record exactly once under each filter.
func testUsageReads(t *testing.T, s auth.Store) {
	w, ok := s.(account.RecordStore)
	q, ok2 := s.(account.Querier)
	if !ok || !ok2 {
		t.Fatalf("%T does not implement account.RecordStore and account.Querier", s)
	}
	ctx := ctxFor(t)
	day := time.Date(2026, 3, 10, 0, 0, 0, 0, time.UTC)
	full := account.Record{RequestID: "gh-full", Time: day.Add(90*time.Minute + 123456*time.Microsecond), Endpoint: "/v1/messages",
		KeyID: "key_a", ProjectID: "proj_1", Project: "alpha", Customer: "cus-9", Model: "chat", ServedModel: "gpt-4o-mini",
		Provider: "openai", Deployment: "openai/gpt-4o-mini", Status: 200, PromptTokens: 11, CompletionTokens: 22,
		CachedTokens: 3, ReasoningTokens: 4, Cost: 1234, UsageSource: account.SourceEstimated, LatencyMS: 12.5, TTFTMS: 3.25,
		OverheadMS: 0.125, Cache: account.CacheHit, Attempts: 2, Stream: true, Labels: map[string]string{"team": "blue", "env": "prod"},
		RequestBody: `{"model":"chat"}`, ResponseBody: "data: [DONE]\n\n"}
	recs := []account.Record{full}
	// 30 more over two days: keys a/b, projects alpha/beta, a failure
	// every fifth.
	for i := range 30 {
		r := account.Record{RequestID: fmt.Sprintf("gh-%02d", i), Time: day.Add(time.Duration(i) * 97 * time.Minute),
			KeyID: []string{"key_a", "key_b"}[i%2], Project: []string{"alpha", "beta"}[i%2], ProjectID: []string{"proj_1", "proj_2"}[i%2],
			Model: []string{"chat", "embed", "chat"}[i%3], Provider: "openai", Status: 200, PromptTokens: i, CompletionTokens: 2 * i,
			CachedTokens: i % 4, Cost: account.Micros(100 * i), Cache: account.CacheMiss, UsageSource: account.SourceReported}
		if i%5 == 0 {
			r.Status, r.ErrorKind, r.Cost = 429, "rate_limit", 0
		}
		recs = append(recs, r)
	}
	// A burst in one hour from one key to one model: the rollup adds
	// these up in one row.
	for i := range 6 {
		recs = append(recs, account.Record{RequestID: fmt.Sprintf("gh-burst%d", i), Time: day.Add(10*time.Hour + time.Duration(i)*7*time.Minute),
			KeyID: "key_a", Project: "alpha", ProjectID: "proj_1", Model: "chat", Provider: "openai", Status: 200 + 229*(i%3/2),
			PromptTokens: 100 + i, CompletionTokens: 7, CachedTokens: 1, Cost: 55, Cache: []string{account.CacheHit, account.CacheMiss}[i%2]})
	}
	if err := w.WriteRecords(ctx, recs); err != nil {
		t.Fatal(err)
	}

	got, err := q.Record(ctx, "gh-full")
	if err != nil {
		t.Fatal(err)
	}
	diff(t, "Record", full, got)
	if _, err := q.Record(ctx, "gh-none"); !errors.Is(err, account.ErrNotFound) {
		t.Fatalf("missing record: %v, want ErrNotFound", err)
	}

	// Sums computed here from the records written.
	type sums struct {
		req, errs, prompt, compl, cached, hits int64
		cost                                   account.Micros
	}
	sum := func(keep func(account.Record) bool) sums {
		var s sums
		for _, r := range recs {
			if !keep(r) {
				continue
			}
			s.req++
			if r.Status >= 400 {
				s.errs++
			}
			s.prompt += int64(r.PromptTokens)
			s.compl += int64(r.CompletionTokens)
			s.cached += int64(r.CachedTokens)
			s.cost += r.Cost
			if r.Cache == account.CacheHit || r.Cache == account.CacheSemantic {
				s.hits++
			}
		}
		return s
	}
	of := func(r account.UsageRow) sums {
		return sums{r.Requests, r.Errors, r.PromptTokens, r.CompletionTokens, r.CachedTokens, r.CacheHits, r.Cost}
	}
	window := account.Filter{From: day, To: day.Add(48 * time.Hour)}
	rows, err := q.Usage(ctx, account.UsageQuery{Filter: window})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || of(rows[0]) != sum(func(account.Record) bool { return true }) {
		t.Fatalf("ungrouped usage %+v, want %+v", rows, sum(func(account.Record) bool { return true }))
	}
	rows, err = q.Usage(ctx, account.UsageQuery{Filter: window, GroupBy: account.GroupKey})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 {
		t.Fatalf("by key: %+v", rows)
	}
	for _, r := range rows {
		if want := sum(func(x account.Record) bool { return x.KeyID == r.Group }); of(r) != want {
			t.Fatalf("key %s: %+v, want %+v", r.Group, of(r), want)
		}
	}
	// By day, for one project given by id, and by hour for one model.
	rows, err = q.Usage(ctx, account.UsageQuery{Filter: account.Filter{From: day, To: day.Add(48 * time.Hour), Project: "proj_2"},
		GroupBy: account.GroupProject, Interval: account.IntervalDay})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || !rows[0].Bucket.Equal(day) || !rows[1].Bucket.Equal(day.Add(24*time.Hour)) || rows[0].Group != "beta" {
		t.Fatalf("beta by day: %+v", rows)
	}
	for _, r := range rows {
		b := r.Bucket
		if want := sum(func(x account.Record) bool {
			return x.Project == "beta" && !x.Time.Before(b) && x.Time.Before(b.Add(24*time.Hour))
		}); of(r) != want {
			t.Fatalf("beta on %v: %+v, want %+v", b, of(r), want)
		}
	}
	rows, err = q.Usage(ctx, account.UsageQuery{Filter: account.Filter{From: day, To: day.Add(6 * time.Hour), Model: "chat"},
		GroupBy: account.GroupModel, Interval: account.IntervalHour})
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for i, r := range rows {
		if r.Bucket.Minute() != 0 || r.Bucket.Location() != time.UTC || (i > 0 && !rows[i-1].Bucket.Before(r.Bucket)) {
			t.Fatalf("hour buckets out of shape or order: %+v", rows)
		}
		total += r.Requests
	}
	if want := sum(func(x account.Record) bool { return x.Model == "chat" && x.Time.Before(day.Add(6*time.Hour)) }); total != want.req {
		t.Fatalf("chat in the first 6 hours: %d requests, want %d", total, want.req)
	}

	// A replayed batch adds nothing, to the records or to the rollup.
	if err := w.WriteRecords(ctx, recs[5:20]); err != nil {
		t.Fatal(err)
	}
	// Windows that do not start or end on the hour: the rollup answers
	// the whole hours, the records the edges; every grouping and bucket
	// must equal the records' own sums.
	field := map[account.GroupBy]func(account.Record) string{
		account.GroupNone: func(account.Record) string { return "" }, account.GroupKey: func(r account.Record) string { return r.KeyID },
		account.GroupProject: func(r account.Record) string { return r.Project }, account.GroupModel: func(r account.Record) string { return r.Model },
		account.GroupProvider: func(r account.Record) string { return r.Provider }, account.GroupCustomer: func(r account.Record) string { return r.Customer },
	}
	for _, win := range []account.Filter{
		{From: day.Add(17 * time.Minute), To: day.Add(29*time.Hour + 41*time.Minute)},
		{From: day.Add(-time.Hour), To: day.Add(47 * time.Hour)},
		{From: day.Add(90 * time.Minute), To: day.Add(150 * time.Minute)},
		{From: day.Add(5 * time.Minute), To: day.Add(35 * time.Minute)},
		{From: day.Add(5 * time.Minute), To: day.Add(40 * time.Hour), Project: "proj_1", Model: "chat"},
		{From: day.Add(5 * time.Minute), To: day.Add(40 * time.Hour), Status: 429},
		{From: day.Add(5 * time.Minute), To: day.Add(40 * time.Hour), Cache: account.CacheHit},
	} {
		for g, get := range field {
			for _, iv := range []account.Interval{account.IntervalNone, account.IntervalMinute, account.IntervalHour, account.IntervalDay} {
				rows, err := q.Usage(ctx, account.UsageQuery{Filter: win, GroupBy: g, Interval: iv})
				if err != nil {
					t.Fatal(err)
				}
				type gk struct {
					group  string
					bucket time.Time
				}
				want := map[gk]sums{}
				for _, r := range recs {
					if !matches(r, win) {
						continue
					}
					k := gk{group: get(r)}
					switch iv {
					case account.IntervalMinute:
						k.bucket = r.Time.Truncate(time.Minute)
					case account.IntervalHour:
						k.bucket = r.Time.Truncate(time.Hour)
					case account.IntervalDay:
						k.bucket = r.Time.Truncate(24 * time.Hour)
					}
					one := sum(func(x account.Record) bool { return x.RequestID == r.RequestID })
					w := want[k]
					w.req, w.errs, w.prompt, w.compl, w.cached, w.hits, w.cost = w.req+one.req, w.errs+one.errs,
						w.prompt+one.prompt, w.compl+one.compl, w.cached+one.cached, w.hits+one.hits, w.cost+one.cost
					want[k] = w
				}
				got := map[gk]sums{}
				for _, r := range rows {
					got[gk{r.Group, r.Bucket}] = of(r)
				}
				if len(got) != len(want) {
					t.Fatalf("window %v–%v group %q interval %q: %d rows, want %d: %+v", win.From, win.To, g, iv, len(got), len(want), rows)
				}
				for k, w := range want {
					if got[k] != w {
						t.Fatalf("window %v–%v group %q interval %q, %v: %+v, want %+v", win.From, win.To, g, iv, k, got[k], w)
					}
				}
			}
		}
	}

	// Pages of 7, newest first, each record once, for several filters.
	for _, f := range []account.Filter{{}, {Key: "key_b"}, {Project: "alpha"}, {Status: 429}, {Model: "embed", From: day.Add(3 * time.Hour)},
		{Cache: account.CacheHit}} {
		var seen []account.Record
		cursor := ""
		for range 20 {
			page, err := q.Logs(ctx, account.LogQuery{Filter: f, Limit: 7, Cursor: cursor})
			if err != nil {
				t.Fatal(err)
			}
			seen = append(seen, page.Records...)
			if page.Next == "" {
				break
			}
			cursor = page.Next
		}
		var want []string
		for i := len(recs) - 1; i >= 0; i-- { // written oldest first, except gh-full
			r := recs[i]
			if matches(r, f) {
				want = append(want, r.RequestID)
			}
		}
		var ids []string
		for i, r := range seen {
			ids = append(ids, r.RequestID)
			if i > 0 && seen[i-1].Time.Before(r.Time) {
				t.Fatalf("filter %+v: not newest first", f)
			}
		}
		if len(ids) != len(want) {
			t.Fatalf("filter %+v: listed %v, want %d records", f, ids, len(want))
		}
		set := map[string]bool{}
		for _, id := range ids {
			if set[id] {
				t.Fatalf("filter %+v: %s listed twice", f, id)
			}
			set[id] = true
		}
		for _, id := range want {
			if !set[id] {
				t.Fatalf("filter %+v: %s missing from %v", f, id, ids)
			}
		}
	}
	if _, err := q.Logs(ctx, account.LogQuery{Limit: 5, Cursor: "not-a-cursor!"}); !errors.Is(err, account.ErrBadCursor) {
		t.Fatalf("bad cursor: %v", err)
	}
}

func matches(r account.Record, f account.Filter) bool {
	return (f.From.IsZero() || !r.Time.Before(f.From)) && (f.To.IsZero() || r.Time.Before(f.To)) &&
		(f.Key == "" || r.KeyID == f.Key) && (f.Project == "" || r.Project == f.Project || r.ProjectID == f.Project) &&
		(f.Model == "" || r.Model == f.Model) && (f.Status == 0 || r.Status == f.Status) &&
		(f.Customer == "" || r.Customer == f.Customer) && (f.Provider == "" || r.Provider == f.Provider) &&
		(f.Cache == "" || r.Cache == f.Cache)
}
