package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"gatehouse/internal/responses"
	"gatehouse/internal/store/sqlite"
)

// TestPruneResponses: retention removes the stored responses older than
// the cut, in as many batches as it takes, and keeps the newer.
func TestPruneResponses(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "g.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	now := time.Now()
	old := responsePruneBatch*2 + 3 // three batches
	for i := range old + 5 {
		at := now.Add(-100 * 24 * time.Hour)
		if i >= old {
			at = now.Add(-time.Hour)
		}
		r := &responses.Stored{ID: fmt.Sprintf("resp_%d", i), Project: "config:qa", Model: "chat", CreatedAt: at,
			Response: []byte(`{}`), Items: []byte(`[]`)}
		if err := st.PutResponse(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if n := pruneResponses(ctx, st, now.Add(-90*24*time.Hour), log); n != old {
		t.Fatalf("pruned %d, want %d", n, old)
	}
	for i := range old + 5 {
		_, ok, err := st.Response(ctx, "config:qa", fmt.Sprintf("resp_%d", i))
		if err != nil || ok != (i >= old) {
			t.Fatalf("resp_%d: kept %v (%v)", i, ok, err)
		}
	}
}
