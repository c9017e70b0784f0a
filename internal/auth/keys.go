package auth

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"gatehouse/internal/llm"
)

// KeysOptions tune a Keys. The zero value of each field means the default
// in its comment.
type KeysOptions struct {
	// MaxKeys bounds the active keys kept in memory (default 100,000).
	// Past it, keys are evicted at random and read again on next use;
	// size it above the number of keys in use.
	MaxKeys int
	// MaxMisses bounds the remembered bad hashes (default 10,000).
	MaxMisses int
	// MissTTL is how long an unknown hash is answered 401 without asking
	// the store (default 2 s). A key created with that hash ends it at
	// once through KeyChanges; the TTL bounds what a lost notification
	// costs. Revoked and expired keys are remembered for RefreshAfter.
	MissTTL time.Duration

	// MissRate and MissBurst bound how often the store is asked about a
	// hash the cache does not know, over all hashes (defaults 1,000 a
	// second in bursts of 5,000; an indexed lookup is cheap, so this is a
	// small share of what the database can serve). A flood of random keys
	// therefore costs the database at most MissRate queries a second,
	// however fast it comes; one repeated unknown key costs one query per
	// MissTTL, and concurrent first uses of a key share one query.
	//
	// The price: while the budget is spent, an uncached key is answered
	// 503 with Retry-After (auth_unavailable) without a lookup, valid or
	// not, so a key's first use during such a flood (or just after a
	// restart with more than MissBurst distinct keys arriving at once)
	// waits until the bucket refills; SDKs retry a 503 on their own. It
	// is never a 401, which would tell a valid key it is bad. Keys already
	// cached are never affected, and the refusal tells an attacker nothing
	// about which keys exist.
	MissRate  float64
	MissBurst int

	// RefreshAfter is the age at which a cached key is read again in the
	// background while it goes on being served (default 1 min): the
	// safety net under KeyChanges, which normally invalidates at once.
	// While the change feed is down it drops to 1 s.
	RefreshAfter time.Duration
	// MaxAge is the age past which a cached key (one too idle to have
	// been refreshed) is read again before it is served (default 5 min).
	// If the store fails then, the cached answer is served.
	MaxAge time.Duration
	// LookupTimeout bounds each store call (default 2 s).
	LookupTimeout time.Duration
	// FlushEvery is how often last-used times go to the store (default
	// 5 s); Close writes the last batch.
	FlushEvery time.Duration

	// Logger receives store failures (never secrets; no hashes either).
	// nil discards.
	Logger *slog.Logger
	// Now is the clock; nil means time.Now. Tests inject a fake one.
	Now func() time.Time
}

// Keys authenticates virtual keys: static keys from the config first,
// then the store's keys through an in-process cache, so a known key never
// waits on the database. It is safe for concurrent use.
//
// The cache holds what a lookup found, by hash: active keys with their
// resolved Principal, and (briefly) hashes found bad. KeyChanges drops
// what changed, so a revoked or changed key takes effect as soon as the
// store's notification arrives; a lookup that raced with the change is
// answered but not cached. Expiry is checked on every request against the
// cached time.
//
// Keys owns two goroutines, the change watcher and the last-used flusher,
// plus one per store lookup in flight; Close stops and waits for them all.
type Keys struct {
	store  KeyStore
	static atomic.Pointer[principalTable]
	cache  cache
	misses *bucket
	touch  toucher
	now    func() time.Time
	log    *slog.Logger

	missTTL       int64 // durations in ns, as the cache keeps time
	refreshAfter  int64
	maxAge        int64
	lookupTimeout time.Duration

	refreshSlots chan struct{} // bounds background refreshes in flight
	subscribed   atomic.Bool   // the change feed is up; false while it reconnects
	lastWarn     atomic.Int64  // unix ns of the last store-failure log line

	ctx    context.Context // ends at Close
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.RWMutex // guards closed against wg.Add after Close
	closed bool

	closeErr error // of the last flush, set before flushLoop ends
}

// Defaults of KeysOptions.
const (
	defaultMaxKeys       = 100_000
	defaultMaxMisses     = 10_000
	defaultMissTTL       = 2 * time.Second
	defaultMissRate      = 1000
	defaultMissBurst     = 5000
	defaultRefreshAfter  = time.Minute
	defaultMaxAge        = 5 * time.Minute
	defaultLookupTimeout = 2 * time.Second
	defaultFlushEvery    = 5 * time.Second

	// degradedRefresh is RefreshAfter while the change feed is down: the
	// promise that a revocation is seen within a second then rests on
	// re-reading.
	degradedRefresh = time.Second
	// refreshSlots bounds background refreshes, so a minute boundary with
	// thousands of busy keys cannot drain the store's connection pool.
	refreshSlots = 4
)

// NewKeys starts a Keys over store and the static keys of the config.
// It subscribes to store.KeyChanges before returning, so every change
// committed afterwards reaches the cache; the subscription and the
// last-used flusher run until ctx ends or Close is called.
func NewKeys(ctx context.Context, store KeyStore, static []StaticKey, opts KeysOptions) (*Keys, error) {
	k := &Keys{
		store:         store,
		now:           opts.Now,
		log:           opts.Logger,
		missTTL:       int64(orDefault(opts.MissTTL, defaultMissTTL)),
		refreshAfter:  int64(orDefault(opts.RefreshAfter, defaultRefreshAfter)),
		maxAge:        int64(orDefault(opts.MaxAge, defaultMaxAge)),
		lookupTimeout: orDefault(opts.LookupTimeout, defaultLookupTimeout),
		refreshSlots:  make(chan struct{}, refreshSlots),
	}
	k.SetStatic(static)
	if k.now == nil {
		k.now = time.Now
	}
	if k.log == nil {
		k.log = slog.New(slog.DiscardHandler)
	}
	k.maxAge = max(k.maxAge, k.refreshAfter)
	k.cache.init(orDefault(opts.MaxKeys, defaultMaxKeys), orDefault(opts.MaxMisses, defaultMaxMisses))
	k.misses = newBucket(orDefault(opts.MissRate, defaultMissRate), orDefault(opts.MissBurst, defaultMissBurst), k.now().UnixNano())

	k.ctx, k.cancel = context.WithCancel(ctx)
	ch, err := store.KeyChanges(k.ctx)
	if err != nil {
		k.cancel()
		return nil, fmt.Errorf("auth: subscribe to key changes: %w", err)
	}
	k.subscribed.Store(true)
	k.wg.Add(2)
	go k.watch(ch)
	go k.flushLoop(orDefault(opts.FlushEvery, defaultFlushEvery))
	return k, nil
}

// SetStatic replaces the static keys, as a config reload does; requests
// in flight finish with the table they started with.
func (k *Keys) SetStatic(static []StaticKey) {
	t := NewStatic(static).keys
	k.static.Store(&t)
}

func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// Close stops the watcher, waits for lookups in flight, and writes the
// last batch of last-used times. Cached keys keep working after Close;
// lookups fail as unavailable.
func (k *Keys) Close() error {
	k.mu.Lock()
	if k.closed {
		k.mu.Unlock()
		return nil
	}
	k.closed = true
	k.mu.Unlock()
	k.cancel()
	k.wg.Wait()
	if k.closeErr != nil {
		return fmt.Errorf("auth: last-used times: %w", k.closeErr)
	}
	return nil
}

// Authenticate resolves the request's credential (see Credential).
func (k *Keys) Authenticate(r *http.Request) (*Principal, error) {
	return k.Resolve(r.Context(), Credential(r))
}

// Resolve returns the principal of a secret: ErrMissingKey for "",
// ErrBadKey for a key that is unknown, revoked or expired (without saying
// which), and an unavailable (503) error when the store cannot answer for
// a key that is not cached. ctx bounds only this caller's wait: the
// lookup it may start is shared with concurrent callers of the same key
// and bounded by LookupTimeout.
func (k *Keys) Resolve(ctx context.Context, secret string) (*Principal, error) {
	if secret == "" {
		return nil, ErrMissingKey
	}
	return k.ResolveHash(ctx, HashKey(secret))
}

// ResolveHash is Resolve for a secret hashed already (HashKey), by a
// caller that looked it up elsewhere first: the secret is hashed once a
// request, not once a table.
func (k *Keys) ResolveHash(ctx context.Context, h Hash) (*Principal, error) {
	if p := k.static.Load().get(&h); p != nil {
		return p, nil
	}
	now := k.now().UnixNano()
	s := k.cache.shard(h)
	s.mu.RLock()
	e := s.pos[h]
	var until int64
	if e == nil {
		until = s.neg[h]
	}
	s.mu.RUnlock()
	if e != nil {
		return k.hit(ctx, h, e, now)
	}
	if now < until {
		return nil, ErrBadKey
	}
	return k.lookup(ctx, h, now)
}

// hit serves a cached key, starting a refresh when it is old.
func (k *Keys) hit(ctx context.Context, h Hash, e *entry, now int64) (*Principal, error) {
	if e.expires != 0 && now >= e.expires {
		return nil, ErrBadKey
	}
	if age := now - e.loaded; age >= k.refreshAge() {
		if age >= k.maxAge {
			return k.reload(ctx, h, e, now)
		}
		k.refresh(h, e)
	}
	k.touch.use(e, now)
	return e.p, nil
}

func (k *Keys) refreshAge() int64 {
	if k.subscribed.Load() {
		return k.refreshAfter
	}
	return min(k.refreshAfter, int64(degradedRefresh))
}

// lookup asks the store about a hash the cache does not know, joining a
// lookup of it already in flight.
func (k *Keys) lookup(ctx context.Context, h Hash, now int64) (*Principal, error) {
	s := k.cache.shard(h)
	s.mu.Lock()
	// A lookup may have finished since the read lock was let go.
	if e := s.pos[h]; e != nil {
		s.mu.Unlock()
		return k.hit(ctx, h, e, now)
	}
	if until, ok := s.neg[h]; ok && now < until {
		s.mu.Unlock()
		return nil, ErrBadKey
	}
	c := s.calls[h]
	if c == nil {
		if !k.misses.allow(now) {
			s.mu.Unlock()
			return nil, k.unavailable(errLookupsThrottled)
		}
		var err error
		if c, err = k.startLocked(s, h, nil, false); err != nil {
			s.mu.Unlock()
			return nil, err
		}
	}
	s.mu.Unlock()
	return k.await(ctx, h, c, nil, now)
}

// reload reads an idle cached key again before serving it, falling back
// to the cached answer if the store fails.
func (k *Keys) reload(ctx context.Context, h Hash, e *entry, now int64) (*Principal, error) {
	s := k.cache.shard(h)
	s.mu.Lock()
	c := s.calls[h]
	if c == nil {
		var err error
		if c, err = k.startLocked(s, h, e, false); err != nil {
			s.mu.Unlock()
			k.touch.use(e, now)
			return e.p, nil
		}
	}
	s.mu.Unlock()
	return k.await(ctx, h, c, e, now)
}

// refresh starts a background read of a cached key, unless one is under
// way or too many are.
func (k *Keys) refresh(h Hash, e *entry) {
	if !e.refreshing.CompareAndSwap(false, true) {
		return
	}
	select {
	case k.refreshSlots <- struct{}{}:
	default:
		e.refreshing.Store(false) // a later request tries again
		return
	}
	s := k.cache.shard(h)
	s.mu.Lock()
	var err error
	if s.calls[h] == nil && s.pos[h] == e {
		_, err = k.startLocked(s, h, e, true)
	} else {
		err = errors.New("superseded")
	}
	s.mu.Unlock()
	if err != nil {
		<-k.refreshSlots
		e.refreshing.Store(false)
	}
}

// startLocked registers a lookup of h in s and starts it; s.mu is held.
// stale is the cached entry it would replace, if any; slot says it holds
// one of refreshSlots.
func (k *Keys) startLocked(s *shard, h Hash, stale *entry, slot bool) (*call, error) {
	k.mu.RLock()
	defer k.mu.RUnlock()
	if k.closed {
		return nil, k.unavailable(errors.New("auth: closed"))
	}
	c := &call{done: make(chan struct{})}
	s.calls[h] = c
	k.wg.Add(1)
	go k.load(s, h, c, stale, slot)
	return c, nil
}

// load runs one store lookup and caches its answer, unless the key
// changed meanwhile. It runs under k's context rather than a request's:
// its answer is shared by every request waiting for the key and by those
// after them.
func (k *Keys) load(s *shard, h Hash, c *call, stale *entry, slot bool) {
	defer k.wg.Done()
	ctx, cancel := context.WithTimeout(k.ctx, k.lookupTimeout)
	key, proj, err := k.store.KeyByHash(ctx, h)
	cancel()
	now := k.now()
	nowN := now.UnixNano()
	var badUntil int64
	switch {
	case err == nil && key.Active(now):
		e := &entry{p: newPrincipal(key, proj), loaded: nowN}
		if key.ExpiresAt != nil {
			e.expires = key.ExpiresAt.UnixNano()
		}
		if stale != nil {
			e.used.Store(stale.used.Load()) // already recorded; no need to again
		}
		c.entry = e
	case err == nil:
		// Revoked or expired: bad until KeyChanges says the key changed.
		badUntil = nowN + k.refreshAfter
		c.err = ErrBadKey
	case errors.Is(err, ErrNotFound):
		badUntil = nowN + k.missTTL
		c.err = ErrBadKey
	default:
		c.err = k.unavailable(err)
		k.warn("auth: key lookup failed", err)
	}
	s.mu.Lock()
	if s.calls[h] == c {
		delete(s.calls, h)
	}
	if !c.stale {
		switch {
		case c.entry != nil:
			s.putPosLocked(h, c.entry)
		case badUntil != 0:
			s.putNegLocked(h, badUntil, nowN)
		}
	}
	s.mu.Unlock()
	if stale != nil {
		stale.refreshing.Store(false)
	}
	if slot {
		<-k.refreshSlots
	}
	close(c.done)
}

// await waits for a lookup. stale, if not nil, is the cached entry the
// lookup re-reads, served when the store fails and it is still cached.
func (k *Keys) await(ctx context.Context, h Hash, c *call, stale *entry, now int64) (*Principal, error) {
	select {
	case <-c.done:
	case <-ctx.Done():
		return nil, &llm.Error{Kind: llm.KindCanceled, Status: 499, Message: "client closed the request", Cause: ctx.Err()}
	}
	if e := c.entry; e != nil {
		k.touch.use(e, now)
		return e.p, nil
	}
	if stale != nil && c.err != ErrBadKey {
		// The store failed. Locking out a key that worked a minute ago
		// over a database blip is worse than serving it a while longer;
		// a revocation meanwhile has removed it from the cache.
		s := k.cache.shard(h)
		s.mu.RLock()
		cached := s.pos[h] == stale
		s.mu.RUnlock()
		if cached {
			k.touch.use(stale, now)
			return stale.p, nil
		}
	}
	return nil, c.err
}

// errLookupsThrottled is the cause of a 503 while misses are rate limited.
var errLookupsThrottled = errors.New("auth: store lookups for unknown keys are being throttled")

// unavailable is the 503 for a key the store could not be asked about.
// Never a 401: a valid key must not be told it is bad when the database
// blips.
func (k *Keys) unavailable(cause error) *llm.Error {
	return &llm.Error{Kind: llm.KindUnavailable, Status: http.StatusServiceUnavailable, Type: "server_error",
		Code: "auth_unavailable", Message: "API keys cannot be checked right now; please retry shortly.",
		RetryAfter: time.Second, Cause: cause}
}

// warn logs a store failure at most once a second: during an outage every
// miss fails, and the log must not become a second outage.
func (k *Keys) warn(msg string, err error) {
	now := time.Now().UnixNano()
	last := k.lastWarn.Load()
	if now-last < int64(time.Second) || !k.lastWarn.CompareAndSwap(last, now) {
		return
	}
	k.log.Warn(msg, slog.Any("error", err))
}

// watch applies the store's change feed to the cache until k closes. If
// the store ends the feed early it resubscribes, dropping everything
// cached on both sides of the gap.
func (k *Keys) watch(ch <-chan Hash) {
	defer k.wg.Done()
	for {
		select {
		case h, ok := <-ch:
			if ok {
				if h.IsZero() {
					k.cache.clear()
				} else {
					k.cache.drop(h)
				}
				continue
			}
			if k.ctx.Err() != nil {
				return
			}
			k.subscribed.Store(false)
			k.cache.clear()
			k.log.Warn("auth: key change feed ended; resubscribing")
			if ch = k.resubscribe(); ch == nil {
				return
			}
			k.cache.clear() // what changed between the feeds went unheard
			k.subscribed.Store(true)
		case <-k.ctx.Done():
			return
		}
	}
}

// resubscribe retries KeyChanges with backoff until it succeeds or k
// closes (nil).
func (k *Keys) resubscribe() <-chan Hash {
	wait := 100 * time.Millisecond
	for {
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-k.ctx.Done():
			t.Stop()
			return nil
		}
		ch, err := k.store.KeyChanges(k.ctx)
		if err == nil {
			return ch
		}
		k.warn("auth: resubscribe to key changes", err)
		wait = min(2*wait, 5*time.Second)
	}
}

// newPrincipal resolves what a key may do from its record and its
// project's.
func newPrincipal(k *Key, p *Project) *Principal {
	pr := &Principal{
		KeyID:     k.ID,
		Name:      k.Name,
		ProjectID: k.ProjectID,
		RPM:       k.RPM,
		TPM:       k.TPM,
		Budget:    k.Budget,
		NoCache:   k.NoCache,
	}
	if len(k.ModelLimits) > 0 {
		pr.ModelLimits = maps.Clone(k.ModelLimits)
	}
	if k.ExpiresAt != nil {
		pr.ExpiresAt = *k.ExpiresAt
	}
	var projModels, projProviders []string
	var projLabels map[string]string
	if p != nil {
		pr.Project = p.Name
		pr.ProjectLimits = p.Limits
		pr.ProjectBudget = p.Budget
		pr.Cache = p.Cache
		pr.LogBodies = p.LogBodies
		projModels, projProviders, projLabels = p.Models, p.Providers, p.Labels
	}
	pr.Models = allowedModels(k.Models, projModels)
	pr.Providers = allowedModels(k.Providers, projProviders)
	if len(projLabels)+len(k.Labels) > 0 {
		pr.Labels = make(map[string]string, len(projLabels)+len(k.Labels))
		for n, v := range projLabels {
			pr.Labels[n] = v
		}
		for n, v := range k.Labels {
			pr.Labels[n] = v
		}
	}
	pr.quoteNames()
	return pr
}

// allowedModels is the key's list within the project's: nil when neither
// restricts, and an empty (not nil) set when the lists share nothing.
// Provider lists combine the same way.
func allowedModels(key, project []string) map[string]bool {
	if len(key) == 0 && len(project) == 0 {
		return nil
	}
	set := make(map[string]bool)
	switch {
	case len(key) == 0:
		for _, m := range project {
			set[m] = true
		}
	case len(project) == 0:
		for _, m := range key {
			set[m] = true
		}
	default:
		inProject := make(map[string]bool, len(project))
		for _, m := range project {
			inProject[m] = true
		}
		for _, m := range key {
			if inProject[m] {
				set[m] = true
			}
		}
	}
	return set
}

var (
	_ Authenticator = (*Keys)(nil)
	_ Authenticator = (*Static)(nil)
)
