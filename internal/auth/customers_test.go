package auth

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// customerStore counts reads and can fail.
type customerStore struct {
	mu    sync.Mutex
	recs  map[string]*Customer
	reads atomic.Int64
	fail  atomic.Bool
}

func (s *customerStore) CustomerByExternalID(_ context.Context, project, ext string) (*Customer, error) {
	s.reads.Add(1)
	if s.fail.Load() {
		return nil, errors.New("database down")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.recs[project+"/"+ext]
	if !ok {
		return nil, ErrNotFound
	}
	cp := *c
	return &cp, nil
}

func (s *customerStore) set(project, ext string, daily float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.recs[project+"/"+ext] = &Customer{ID: "cus_" + ext, ProjectID: project, ExternalID: ext, DailyUSD: &daily}
}

type clock struct{ ns atomic.Int64 }

func (c *clock) now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *clock) advance(d time.Duration) { c.ns.Add(int64(d)) }
func waitReads(t *testing.T, s *customerStore, n int64) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); s.reads.Load() < n; {
		if time.Now().After(deadline) {
			t.Fatalf("%d store reads, want %d", s.reads.Load(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestCustomersCache(t *testing.T) {
	st := &customerStore{recs: map[string]*Customer{}}
	st.set("p", "alice", 1)
	clk := &clock{}
	clk.ns.Store(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	cs := NewCustomers(st, CustomersOptions{RefreshAfter: 5 * time.Second, MaxAge: time.Minute, MissTTL: 5 * time.Second, Now: clk.now})
	defer cs.Close()
	ctx := context.Background()

	// Concurrent first uses share one read; later ones read nothing.
	var wg sync.WaitGroup
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if c, err := cs.Lookup(ctx, "p", "alice"); err != nil || c == nil || *c.DailyUSD != 1 {
				t.Errorf("lookup: %v %v", c, err)
			}
		}()
	}
	wg.Wait()
	for range 100 {
		cs.Lookup(ctx, "p", "alice")
	}
	if n := st.reads.Load(); n != 1 {
		t.Fatalf("%d store reads for one customer, want 1", n)
	}

	// Past RefreshAfter the cached record is served and read again in
	// the background: the change shows on a later request.
	st.set("p", "alice", 2)
	clk.advance(6 * time.Second)
	if c, _ := cs.Lookup(ctx, "p", "alice"); *c.DailyUSD != 1 {
		t.Fatalf("stale read did not serve the cached record: %v", *c.DailyUSD)
	}
	waitReads(t, st, 2)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		if c, _ := cs.Lookup(ctx, "p", "alice"); *c.DailyUSD == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("refreshed record never served")
		}
	}

	// Unknown customers are remembered for MissTTL.
	before := st.reads.Load()
	for range 10 {
		if c, err := cs.Lookup(ctx, "p", "nobody"); c != nil || err != nil {
			t.Fatalf("unknown: %v %v", c, err)
		}
	}
	if n := st.reads.Load() - before; n != 1 {
		t.Fatalf("%d reads for a repeated unknown customer, want 1", n)
	}

	// Store down: a known customer is still served; an uncached one is
	// a 503, not "no customer" (which would skip its budget).
	st.fail.Store(true)
	clk.advance(2 * time.Minute)
	if c, err := cs.Lookup(ctx, "p", "alice"); err != nil || c == nil {
		t.Fatalf("known customer while the store is down: %v %v", c, err)
	}
	if _, err := cs.Lookup(ctx, "p", "bob"); !errors.Is(err, ErrCustomersUnavailable) {
		t.Fatalf("uncached customer while the store is down: %v", err)
	}
}
