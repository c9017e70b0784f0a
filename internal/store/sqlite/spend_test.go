package sqlite

import (
	"context"
	"path/filepath"
	"testing"

	"gatehouse/internal/limit"
	"gatehouse/internal/limit/limittest"
)

func TestSpendStore(t *testing.T) {
	var path string
	var cur *Store
	open := func(t *testing.T) limit.SpendStore {
		path = filepath.Join(t.TempDir(), "gatehouse.db")
		s, err := Open(context.Background(), path)
		if err != nil {
			t.Fatal(err)
		}
		cur = s
		t.Cleanup(func() { s.Close() })
		return s
	}
	reopen := func(t *testing.T) limit.SpendStore {
		cur.Close()
		s, err := Open(context.Background(), path)
		if err != nil {
			t.Fatal(err)
		}
		cur = s
		t.Cleanup(func() { s.Close() })
		return s
	}
	limittest.RunSpendStore(t, open, reopen)
}
