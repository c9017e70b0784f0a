package sqlite

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gatehouse/internal/account"
)

// TestUsageQueryPlans holds every question the usage API asks of the
// records to the index that answers it, as EXPLAIN QUERY PLAN reports
// it, so dropping or narrowing an index (each one costs every request an
// insert) cannot quietly turn a query into a scan of the whole table.
// The file is un-ANALYZEd, as gatehouse leaves it.
func TestUsageQueryPlans(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "plan.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	at := time.Date(2026, 3, 4, 5, 0, 0, 0, time.UTC)
	var rs []account.Record
	for i := range 200 {
		r := account.Record{RequestID: fmt.Sprintf("gh-plan-%d", i), Time: at.Add(time.Duration(i) * time.Minute),
			KeyID: fmt.Sprintf("key_%d", i%7), Project: "p", ProjectID: "proj_p", Model: "m", Provider: "openai", Status: 200}
		if i%10 == 0 {
			r.Customer = fmt.Sprintf("c%d", i%3)
		}
		rs = append(rs, r)
	}
	if err := s.WriteRecords(ctx, rs); err != nil {
		t.Fatal(err)
	}

	window := account.Filter{From: at.Add(10 * time.Minute), To: at.Add(50 * time.Minute)}
	with := func(f account.Filter, set func(*account.Filter)) account.Filter { set(&f); return f }
	const (
		byTime     = "SEARCH usage_records USING INDEX usage_records_time (time>? AND time<?)"
		byCustomer = "SEARCH usage_records USING INDEX usage_records_customer (customer=? AND time>? AND time<?)"
		byKey      = "SEARCH usage_records USING INDEX usage_records_key (key_id=? AND time>? AND time<?)"
		newest     = "SCAN usage_records USING INDEX usage_records_time"
	)
	usage := func(q account.UsageQuery) func() (string, []any, error) {
		return func() (string, []any, error) { sql, args := usageRecordsSQL(q); return sql, args, nil }
	}
	logs := func(f account.Filter) func() (string, []any, error) {
		return func() (string, []any, error) { return logsSQL(account.LogQuery{Filter: f, Limit: 50}) }
	}
	for _, c := range []struct {
		name  string
		query func() (string, []any, error)
		want  string // the plan's line for usage_records
	}{
		{"usage, a window", usage(account.UsageQuery{Filter: window}), byTime},
		{"usage, a window by customer", usage(account.UsageQuery{Filter: window, GroupBy: account.GroupCustomer}), byTime},
		{"usage, a window by minute", usage(account.UsageQuery{Filter: window, Interval: account.IntervalMinute}), byTime},
		{"usage, one customer", usage(account.UsageQuery{Filter: with(window, func(f *account.Filter) { f.Customer = "c1" })}), byCustomer},
		{"usage, one key", usage(account.UsageQuery{Filter: with(window, func(f *account.Filter) { f.Key = "key_1" })}), byKey},
		{"usage, one project", usage(account.UsageQuery{Filter: with(window, func(f *account.Filter) { f.Project = "p" })}), byTime},
		{"usage, the 429s", usage(account.UsageQuery{Filter: with(window, func(f *account.Filter) { f.Status = 429 })}), byTime},
		{"logs, newest", logs(account.Filter{}), newest},
		{"logs, a window", logs(window), byTime},
		{"logs, one customer", logs(account.Filter{Customer: "c1"}),
			"SEARCH usage_records USING INDEX usage_records_customer (customer=?)"},
		{"logs, one customer in a window", logs(with(window, func(f *account.Filter) { f.Customer = "c1" })), byCustomer},
		{"logs, one key", logs(account.Filter{Key: "key_1"}), "SEARCH usage_records USING INDEX usage_records_key (key_id=?)"},
		{"logs, one model", logs(account.Filter{Model: "m"}), "SEARCH usage_records USING INDEX usage_records_model (model=?)"},
		{"logs, one provider", logs(account.Filter{Provider: "openai"}),
			"SEARCH usage_records USING INDEX usage_records_provider (provider=?)"},
		{"logs, one project", logs(account.Filter{Project: "p"}), newest},
		{"record by id", func() (string, []any, error) {
			return "SELECT " + recordCols + " FROM usage_records WHERE request_id = ?", []any{"gh-plan-3"}, nil
		}, "SEARCH usage_records USING INDEX sqlite_autoindex_usage_records_1 (request_id=?)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			sql, args, err := c.query()
			if err != nil {
				t.Fatal(err)
			}
			rows, err := s.r.QueryContext(ctx, "EXPLAIN QUERY PLAN "+sql, args...)
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			var plan []string
			got := ""
			for rows.Next() {
				var id, parent, notused int
				var detail string
				if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
					t.Fatal(err)
				}
				plan = append(plan, detail)
				if strings.Contains(detail, " usage_records ") || strings.HasSuffix(detail, " usage_records") {
					got = detail
				}
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
			if got != c.want {
				t.Errorf("usage_records: %q, want %q\nplan: %q", got, c.want, plan)
			}
		})
	}
}
