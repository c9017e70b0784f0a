package auth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"gatehouse/internal/llm"
)

// CustomerStore is what Customers needs from storage: one customer of a
// project by the ID the application sends (ErrNotFound when none).
type CustomerStore interface {
	CustomerByExternalID(ctx context.Context, projectID, externalID string) (*Customer, error)
}

// CustomersOptions tune a Customers; zero fields take the default in
// their comment.
type CustomersOptions struct {
	// RefreshAfter is the age at which a cached customer is read again in
	// the background while it goes on being served (default 5 s).
	RefreshAfter time.Duration
	// MaxAge is the age past which a cached customer is read again before
	// it is used (default 1 min); a failed read then serves the cached
	// record.
	MaxAge time.Duration
	// MissTTL is how long "no such customer" is remembered (default 5 s).
	MissTTL time.Duration
	// MaxEntries bounds the cache (default 100,000); past it, entries are
	// dropped at random and read again on next use.
	MaxEntries int
	// LookupTimeout bounds each store call (default 2 s).
	LookupTimeout time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Customers resolves the customer a request names (the
// x-gatehouse-customer header or the request's user field) through an
// in-process cache, so a known customer never costs a database round
// trip on the request path: only its first use, and a use after MaxAge
// of idleness, wait for the store; a busy customer is refreshed in the
// background every RefreshAfter. Unknown customers are remembered for
// MissTTL.
//
// Staleness: a change to a customer (budget, on_exceed) reaches a replica
// at most RefreshAfter plus one store read after it is made, for a
// customer in use; a new customer is seen within MissTTL. Safe for
// concurrent use; Close stops the background reads.
type Customers struct {
	store                   CustomerStore
	refresh, maxAge, missTT time.Duration
	timeout                 time.Duration
	max                     int
	now                     func() time.Time

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu sync.Mutex
	m  map[customerKey]*customerEntry
}

type customerKey struct{ project, external string }

// customerEntry is one cached answer. While done is open a lookup is
// filling it; c and err are written before done closes.
type customerEntry struct {
	done       chan struct{}
	c          *Customer // nil: no such customer
	err        error
	loaded     time.Time
	refreshing bool // under Customers.mu
}

// NewCustomers builds the cache over store.
func NewCustomers(store CustomerStore, o CustomersOptions) *Customers {
	cs := &Customers{store: store, refresh: orDefault(o.RefreshAfter, 5*time.Second), maxAge: orDefault(o.MaxAge, time.Minute),
		missTT: orDefault(o.MissTTL, 5*time.Second), timeout: orDefault(o.LookupTimeout, 2*time.Second),
		max: orDefault(o.MaxEntries, 100_000), now: o.Now, m: map[customerKey]*customerEntry{}}
	if cs.now == nil {
		cs.now = time.Now
	}
	cs.maxAge = max(cs.maxAge, cs.refresh)
	cs.ctx, cs.cancel = context.WithCancel(context.Background())
	return cs
}

// Close stops background refreshes and waits for them.
func (cs *Customers) Close() {
	cs.cancel()
	cs.wg.Wait()
}

// ErrCustomersUnavailable is the 503 a request gets when its customer
// cannot be read (store down, not cached).
var ErrCustomersUnavailable = &llm.Error{Kind: llm.KindUnavailable, Status: http.StatusServiceUnavailable, Type: "server_error",
	Code: "customer_lookup_unavailable", Message: "The gateway could not look up the request's customer; try again shortly.", RetryAfter: time.Second}

// Lookup returns the customer of project with the given external ID, or
// nil when there is none.
func (cs *Customers) Lookup(ctx context.Context, projectID, externalID string) (*Customer, error) {
	k := customerKey{projectID, externalID}
	now := cs.now()
	cs.mu.Lock()
	e := cs.m[k]
	if e != nil {
		select {
		case <-e.done:
			age := now.Sub(e.loaded)
			ttl := cs.maxAge
			if e.c == nil {
				ttl = cs.missTT
			}
			switch {
			case e.err == nil && age < cs.refresh:
				cs.mu.Unlock()
				return e.c, nil
			case e.err == nil && age < ttl:
				if !e.refreshing {
					e.refreshing = true
					cs.wg.Add(1)
					go cs.refreshEntry(k, e)
				}
				cs.mu.Unlock()
				return e.c, nil
			}
			// Too old, or a failed lookup: read again, below, keeping
			// the old answer for a store failure.
		default:
			cs.mu.Unlock()
			return cs.wait(ctx, e)
		}
	}
	old := e
	e = &customerEntry{done: make(chan struct{})}
	cs.put(k, e)
	cs.mu.Unlock()

	c, err := cs.read(ctx, k)
	e.c, e.err, e.loaded = c, err, cs.now()
	if err != nil && old != nil && old.err == nil {
		// Serve what was known, as if it were due for a refresh: the
		// store is tried again in the background, one read at a time,
		// and no request waits on it meanwhile.
		// A remembered miss is simply remembered for another MissTTL.
		e.c, e.err = old.c, nil
		if old.c != nil {
			e.loaded = e.loaded.Add(-cs.refresh)
		}
		close(e.done)
		return old.c, nil
	}
	close(e.done)
	if err != nil {
		cs.mu.Lock()
		if cs.m[k] == e {
			delete(cs.m, k) // do not cache failures
		}
		cs.mu.Unlock()
		return nil, err
	}
	return c, nil
}

func (cs *Customers) wait(ctx context.Context, e *customerEntry) (*Customer, error) {
	select {
	case <-e.done:
		return e.c, e.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// put stores e, dropping an entry at random when the cache is full.
func (cs *Customers) put(k customerKey, e *customerEntry) {
	if _, ok := cs.m[k]; !ok && len(cs.m) >= cs.max {
		for victim := range cs.m {
			delete(cs.m, victim)
			break
		}
	}
	cs.m[k] = e
}

func (cs *Customers) read(ctx context.Context, k customerKey) (*Customer, error) {
	ctx, cancel := context.WithTimeout(ctx, cs.timeout)
	defer cancel()
	c, err := cs.store.CustomerByExternalID(ctx, k.project, k.external)
	if errors.Is(err, ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCustomersUnavailable, err)
	}
	return c, nil
}

// refreshEntry reads k again in the background and replaces e when the
// read succeeds.
func (cs *Customers) refreshEntry(k customerKey, e *customerEntry) {
	defer cs.wg.Done()
	c, err := cs.read(cs.ctx, k)
	cs.mu.Lock()
	defer cs.mu.Unlock()
	e.refreshing = false
	if err != nil || cs.m[k] != e {
		return
	}
	n := &customerEntry{done: make(chan struct{}), c: c, loaded: cs.now()}
	close(n.done)
	cs.m[k] = n
}
