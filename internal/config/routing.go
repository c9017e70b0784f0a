package config

import (
	"fmt"
	"strings"
	"time"
)

// Routing and resilience defaults.
const (
	DefaultRoutingMode = "any"

	DefaultBackoff    = Duration(100 * time.Millisecond)
	DefaultMaxBackoff = Duration(5 * time.Second)

	DefaultBreakerFailures    = 5
	DefaultBreakerErrorRate   = 0.5
	DefaultBreakerMinRequests = 20
	DefaultBreakerWindow      = Duration(time.Minute)
	DefaultBreakerCooldown    = Duration(30 * time.Second)

	DefaultHealthCheckInterval = Duration(10 * time.Second)
	DefaultHealthCheckTimeout  = Duration(2 * time.Second)
	DefaultLoadInterval        = Duration(2 * time.Second)
)

func routingModes() []string {
	return []string{"any", "local_first", "cloud_first", "local_only", "cloud_only"}
}

func loadKinds() []string { return []string{"llama.cpp", "vllm"} }

// Routing says how models treat providers marked local.
type Routing struct {
	// Mode is any (default: no preference), local_first, cloud_first,
	// local_only or cloud_only. "first" modes choose among the preferred
	// kind while one of them is available and fall back to the other;
	// "only" modes never use the other kind.
	Mode string `yaml:"mode"`
}

// Retry bounds the attempts of one request. At the top level it is the
// default of every model; in a model, zero fields inherit it.
type Retry struct {
	// MaxAttempts caps the upstream calls of one request, fallbacks
	// included; 0 (default): every target of the model and of its
	// fallbacks once, plus one retry.
	MaxAttempts int `yaml:"max_attempts"`
	// Backoff is the first wait before a target already tried is tried
	// again; it doubles each round, with ±50% jitter. Default 100ms.
	Backoff Duration `yaml:"backoff"`
	// MaxBackoff caps every wait, an upstream's Retry-After included: a
	// longer Retry-After is not waited for (the request moves on, or the
	// client gets the 429 with it). Default 5s.
	MaxBackoff Duration `yaml:"max_backoff"`
	// RetryOn lists extra upstream statuses (400–599) that move on to the
	// next target; connection errors, timeouts before the first byte, 429
	// and 5xx always do.
	RetryOn []int `yaml:"retry_on"`
}

// Breaker configures the circuit breaker of every deployment (a provider
// and model pair).
type Breaker struct {
	// Failures in a row that open the breaker; default 5, 0 disables.
	Failures int `yaml:"failures"`
	// ErrorRate (0–1) of failed attempts over Window that opens it once
	// MinRequests attempts were seen; default 0.5, 0 disables.
	ErrorRate   float64  `yaml:"error_rate"`
	MinRequests int      `yaml:"min_requests"` // default 20
	Window      Duration `yaml:"window"`       // default 1m
	// Cooldown is how long an open breaker keeps its deployment out of
	// selection before one probe request tries it; default 30s.
	Cooldown Duration `yaml:"cooldown"`
}

// HealthCheck is a provider's active health check. Two failed checks in a
// row take its deployments out of selection; one passing check brings
// them back.
type HealthCheck struct {
	// Path is requested from the root of the provider's base_url (scheme
	// and host), such as /health for llama.cpp and vLLM. Required.
	Path     string   `yaml:"path"`
	Interval Duration `yaml:"interval"` // default 10s
	Timeout  Duration `yaml:"timeout"`  // default 2s
}

// LoadSignal reads a model server's own load from its Prometheus metrics,
// in the background, for least-tokens and least-latency.
type LoadSignal struct {
	// Kind names the metrics: llama.cpp (requests_processing,
	// requests_deferred, kv_cache_usage_ratio; start llama-server with
	// --metrics) or vllm (num_requests_running, num_requests_waiting,
	// gpu_cache_usage_perc). Required.
	Kind string `yaml:"kind"`
	// URL of the metrics; default the root of base_url + /metrics.
	URL      string   `yaml:"url"`
	Interval Duration `yaml:"interval"` // default 2s
}

// EffectiveRetry resolves m's retry settings field by field against the
// top-level ones (already defaulted by Parse).
func (m *Model) EffectiveRetry(defaults Retry) Retry {
	r := m.Retry
	if r.MaxAttempts == 0 {
		r.MaxAttempts = defaults.MaxAttempts
	}
	if r.Backoff == 0 {
		r.Backoff = defaults.Backoff
	}
	if r.MaxBackoff == 0 {
		r.MaxBackoff = defaults.MaxBackoff
	}
	if r.RetryOn == nil {
		r.RetryOn = defaults.RetryOn
	}
	return r
}

// EffectiveMode is m's routing mode, else the top-level one, else any.
func (m *Model) EffectiveMode(defaults Routing) string {
	switch {
	case m.Routing.Mode != "":
		return m.Routing.Mode
	case defaults.Mode != "":
		return defaults.Mode
	}
	return DefaultRoutingMode
}

func (c *checker) retry(path string, r Retry) {
	c.nonNegative(path+".max_attempts", float64(r.MaxAttempts))
	c.nonNegative(path+".backoff", float64(r.Backoff))
	c.nonNegative(path+".max_backoff", float64(r.MaxBackoff))
	for i, s := range r.RetryOn {
		if s < 400 || s > 599 {
			c.errorf(fmt.Sprintf("%s.retry_on[%d]", path, i), "%d is not an error status; want 400–599", s)
		}
	}
}

func (c *checker) breaker(b Breaker) {
	c.nonNegative("breaker.failures", float64(b.Failures))
	if b.ErrorRate < 0 || b.ErrorRate > 1 {
		c.errorf("breaker.error_rate", "must be between 0 and 1")
	}
	c.nonNegative("breaker.min_requests", float64(b.MinRequests))
	c.nonNegative("breaker.window", float64(b.Window))
	c.nonNegative("breaker.cooldown", float64(b.Cooldown))
}

// providerProbes checks a provider's health check and load signal.
func (c *checker) providerProbes(path string, p *Provider) {
	if h := p.HealthCheck; h != nil {
		if !strings.HasPrefix(h.Path, "/") {
			c.errorf(path+".health_check.path", "is required and must start with /, such as /health")
		}
		c.positive(path+".health_check.interval", h.Interval)
		c.positive(path+".health_check.timeout", h.Timeout)
	}
	if l := p.Load; l != nil {
		if l.Kind == "" {
			c.errorf(path+".load.kind", "is required; want one of %s", oneOf(loadKinds()))
		}
		c.enum(path+".load.kind", l.Kind, loadKinds(), "load signal kind")
		if l.URL != "" && !httpURL(l.URL) {
			c.errorf(path+".load.url", "must be an absolute http:// or https:// URL")
		}
		c.positive(path+".load.interval", l.Interval)
	}
}

// positive reports a duration set to zero or less; unset is fine.
func (c *checker) positive(path string, d Duration) {
	if c.d.set[path] && d <= 0 {
		c.errorf(path, "must be greater than 0")
	}
}

// modelRouting checks a model's own routing fields; references to other
// models are checked by fallbacks once every name is known.
func (c *checker) modelRouting(path string, m *Model, cfg *Config) {
	c.retry(path+".retry", m.Retry)
	c.enum(path+".routing.mode", m.Routing.Mode, routingModes(), "routing mode")
	c.nonNegative(path+".max_context", float64(m.MaxContext))
	mode := m.EffectiveMode(cfg.Routing)
	if mode != "local_only" && mode != "cloud_only" {
		return
	}
	for _, t := range m.Targets {
		if p, ok := cfg.Provider(t.Provider); ok && p.Local == (mode == "local_only") {
			return
		}
	}
	if len(m.Targets) > 0 {
		c.errorf(path+".targets", "routing mode %s leaves no target: none is on a provider with local: %v", mode, mode == "local_only")
	}
}

func (c *checker) fallbacks(cfg *Config, models map[string]string) {
	for i := range cfg.Models {
		m := &cfg.Models[i]
		for field, list := range map[string][]string{"fallbacks": m.Fallbacks, "context_fallbacks": m.ContextFallbacks} {
			for j, name := range list {
				fp := fmt.Sprintf("models[%d].%s[%d]", i, field, j)
				switch _, ok := models[name]; {
				case name == m.Name:
					c.errorf(fp, "a model cannot fall back to itself")
				case !ok:
					c.errorf(fp, "unknown model %q; it must be one of models[].name", name)
				}
			}
		}
	}
}

func routingDefaults(cfg *Config, d *decoder) {
	if cfg.Routing.Mode == "" {
		cfg.Routing.Mode = DefaultRoutingMode
	}
	if cfg.Retry.Backoff == 0 {
		cfg.Retry.Backoff = DefaultBackoff
	}
	if cfg.Retry.MaxBackoff == 0 {
		cfg.Retry.MaxBackoff = DefaultMaxBackoff
	}
	b := &cfg.Breaker
	if !d.set["breaker.failures"] {
		b.Failures = DefaultBreakerFailures
	}
	if !d.set["breaker.error_rate"] {
		b.ErrorRate = DefaultBreakerErrorRate
	}
	if b.MinRequests == 0 {
		b.MinRequests = DefaultBreakerMinRequests
	}
	if b.Window == 0 {
		b.Window = DefaultBreakerWindow
	}
	if b.Cooldown == 0 {
		b.Cooldown = DefaultBreakerCooldown
	}
	for i := range cfg.Providers {
		p := &cfg.Providers[i]
		if h := p.HealthCheck; h != nil {
			if h.Interval == 0 {
				h.Interval = DefaultHealthCheckInterval
			}
			if h.Timeout == 0 {
				h.Timeout = DefaultHealthCheckTimeout
			}
		}
		if l := p.Load; l != nil && l.Interval == 0 {
			l.Interval = DefaultLoadInterval
		}
	}
}
