package postgres

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"gatehouse/internal/account"
	"gatehouse/internal/reqid"
	"gatehouse/internal/store/postgres/pgtest"
)

// TestUsageRecordIndexes: usage_records has the indexes the queries use
// and no other (migration 0015): the customer index holds only records
// that name a customer, and the project index, which no query could use,
// is gone. Each is paid for by every record written.
func TestUsageRecordIndexes(t *testing.T) {
	s, err := Open(context.Background(), pgtest.DSN(t, "gh_plan_"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rows, err := s.pool.Query(context.Background(), `SELECT indexname, indexdef FROM pg_indexes
		WHERE schemaname = current_schema() AND tablename = 'usage_records' ORDER BY indexname`)
	if err != nil {
		t.Fatal(err)
	}
	defs := map[string]string{}
	for rows.Next() {
		var name, def string
		if err := rows.Scan(&name, &def); err != nil {
			t.Fatal(err)
		}
		defs[name] = def
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	var names []string
	for n := range defs {
		names = append(names, n)
	}
	slices.Sort(names)
	want := []string{"usage_records_customer", "usage_records_key", "usage_records_model", "usage_records_pkey",
		"usage_records_provider", "usage_records_time"}
	if !slices.Equal(names, want) {
		t.Errorf("indexes %v, want %v", names, want)
	}
	if def := defs["usage_records_customer"]; !strings.HasSuffix(def, "WHERE (customer <> ''::text)") {
		t.Errorf("usage_records_customer is %q: want it partial, on customer <> ''", def)
	}
}

// TestCustomerFilterUsesItsIndex: a request-log page filtered by a
// customer is read through usage_records_customer, in the plan a
// prepared statement settles on (generic: it knows no parameter's
// value, so only the query's own customer <> ” term makes the partial
// index usable). One record in 500 names the customer, so reading the
// time window instead would scan the others.
func TestCustomerFilterUsesItsIndex(t *testing.T) {
	s, err := Open(context.Background(), pgtest.DSN(t, "gh_plan_"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	base := time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)
	batch := make([]account.Record, 0, 1000)
	for i := range 20_000 {
		at := base.Add(time.Duration(i) * 100 * time.Millisecond)
		r := account.Record{RequestID: reqid.New(at), Time: at, KeyID: "key_" + strconv.Itoa(i%7), Project: "p",
			Model: "m", Provider: "openai", Status: 200}
		if i%500 == 0 {
			r.Customer = "c1"
		} else if i%3 == 0 {
			r.Customer = "c" + strconv.Itoa(2+i%40)
		}
		if batch = append(batch, r); len(batch) == cap(batch) {
			if err := s.WriteFreshRecords(ctx, batch); err != nil {
				t.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	if _, err := s.pool.Exec(ctx, "ANALYZE usage_records"); err != nil {
		t.Fatal(err)
	}
	query, args, err := logsSQL(account.LogQuery{Filter: account.Filter{Customer: "c1", From: base, To: base.Add(time.Hour)}, Limit: 50})
	if err != nil {
		t.Fatal(err)
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	// The arguments as literals, for EXECUTE.
	lits := make([]string, len(args))
	for i, a := range args {
		switch v := a.(type) {
		case string:
			lits[i] = "'" + strings.ReplaceAll(v, "'", "''") + "'"
		case time.Time:
			lits[i] = "'" + v.Format(time.RFC3339Nano) + "'::timestamptz"
		case int:
			lits[i] = strconv.Itoa(v)
		default:
			t.Fatalf("argument %d: %T", i, a)
		}
	}
	for _, stmt := range []string{"SET plan_cache_mode = force_generic_plan", "PREPARE page AS " + query} {
		if _, err := conn.Exec(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	rows, err := conn.Query(ctx, "EXPLAIN EXECUTE page("+strings.Join(lits, ", ")+")")
	if err != nil {
		t.Fatal(err)
	}
	var plan []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, line)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if text := strings.Join(plan, "\n"); !strings.Contains(text, "using usage_records_customer") {
		t.Errorf("a customer's page is not read through usage_records_customer:\n%s\n(query %s)", text, query)
	}
	page, err := s.Logs(ctx, account.LogQuery{Filter: account.Filter{Customer: "c1", From: base, To: base.Add(time.Hour)}, Limit: 50})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Records) != 40 { // records 0, 500, …, 19,500, all within the hour
		t.Errorf("%d records of customer c1 in the hour, want 40", len(page.Records))
	}
	for _, r := range page.Records {
		if r.Customer != "c1" {
			t.Fatalf("record %s of customer %q in c1's page", r.RequestID, r.Customer)
		}
	}
}
