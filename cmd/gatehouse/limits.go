package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/redis/rueidis"

	"gatehouse/internal/config"
	"gatehouse/internal/limit"
	"gatehouse/internal/metrics"
	"gatehouse/internal/store/redis"
	"gatehouse/internal/tokens"
)

// settleAttempts is how often the Redis limiter tries one settlement: its
// backoff doubles from 50 ms, so ten attempts span about 25 s. A request
// admitted just before Redis went away settles into the queue before the
// Fallback knows of the outage (the settlements after that it holds back
// itself); were the settlement dropped, its worst case would stay
// reserved. An outage longer than this still drops the few that were
// being retried when it began (the log says so).
const settleAttempts = 10

// admitter is the process's one admission backend: it lives across
// config reloads (its counters and unflushed spend are the state that
// must not reset) and closes after the server has drained.
type admitter struct {
	admitter limit.Admitter
	closers  []func(context.Context) error // in order
	// redis is the cluster's Redis client (nil in embedded mode), which
	// the response cache's Redis tier shares; closed by closers.
	redis rueidis.Client
	// spend reads the budget counters for the admin API.
	spend *budgetSpend
	// settles reads the Redis limiter's settle queue (nil in embedded
	// mode), for the metrics.
	settles func() metrics.SettleStats
	// admits reads the Redis limiter's admission counters (nil in
	// embedded mode), for the metrics.
	admits func() metrics.AdmitStats
	// leaser holds this replica's leases when limits.lease is on (nil
	// otherwise): a reload hands them back.
	leaser *limit.Leaser
}

// openAdmitter builds the admitter the storage mode calls for.
//
// Embedded: in-process counters, spend persisted to the SQLite store and
// loaded back at start. Cluster: the Redis limiter (one script call per
// admission; with limits.lease, a Leaser in front of it admitting against
// batches taken from it), spend recorded in PostgreSQL and used to
// re-seed counters Redis lost, behind a Fallback applying
// limits.failure_policy while Redis cannot be reached.
func openAdmitter(ctx context.Context, cfg *config.Config, spend limit.SpendStore, log *slog.Logger, p pacing) (*admitter, error) {
	l := cfg.Limits
	if !cfg.Cluster() {
		e, err := limit.NewEmbedded(ctx, limit.Options{Spend: spend, FlushEvery: p.or(l.FlushEvery.D()), SweepEvery: p.or(0), Log: log})
		if err != nil {
			return nil, err
		}
		return &admitter{admitter: e, closers: []func(context.Context) error{e.Close}, spend: &budgetSpend{embedded: e}}, nil
	}
	client, err := redis.NewClient(cfg.Storage.Redis)
	if err != nil {
		return nil, fmt.Errorf("storage.redis: %w", err)
	}
	rl, err := redis.New(ctx, client, redis.Options{Prefix: l.RedisPrefix, Timeout: l.RedisTimeout.D(), SettleQueue: l.SettleQueue,
		SettleAttempts: settleAttempts, Spend: spend, FlushEvery: l.FlushEvery.D(), Log: log,
		ReservationTTL: l.ReservationTTL.D(), SweepEvery: sweepEvery(l.ReservationTTL.D())})
	if err != nil {
		client.Close()
		return nil, err
	}
	if n, err := rl.Seed(ctx); err != nil {
		log.Warn("could not restore budget counters from the spend record", "error", err.Error())
	} else if n > 0 {
		log.Info("restored budget counters Redis had lost", "counters", n)
	}
	a := &admitter{closers: []func(context.Context) error{rl.Close, closeClient(client)}, redis: client, spend: &budgetSpend{redis: rl},
		settles: func() metrics.SettleStats { return metrics.SettleStats(rl.SettleStats()) },
		admits:  func() metrics.AdmitStats { return metrics.AdmitStats(rl.AdmitStats()) }}
	var primary limit.Admitter = rl
	if l.Lease.Enabled {
		// Leases in front of Redis: admissions come out of capacity taken
		// in batches; given back before the limiter closes.
		a.leaser = limit.NewLeaser(rl, limit.LeaseOptions{Fraction: l.Lease.Fraction, Idle: l.Lease.Idle.D(), Log: log})
		a.closers = append([]func(context.Context) error{a.leaser.Close}, a.closers...)
		primary = a.leaser
	}
	fb := &limit.Fallback{Primary: primary, Policy: limit.FailurePolicy(l.FailurePolicy), Replicas: l.Replicas, Cooldown: l.Cooldown.D(),
		OnDegraded: func(err error) {
			log.Warn("rate limits: Redis unavailable", "policy", l.FailurePolicy, "error", err.Error())
		}}
	if fb.Policy == limit.FailOpen {
		// The local limiter counts each replica's share from zero (it
		// cannot see what the others spent) but still records what it
		// settles in the durable spend record.
		local, err := limit.NewEmbedded(ctx, limit.Options{Spend: recordOnly{spend}, FlushEvery: l.FlushEvery.D(), Log: log})
		if err != nil {
			_ = a.close()
			return nil, err
		}
		fb.Local = local
		a.closers = append(a.closers, local.Close)
	}
	// Spend the local limiter settled in an outage goes to Redis before
	// the client closes.
	a.closers = append([]func(context.Context) error{fb.Close}, a.closers...)
	a.admitter = fb
	return a, nil
}

// leaseReleaseTimeout bounds handing the leases back on a reload.
const leaseReleaseTimeout = 5 * time.Second

// releaseLeases hands back every lease this replica holds, after a
// reload: the limits they were taken under may have changed, and the
// next request takes new ones. A failure is only logged: what could not
// be handed back is retried by the Leaser's own sweep.
func (a *admitter) releaseLeases(log *slog.Logger) {
	if a == nil || a.leaser == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), leaseReleaseTimeout)
	defer cancel()
	if err := a.leaser.Release(ctx); err != nil {
		log.Warn("rate limits: handing back leases after the reload failed; will retry", "error", err.Error())
	}
}

func closeClient(c rueidis.Client) func(context.Context) error {
	return func(context.Context) error { c.Close(); return nil }
}

// close settles what is queued and writes the spend not yet flushed.
func (a *admitter) close() error {
	if a == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var errs []error
	for _, c := range a.closers {
		errs = append(errs, c(ctx))
	}
	return errors.Join(errs...)
}

// recordOnly is a SpendStore that records spend but loads none, for the
// fail-open limiter whose budgets start from zero.
type recordOnly struct{ limit.SpendStore }

func (recordOnly) LoadSpend(context.Context, string) (map[limit.BudgetKey]int64, error) {
	return nil, nil
}

// priceCatalog is the embedded catalog with the config's pricing applied
// and the store's prices (kept current by a priceSync) over both; built
// per config generation, so the config's overrides change on reload.
func priceCatalog(p config.Pricing, stored *tokens.Overlay) (*tokens.Catalog, error) {
	o := tokens.CatalogOptions{DefaultMaxOutput: p.DefaultMaxOutput, Overrides: make(map[string]tokens.Price, len(p.Overrides)),
		Store: stored}
	for model, pr := range p.Overrides {
		o.Overrides[model] = tokens.PerMillion(pr.Input, pr.CachedInput, pr.Output)
	}
	if p.Unknown == "default" && p.Default != nil {
		d := tokens.PerMillion(p.Default.Input, p.Default.CachedInput, p.Default.Output)
		o.Default = &d
	}
	c, err := tokens.NewCatalog(o)
	if err != nil {
		return nil, fmt.Errorf("pricing: %w", err)
	}
	return c, nil
}

// sweepEvery is how often a replica looks for reservations a crashed
// replica left: a quarter of their TTL, so one is released at most a
// quarter late, but no more often than every 100ms nor less than every
// 30s.
func sweepEvery(ttl time.Duration) time.Duration {
	return min(30*time.Second, max(ttl/4, 100*time.Millisecond))
}
