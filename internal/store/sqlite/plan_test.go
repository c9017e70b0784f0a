package sqlite

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
)

// TestRecordBatchPlans holds the readers' walks over record_batches to
// the max_time index, as EXPLAIN QUERY PLAN reports it: a walk newest
// first from a keyset position must seek, not scan the table and sort
// it (the log viewer's first page would read every batch's summary).
// The file is un-ANALYZEd, as gatehouse leaves it.
func TestRecordBatchPlans(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "plan.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, c := range []struct {
		name, query string
		args        []any
		want        string
	}{
		{"summaries of a window", chunkSQL, []any{int64(0), int64(1 << 60), int64(1 << 62), int64(1 << 62), batchChunk},
			"SEARCH record_batches USING INDEX record_batches_max_time (max_time>? AND max_time<?)"},
		{"id hashes", idsChunkSQL, []any{int64(1 << 62), int64(1 << 62), batchChunk},
			"SEARCH record_batches USING INDEX record_batches_max_time (max_time<?)"},
		{"batches meeting a window (replay check)", overlapSQL, []any{int64(0), int64(1)},
			"SEARCH record_batches USING INDEX record_batches_max_time (max_time>?)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			rows, err := s.r.QueryContext(ctx, "EXPLAIN QUERY PLAN "+c.query, c.args...)
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			var plan []string
			for rows.Next() {
				var id, parent, notused int
				var detail string
				if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
					t.Fatal(err)
				}
				plan = append(plan, detail)
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
			if len(plan) != 1 || plan[0] != c.want {
				t.Errorf("plan %q, want only %q", plan, c.want)
			}
			if strings.Contains(strings.Join(plan, ";"), "TEMP B-TREE") {
				t.Errorf("plan sorts: %q", plan)
			}
		})
	}
}
