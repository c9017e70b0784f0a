package config

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// Admission control and pricing defaults.
const (
	DefaultFailurePolicy    = "closed"
	DefaultReplicas         = 1
	DefaultRedisTimeout     = Duration(250 * time.Millisecond)
	DefaultLimitCooldown    = Duration(time.Second)
	DefaultSpendFlush       = Duration(250 * time.Millisecond)
	DefaultSettleQueue      = 4096
	DefaultRedisPrefix      = "gh:"
	DefaultReservationTTL   = Duration(15 * time.Minute)
	DefaultMaxOutputTokens  = 4096
	DefaultLeaseFraction    = 0.05
	DefaultLeaseIdle        = Duration(10 * time.Second)
	maxLeaseFraction        = 0.5
	maxLeaseIdle            = Duration(time.Hour)
	maxSpendFlush           = Duration(time.Second)
	failurePolicyClosed     = "closed"
	failurePolicyOpen       = "open"
	unknownPriceRefuse      = "refuse"
	unknownPriceDefault     = "default"
	defaultUnknownPriceRule = unknownPriceRefuse
	// RateLimitHeadersAll sends the x-ratelimit-* headers on every
	// response of a limited key (OpenAI's behaviour, the default);
	// RateLimitHeadersRefusals only on the 429s.
	RateLimitHeadersAll      = "all"
	RateLimitHeadersRefusals = "refusals"
)

func rateLimitHeaderModes() []string { return []string{RateLimitHeadersAll, RateLimitHeadersRefusals} }

func failurePolicies() []string { return []string{failurePolicyClosed, failurePolicyOpen} }

// Limits configures admission control: how rate limits and budgets are
// enforced. The limits themselves live on keys, projects and customers.
type Limits struct {
	// FailurePolicy says what cluster mode does while Redis cannot be
	// reached: closed (default) answers 503; open admits requests under a
	// local limiter that enforces each replica's share of every limit.
	FailurePolicy string `yaml:"failure_policy"`
	// Replicas is how many gateways share the limits, for failing open:
	// each enforces 1/Replicas of every limit. Default 1.
	Replicas int `yaml:"replicas"`
	// RedisTimeout is how long Redis may stay silent (no reply to any of
	// this replica's calls) while an admission waits before Redis counts
	// as unavailable; a reply that is merely late while Redis answers
	// others is waited for up to eight times as long. Default 250ms.
	RedisTimeout Duration `yaml:"redis_timeout"`
	// Cooldown is how long a replica stays degraded after a Redis failure
	// unless Redis answers sooner; default 1s. One admission at a time
	// asks Redis meanwhile, and its answer ends the cooldown: failing
	// closed, any admission while no other does; failing open (where the
	// others are served locally), the first an eighth of the cooldown
	// after the failure and then one per cooldown, so a dead Redis holds
	// at most one request per cooldown.
	Cooldown Duration `yaml:"cooldown"`
	// FlushEvery is how often settled spend is written to the database
	// (embedded: SQLite; cluster: PostgreSQL); a crash loses at most this
	// much spend. Default 250ms, at most 1s.
	FlushEvery Duration `yaml:"flush_every"`
	// SettleQueue bounds the settlements waiting for Redis (cluster mode);
	// default 4096.
	SettleQueue int `yaml:"settle_queue"`
	// RedisPrefix starts every Redis key gatehouse writes; default "gh:".
	RedisPrefix string `yaml:"redis_prefix"`
	// Headers says which responses carry the x-ratelimit-* headers: all
	// (default) or refusals. Six headers on every response are a
	// measurable share of a small request's cost, for the client too
	// (BENCHMARKS.md); clients that never read them can be spared.
	Headers string `yaml:"headers"`
	// ReservationTTL bounds, in cluster mode, how long the budget
	// reservation of a request whose replica died before settling it
	// keeps counting: past it, any replica releases it. It must be longer
	// than the longest request (every model's total timeout); default
	// that plus 5 minutes, at least 15 minutes.
	ReservationTTL Duration `yaml:"reservation_ttl"`
	// Lease lets each replica take small batches of every limit from
	// Redis and admit against them with no round trip (cluster mode).
	Lease Lease `yaml:"lease"`
}

// Lease configures leases (limit.Leaser): each replica holds, per rate
// bucket and budget in use, a grant of at most Fraction of the limit,
// taken from Redis in one script call and topped up in the background
// before it runs out. Across R replicas a rate limit can then admit up to
// R × Fraction × the limit more than it would without leases, in any
// interval (docs/scaling.md); budgets are never exceeded through leases.
type Lease struct {
	// Enabled turns leases on; off by default, when every admission is
	// one Redis round trip.
	Enabled bool `yaml:"enabled"`
	// Fraction is the share of a limit one lease holds: 0.05 by default,
	// above 0 and at most 0.5.
	Fraction float64 `yaml:"fraction"`
	// Idle is how long a lease stays unused before it is given back, so
	// a key that went quiet leaves nothing held; 10s by default, at most
	// 1h.
	Idle Duration `yaml:"idle"`
}

// Pricing configures cost accounting. Prices are USD per million tokens.
type Pricing struct {
	// DefaultMaxOutput is the output assumed for the cost estimate of a
	// request without max_tokens; default 4096.
	DefaultMaxOutput int `yaml:"default_max_output"`
	// Unknown says what happens to a model with no known price: refuse
	// (default) refuses it to keys, projects and customers with budgets
	// (others are served at cost 0); default charges Default.
	Unknown string `yaml:"unknown"`
	// Default is the price of a model the catalog does not know, used
	// when Unknown is "default".
	Default *Price `yaml:"default"`
	// Overrides replace or add catalog prices, by upstream model id.
	Overrides map[string]Price `yaml:"overrides"`
}

// Price is one model's price in USD per million tokens.
type Price struct {
	Input       float64 `yaml:"input"`
	CachedInput float64 `yaml:"cached_input"` // default: Input
	Output      float64 `yaml:"output"`
}

func unknownPriceRules() []string { return []string{unknownPriceRefuse, unknownPriceDefault} }

func (c *checker) limits(l Limits) {
	c.enum("limits.failure_policy", l.FailurePolicy, failurePolicies(), "failure policy")
	c.enum("limits.headers", l.Headers, rateLimitHeaderModes(), "rate-limit header mode")
	if l.Replicas < 0 {
		c.errorf("limits.replicas", "must be 0 or more")
	}
	c.nonNegative("limits.redis_timeout", float64(l.RedisTimeout))
	c.nonNegative("limits.cooldown", float64(l.Cooldown))
	c.nonNegative("limits.flush_every", float64(l.FlushEvery))
	if l.FlushEvery > maxSpendFlush {
		c.errorf("limits.flush_every", "must be at most %s: it is how much spend a crash may lose", maxSpendFlush)
	}
	if l.SettleQueue < 0 {
		c.errorf("limits.settle_queue", "must be 0 or more")
	}
	c.nonNegative("limits.reservation_ttl", float64(l.ReservationTTL))
	if f := l.Lease.Fraction; f < 0 || f > maxLeaseFraction {
		c.errorf("limits.lease.fraction", "must be above 0 and at most %g (the share of a limit one replica holds)", maxLeaseFraction)
	}
	if l.Lease.Idle < 0 || l.Lease.Idle > maxLeaseIdle {
		c.errorf("limits.lease.idle", "must be above 0 and at most %s", maxLeaseIdle)
	}
	// Redis Cluster hashes a key by the text between its first braces:
	// braces in the prefix would move or empty that hash tag, and one
	// script's keys could land in different slots.
	if strings.ContainsAny(l.RedisPrefix, "{}") {
		c.errorf("limits.redis_prefix", "must not contain { or }, which Redis Cluster reads as a hash tag")
	}
}

// checkLease refuses leases where they would do nothing: embedded mode
// admits in-process already, with no round trip to save.
func (c *checker) checkLease(cfg *Config) {
	if cfg.Limits.Lease.Enabled && !cfg.Cluster() {
		c.errorf("limits.lease.enabled", "leases apply to cluster mode only (storage.redis and storage.postgres); embedded mode admits in-process already")
	}
}

// checkReservationTTL holds a configured reservation TTL above the
// longest request: a reservation released while its request still runs
// would let the budget be spent twice over until the settle.
func (c *checker) checkReservationTTL(cfg *Config) {
	ttl := cfg.Limits.ReservationTTL
	if ttl <= 0 {
		return
	}
	if longest := cfg.LongestRequest(); ttl <= longest {
		c.errorf("limits.reservation_ttl", "must be longer than the longest model total timeout (%s)", longest)
	}
}

// LongestRequest is the largest total timeout of any model (the top
// level's, or the built-in default, when no model has its own).
func (cfg *Config) LongestRequest() Duration {
	longest := cfg.Timeouts.Total
	if longest == 0 {
		longest = DefaultTotalTimeout
	}
	for i := range cfg.Models {
		longest = max(longest, cfg.Models[i].EffectiveTimeouts(cfg.Timeouts).Total)
	}
	return longest
}

func (c *checker) pricing(p Pricing) {
	if p.DefaultMaxOutput < 0 {
		c.errorf("pricing.default_max_output", "must be 0 or more")
	}
	c.enum("pricing.unknown", p.Unknown, unknownPriceRules(), "unknown-price rule")
	if p.Unknown == unknownPriceDefault && p.Default == nil {
		c.errorf("pricing.default", "is required when pricing.unknown is default")
	}
	if p.Default != nil {
		c.price("pricing.default", *p.Default)
	}
	models := make([]string, 0, len(p.Overrides))
	for m := range p.Overrides {
		models = append(models, m)
	}
	sort.Strings(models) // errors in a stable order
	for _, m := range models {
		c.price(fmt.Sprintf("pricing.overrides.%s", m), p.Overrides[m])
	}
}

func (c *checker) price(path string, p Price) {
	c.nonNegative(path+".input", p.Input)
	c.nonNegative(path+".cached_input", p.CachedInput)
	c.nonNegative(path+".output", p.Output)
}

func limitsDefaults(cfg *Config) {
	l := &cfg.Limits
	if l.FailurePolicy == "" {
		l.FailurePolicy = DefaultFailurePolicy
	}
	if l.Headers == "" {
		l.Headers = RateLimitHeadersAll
	}
	if l.Replicas == 0 {
		l.Replicas = DefaultReplicas
	}
	if l.RedisTimeout == 0 {
		l.RedisTimeout = DefaultRedisTimeout
	}
	if l.Cooldown == 0 {
		l.Cooldown = DefaultLimitCooldown
	}
	if l.FlushEvery == 0 {
		l.FlushEvery = DefaultSpendFlush
	}
	if l.SettleQueue == 0 {
		l.SettleQueue = DefaultSettleQueue
	}
	if l.ReservationTTL == 0 {
		l.ReservationTTL = max(DefaultReservationTTL, cfg.LongestRequest()+Duration(5*time.Minute))
	}
	if l.RedisPrefix == "" {
		l.RedisPrefix = DefaultRedisPrefix
	}
	if l.Lease.Fraction == 0 {
		l.Lease.Fraction = DefaultLeaseFraction
	}
	if l.Lease.Idle == 0 {
		l.Lease.Idle = DefaultLeaseIdle
	}
	p := &cfg.Pricing
	if p.DefaultMaxOutput == 0 {
		p.DefaultMaxOutput = DefaultMaxOutputTokens
	}
	if p.Unknown == "" {
		p.Unknown = defaultUnknownPriceRule
	}
	for m, pr := range p.Overrides {
		if pr.CachedInput == 0 {
			pr.CachedInput = pr.Input
			p.Overrides[m] = pr
		}
	}
	if p.Default != nil && p.Default.CachedInput == 0 {
		p.Default.CachedInput = p.Default.Input
	}
}
