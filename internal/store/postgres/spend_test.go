package postgres

import (
	"testing"

	"gatehouse/internal/limit"
	"gatehouse/internal/limit/limittest"
)

func TestSpendStore(t *testing.T) {
	var dsn string
	var cur *Store
	open := func(t *testing.T) limit.SpendStore {
		dsn = testDSN(t)
		cur = openTest(t, dsn)
		s := cur
		t.Cleanup(func() { s.Close() })
		return s
	}
	reopen := func(t *testing.T) limit.SpendStore {
		cur.Close()
		cur = openTest(t, dsn)
		s := cur
		t.Cleanup(func() { s.Close() })
		return s
	}
	limittest.RunSpendStore(t, open, reopen)
}
