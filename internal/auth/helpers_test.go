package auth_test

import (
	"context"
	"errors"
	"net/http"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gatehouse/internal/auth"
	"gatehouse/internal/llm"
	"gatehouse/internal/store/sqlite"
)

// clock is a fake time source, safe for concurrent use.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// spy wraps a real store to count lookups, fail them, hold them, or feed
// KeyChanges by hand.
type spy struct {
	auth.Store
	lookups atomic.Int64
	reads   atomic.Int64 // lookups whose read of the store is done
	fail    atomic.Bool
	gate    chan struct{} // if set, each lookup waits for a receive after reading
	changes chan auth.Hash
}

var errDown = errors.New("connection refused")

func (s *spy) KeyByHash(ctx context.Context, h auth.Hash) (*auth.Key, *auth.Project, error) {
	s.lookups.Add(1)
	if s.fail.Load() {
		return nil, nil, errDown
	}
	k, p, err := s.Store.KeyByHash(ctx, h)
	s.reads.Add(1)
	if s.gate != nil {
		<-s.gate
	}
	return k, p, err
}

func (s *spy) KeyChanges(ctx context.Context) (<-chan auth.Hash, error) {
	if s.changes != nil {
		return s.changes, nil
	}
	return s.Store.KeyChanges(ctx)
}

// deliver hands h to the watcher and returns once it has been applied:
// the channel is unbuffered, so the second send completes only after the
// watcher has finished with the first.
func (s *spy) deliver(h auth.Hash) {
	s.changes <- h
	s.changes <- auth.HashKey("sync")
}

func openSQLite(t testing.TB) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "gatehouse.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func newKeys(t testing.TB, st auth.KeyStore, opts auth.KeysOptions, static ...auth.StaticKey) *auth.Keys {
	t.Helper()
	k, err := auth.NewKeys(context.Background(), st, static, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { k.Close() })
	return k
}

func mustProject(t testing.TB, s auth.Store, p *auth.Project) *auth.Project {
	t.Helper()
	if err := s.CreateProject(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	return p
}

func mustKey(t testing.TB, s auth.Store, k *auth.Key, secret string) *auth.Key {
	t.Helper()
	k.Hash = auth.HashKey(secret)
	if k.Prefix == "" {
		k.Prefix = secret[:min(len(secret), 7)]
	}
	if k.Name == "" {
		k.Name = secret
	}
	if err := s.CreateKey(context.Background(), k); err != nil {
		t.Fatal(err)
	}
	return k
}

func isUnavailable(err error) bool {
	var e *llm.Error
	return errors.As(err, &e) && e.Kind == llm.KindUnavailable && e.Status == http.StatusServiceUnavailable
}

// waitBad polls until secret is refused, failing after within.
func waitBad(t *testing.T, k *auth.Keys, secret string, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		_, err := k.Resolve(context.Background(), secret)
		if err == auth.ErrBadKey {
			return time.Since(start)
		}
		if err != nil {
			t.Fatalf("while waiting for the revocation: %v", err)
		}
		if time.Since(start) > within {
			t.Fatalf("key still accepted %v after revocation", within)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
