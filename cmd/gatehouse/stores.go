package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"gatehouse/internal/account"
	"gatehouse/internal/admin"
	"gatehouse/internal/audit"
	"gatehouse/internal/auth"
	"gatehouse/internal/cache"
	"gatehouse/internal/config"
	"gatehouse/internal/framing"
	"gatehouse/internal/limit"
	"gatehouse/internal/route"
	"gatehouse/internal/store/postgres"
	"gatehouse/internal/store/redis"
	"gatehouse/internal/store/sqlite"
	"gatehouse/internal/tokens"
)

// stores are what a gatehouse process opens once and keeps across config
// reloads: the record store of projects, keys and customers, the key and
// customer caches over it that the request path reads, and the admitter
// whose counters must outlive any reload. A bare proxy has none of them.
type stores struct {
	desc      string // what was opened, for logs: never a DSN (it may hold a password)
	conf      config.Storage
	limits    config.Limits
	store     auth.Store
	keys      *auth.Keys
	memo      *auth.HashMemo // secret → SHA-256 of keys that resolved, across reloads
	customers *auth.Customers
	limiter   *admitter
	prices    *priceSync
	usage     config.Usage
	sink      *account.Sink // nil when usage records are off
	cache     *cache.Cache  // the exact response cache; its tiers live across reloads
	cacheConf config.ExactCache
	// vectors is the semantic cache's index, made when a config first
	// names an embedder: pgvector in cluster mode when the server has
	// it, else in-process (persisted by vectorLog in embedded mode).
	vectors   cache.VectorIndex
	vectorLog *cache.VectorLog
}

// semanticIndex returns the process's vector index, making it (and
// loading what the store kept of it) the first time a config asks.
func (s *stores) semanticIndex(sc config.SemanticCache, log *slog.Logger) cache.VectorIndex {
	if s.vectors != nil {
		return s.vectors
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if pg, ok := s.store.(*postgres.Store); ok {
		idx, err := pg.NewVectorIndex(ctx, sc.MaxEntries)
		if err == nil {
			log.Info("semantic cache: vectors in PostgreSQL (pgvector), shared by every replica")
			s.vectors = idx
			return idx
		}
		log.Warn("semantic cache: no pgvector on the PostgreSQL server; each replica keeps its own index in memory", "error", err.Error())
	}
	local := cache.LocalIndex{Vectors: cache.NewVectors(0, sc.MaxEntries)}
	if vs, ok := s.store.(cache.VectorStore); ok {
		if n, err := cache.LoadVectors(ctx, vs, local.Vectors); err != nil {
			log.Warn("semantic cache: could not load the stored vectors", "error", err.Error())
		} else if n > 0 {
			log.Info("semantic cache: vectors loaded", "vectors", n)
		}
		s.vectorLog = cache.NewVectorLog(vs, func(err error) { log.Warn("semantic cache: vector not kept", "error", err.Error()) })
		local.Log = s.vectorLog
	}
	s.vectors = local
	return local
}

// overlay is the store's prices for the catalog; nil without a store.
func (s *stores) overlay() *tokens.Overlay {
	if s.prices == nil {
		return nil
	}
	return &s.prices.overlay
}

// openStores opens the store the config names: PostgreSQL in cluster
// mode (storage.postgres and storage.redis both set), else the SQLite
// file, whose directory is created if needed.
func openStores(cfg *config.Config, bare bool, log *slog.Logger, p pacing) (*stores, error) {
	s := &stores{conf: cfg.Storage, limits: cfg.Limits, usage: cfg.Usage}
	if bare {
		s.desc = "none (bare proxy)"
		return s, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var err error
	var spend limit.SpendStore
	if cfg.Cluster() {
		s.desc = "postgres"
		var pg *postgres.Store
		if pg, err = postgres.Open(ctx, cfg.Storage.Postgres); err == nil {
			s.store, spend = pg, pg
		}
	} else {
		s.desc = "sqlite " + cfg.Storage.SQLite
		if dir := filepath.Dir(cfg.Storage.SQLite); dir != "" {
			if err := os.MkdirAll(dir, 0o700); err != nil {
				return nil, fmt.Errorf("storage.sqlite: %w", err)
			}
		}
		var sq *sqlite.Store
		if sq, err = sqlite.OpenWith(ctx, cfg.Storage.SQLite, sqlite.Options{Log: log}); err == nil {
			s.store, spend = sq, sq
		}
	}
	if err != nil {
		return nil, fmt.Errorf("open the record store (%s): %w", s.desc, err)
	}
	if s.limiter, err = openAdmitter(ctx, cfg, spend, log, p); err != nil {
		s.store.Close()
		return nil, err
	}
	ps, ok := s.store.(tokens.PriceStore)
	if !ok {
		_ = s.limiter.close()
		s.store.Close()
		return nil, fmt.Errorf("the record store (%s) keeps no prices", s.desc)
	}
	every := time.Duration(0) // embedded: only this process writes, and it reloads at once
	if cfg.Cluster() {
		every = priceRefresh
	}
	if s.prices, err = startPriceSync(ctx, ps, every, log); err != nil {
		_ = s.limiter.close()
		s.store.Close()
		return nil, err
	}
	if cfg.Usage.RecordsOn() {
		if s.sink, err = openSink(s.store, cfg.Usage, log, p); err != nil {
			s.prices.stop()
			_ = s.limiter.close()
			s.store.Close()
			return nil, err
		}
	}
	s.cacheConf = cfg.Cache.Exact
	// Behind the in-process tier: Redis in cluster mode, shared by every
	// replica; the SQLite file in embedded mode.
	var lower cache.Store
	if s.limiter.redis != nil {
		lower = redis.NewCache(s.limiter.redis, cfg.Limits.RedisPrefix)
	} else if l, ok := s.store.(cache.Store); ok {
		lower = l
	}
	s.cache = cache.New(cache.Options{MaxBytes: cfg.Cache.Exact.MaxBytes, Lower: lower,
		OnLowerError: func(op string, err error) { log.Warn("cache tier failed", "op", op, "error", err.Error()) }})
	s.customers = auth.NewCustomers(s.store, auth.CustomersOptions{})
	s.memo = auth.NewHashMemo()
	// The cache lives until close, across reloads; the config's static
	// keys, which reloads change, are looked up in front of it.
	s.keys, err = auth.NewKeys(context.Background(), s.store, nil, auth.KeysOptions{Logger: log,
		FlushEvery: p.or(0), RefreshAfter: p.or(0), MaxAge: p.or(0)})
	if err != nil {
		s.customers.Close()
		s.closeSink()
		s.prices.stop()
		_ = s.limiter.close()
		s.store.Close()
		return nil, err
	}
	return s, nil
}

// openSink starts the usage-record sink over the record store.
func openSink(st auth.Store, u config.Usage, log *slog.Logger, p pacing) (*account.Sink, error) {
	rs, ok := st.(account.RecordStore)
	if !ok {
		return nil, fmt.Errorf("the record store keeps no usage records (set usage.records: false)")
	}
	o := account.SinkOptions{Queue: u.Queue, SpillDir: u.SpillDir, Retention: u.Retention.D(), Log: log}
	if p.sinkBatch > 0 {
		o.Batch, o.Interval = p.sinkBatch, paceNever
	}
	sink, err := account.NewSink(rs, o)
	if err != nil {
		return nil, fmt.Errorf("usage records: %w", err)
	}
	return sink, nil
}

// closeSink drains the usage records still queued (to the store, or to
// the spill file when the store fails) within sinkDrain.
func (s *stores) closeSink() error {
	if s.sink == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), sinkDrain)
	defer cancel()
	return s.sink.Close(ctx)
}

// sinkDrain bounds the wait for the last usage records at shutdown; the
// records in flight past it stay in the spill file for the next start.
const sinkDrain = 30 * time.Second

// close settles and flushes the admitter's spend (the server has drained
// by now), writes the last batch of last-used times and closes the store.
func (s *stores) close() error {
	if s == nil || s.store == nil {
		return nil
	}
	s.customers.Close()
	s.prices.stop()
	s.cache.Close()
	if s.vectorLog != nil {
		s.vectorLog.Close()
	}
	sinkErr := s.closeSink() // before the store closes: the last records go to it
	return errors.Join(sinkErr, s.limiter.close(), s.keys.Close(), s.store.Close())
}

// warnChanged says so when a reload changes the storage section, which
// needs a restart: the store is opened once per process.
func (s *stores) warnChanged(cfg *config.Config, log *slog.Logger) {
	if cfg.Storage != s.conf {
		log.Warn("storage settings changed: restart gatehouse to use them; the running store stays", "store", s.desc)
	}
	if !sameUsage(cfg.Usage, s.usage) {
		log.Warn("usage settings changed: restart gatehouse to use them (body redaction rules apply at once)")
	}
	if cfg.Cache.Exact.MaxBytes != s.cacheConf.MaxBytes {
		log.Warn("cache.exact.max_bytes changed: restart gatehouse to resize the cache (enabled and ttl apply at once)")
	}
	if cfg.Limits != s.limits {
		log.Warn("limits settings changed: restart gatehouse to use them; the running admitter stays")
	}
}

// sameUsage reports whether a reload leaves the sink's settings alone
// (the bodies section applies per generation).
func sameUsage(a, b config.Usage) bool {
	return a.RecordsOn() == b.RecordsOn() && a.Retention == b.Retention && a.SpillDir == b.SpillDir && a.Queue == b.Queue
}

// clientAuth authenticates a client: the config's static keys first, in
// front of the store's keys (nil when there is no store). Its memo, the
// process's, spares a key seen before its SHA-256, and the connection's
// (connMemo) the memo's look-up for the key the connection presented
// last.
type clientAuth struct {
	static *auth.Static
	keys   *auth.Keys
	memo   *auth.HashMemo
}

func (a *clientAuth) Authenticate(r *http.Request) (*auth.Principal, error) {
	ctx := r.Context()
	return a.memo.ResolveOn(ctx, connMemo(ctx), auth.Credential(r), a)
}

// connContext is the servers' ConnContext: the connection's framing
// watcher (framing.ConnContext) and, unless bare (no keys to resolve),
// the connection's own auth.ConnMemo attached to it, where clientAuth
// finds the key the connection's requests presented last.
func connContext(bare bool) func(context.Context, net.Conn) context.Context {
	if bare {
		return framing.ConnContext
	}
	return framing.AttachingConnContext(func() any { return new(auth.ConnMemo) })
}

// connMemo is the ConnMemo attached to the connection ctx comes from
// (connContext); nil when there is none.
func connMemo(ctx context.Context) *auth.ConnMemo {
	m, _ := framing.Attached(ctx).(*auth.ConnMemo)
	return m
}

// ResolveHash looks a secret's hash up in both tables: the secret is
// hashed (or found in the memo) once for both.
func (a *clientAuth) ResolveHash(ctx context.Context, h auth.Hash) (*auth.Principal, error) {
	if p, ok := a.static.LookupHash(h); ok {
		return p, nil
	}
	if a.keys == nil {
		return nil, auth.ErrBadKey
	}
	return a.keys.ResolveHash(ctx, h)
}

// adminHandler builds the admin API for one config generation; nil when
// the config has no admin_key (the server answers 404 then). routes is the
// generation's own table, so /admin/models shows the routing that serves
// requests.
func (s *stores) adminHandler(cfg *config.Config, clients auth.Authenticator, served func(string) bool,
	sessions admin.SessionAuthorizer, routes *route.Table, log *slog.Logger) (http.Handler, error) {
	if !cfg.HasAdmin() || s.store == nil {
		return nil, nil
	}
	names := make([]string, 0, len(cfg.Keys))
	for _, k := range cfg.Keys {
		names = append(names, k.Project)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	projects, err := admin.EnsureProjects(ctx, s.store, names)
	if err != nil {
		return nil, err
	}
	loaded := time.Now().UTC().Truncate(time.Second)
	static := make([]auth.Key, 0, len(cfg.Keys))
	for _, k := range cfg.Keys {
		rec := auth.Key{
			ID:          staticKeyID(k),
			ProjectID:   projects[k.Project],
			Name:        k.Name,
			Limits:      auth.Limits{RPM: k.RPM, TPM: k.TPM},
			ModelLimits: modelLimits(k.ModelLimits),
			Models:      k.Models,
			Providers:   k.Providers,
			NoCache:     k.NoCache,
			CreatedAt:   loaded,
			UpdatedAt:   loaded,
		}
		if k.Budget != nil {
			rec.Budget = &auth.Budget{USD: k.Budget.USD, Period: k.Budget.Period}
		}
		static = append(static, rec)
	}
	configPrices := make(map[string]tokens.StoredPrice, len(cfg.Pricing.Overrides))
	for model, p := range cfg.Pricing.Overrides {
		configPrices[model] = tokens.StoredPrice{Model: model, Input: p.Input, CachedInput: p.CachedInput, Output: p.Output}
	}
	usage, _ := s.store.(account.Querier)
	auditLog, _ := s.store.(audit.Store)
	var budgets admin.Budgets
	if s.limiter != nil {
		budgets = s.limiter.spend.withKeys(cfg.Keys)
	}
	return admin.New(admin.Options{
		Budgets:       budgets,
		Usage:         usage,
		Audit:         auditLog,
		Cache:         s.cache,
		Semantic:      cfg.Cache.Semantic.Embedder.Provider != "",
		Prices:        s.prices.store,
		ConfigPrices:  configPrices,
		PricesChanged: s.prices.load,
		Store:         s.store,
		Admins:        adminCredentials(cfg),
		Static:        static,
		Clients:       clients,
		Sessions:      sessions,
		Routes:        routes.Snapshot,
		Route:         routes.State,
		Served:        served,
		Provider:      configuredProvider(cfg),
		Log:           log,
	}), nil
}

// configuredProvider says whether cfg names a provider: the admin API
// refuses a key's or project's providers that name no provider of this
// config generation.
func configuredProvider(cfg *config.Config) func(string) bool {
	names := make(map[string]bool, len(cfg.Providers))
	for _, p := range cfg.Providers {
		names[p.Name] = true
	}
	return func(name string) bool { return names[name] }
}
