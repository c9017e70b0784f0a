package config

import (
	"fmt"
	"net"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"

	"gatehouse/internal/provider"
)

// The allowed values of the enumerated fields (functions, so there is no
// package-level mutable state). Provider types and their presets come from
// the provider registry Parse is given.
func strategies() []string {
	return []string{"failover", "round-robin", "weighted", "least-tokens", "least-latency", "least-requests"}
}

func periods() []string   { return []string{"day", "week", "month", "total"} }
func logLevels() []string { return []string{"debug", "info", "warn", "error"} }

// checker runs the semantic rules on a decoded Config. It reports each
// problem at the position the decoder recorded for the field's path, or at
// the nearest enclosing node when the field is missing, and stays quiet
// about fields that already failed to decode.
type checker struct {
	d     *decoder
	types *provider.Registry
	errs  []FieldError
}

func (c *checker) errorf(path, format string, args ...any) {
	for p := path; ; p = parent(p) {
		if c.d.bad[p] {
			return
		}
		if p == "" {
			break
		}
	}
	c.errs = append(c.errs, FieldError{Line: c.place(path).line, Column: c.place(path).col, Field: path, Message: fmt.Sprintf(format, args...)})
}

// place is where path is, or where its closest present ancestor is.
func (c *checker) place(path string) pos {
	for p := path; p != ""; p = parent(p) {
		if at, ok := c.d.at[p]; ok {
			return at
		}
	}
	return pos{}
}

// parent strips the last ".field" or "[i]" from a path.
func parent(path string) string {
	if i := strings.LastIndexAny(path, ".["); i >= 0 {
		return path[:i]
	}
	return ""
}

func oneOf(list []string) string { return strings.Join(list, ", ") }

func (c *checker) enum(path, value string, allowed []string, what string) {
	if value != "" && !slices.Contains(allowed, value) {
		c.errorf(path, "unknown %s %q; want one of %s", what, value, oneOf(allowed))
	}
}

func (c *checker) nonNegative(path string, v float64) {
	if v < 0 {
		c.errorf(path, "must not be negative")
	}
}

func (c *checker) timeouts(path string, t Timeouts) {
	c.nonNegative(path+".connect", float64(t.Connect))
	c.nonNegative(path+".first_byte", float64(t.FirstByte))
	c.nonNegative(path+".idle", float64(t.Idle))
	c.nonNegative(path+".total", float64(t.Total))
}

// unique reports a repeated name, pointing at the first occurrence.
func (c *checker) unique(seen map[string]string, name, path, what string) {
	if name == "" {
		return
	}
	if first, dup := seen[name]; dup {
		c.errorf(path, "duplicate %s %q (first at line %d)", what, name, c.place(first).line)
		return
	}
	seen[name] = path
}

func (c *checker) config(cfg *Config) {
	if cfg.Listen != "" {
		if _, port, err := net.SplitHostPort(cfg.Listen); err != nil || !validPort(port) {
			c.errorf("listen", "must be host:port, such as 127.0.0.1:8080 or :8080")
		}
	}
	c.storage(cfg.Storage)
	if c.d.set["server.max_body_bytes"] && cfg.Server.MaxBodyBytes <= 0 {
		c.errorf("server.max_body_bytes", "must be greater than 0")
	}
	c.nonNegative("server.shutdown_grace", float64(cfg.Server.ShutdownGrace))
	c.nonNegative("server.read_header_timeout", float64(cfg.Server.ReadHeaderTimeout))
	c.listener(cfg.Server)
	c.timeouts("timeouts", cfg.Timeouts)
	c.enum("log.level", cfg.Log.Level, logLevels(), "log level")

	providers := map[string]string{}
	for i := range cfg.Providers {
		c.provider(fmt.Sprintf("providers[%d]", i), &cfg.Providers[i], providers)
		c.providerProbes(fmt.Sprintf("providers[%d]", i), &cfg.Providers[i])
	}
	c.enum("routing.mode", cfg.Routing.Mode, routingModes(), "routing mode")
	c.retry("retry", cfg.Retry)
	c.breaker(cfg.Breaker)
	models := map[string]string{}
	for i := range cfg.Models {
		c.model(fmt.Sprintf("models[%d]", i), &cfg.Models[i], providers, models)
		c.modelRouting(fmt.Sprintf("models[%d]", i), &cfg.Models[i], cfg)
	}
	c.fallbacks(cfg, models)
	secrets, names := map[string]string{}, map[string]string{}
	for i := range cfg.Keys {
		c.key(fmt.Sprintf("keys[%d]", i), &cfg.Keys[i], models, providers, secrets, names)
	}
	c.adminKeys(cfg)
	c.cache(cfg.Cache, providers)
	c.usage(cfg.Usage)
	c.telemetry(cfg.Telemetry)
	c.ui(cfg.UI)
	c.limits(cfg.Limits)
	c.checkReservationTTL(cfg)
	c.checkLease(cfg)
	c.pricing(cfg.Pricing)
}

func validPort(p string) bool {
	n, err := strconv.Atoi(p)
	return err == nil && n >= 0 && n <= 65535
}

// storage checks URL shapes. Messages never quote the value: storage URLs
// carry passwords.
func (c *checker) storage(s Storage) {
	if s.Redis != "" {
		if msg := redisProblem(s.Redis); msg != "" {
			c.errorf("storage.redis", "%s", msg)
		}
	}
	if s.Postgres != "" && strings.Contains(s.Postgres, "://") {
		u, err := url.Parse(s.Postgres)
		if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
			c.errorf("storage.postgres", "must be a postgres:// URL or a key=value connection string")
		}
	}
}

func (c *checker) provider(path string, p *Provider, seen map[string]string) {
	if p.Name == "" {
		c.errorf(path+".name", "is required")
	}
	c.unique(seen, p.Name, path+".name", "provider name")
	if c.d.set[path+".max_response_bytes"] && p.MaxResponseBytes <= 0 {
		c.errorf(path+".max_response_bytes", "must be greater than 0")
	}
	names := c.types.Names()
	if p.Type == "" {
		c.errorf(path+".type", "is required; want one of %s", oneOf(names))
	}
	c.enum(path+".type", p.Type, names, "provider type")
	t, known := c.types.Lookup(p.Type)
	if !known {
		return // the type's own rules cannot be checked
	}
	c.providerOption(path+".preset", p.Preset != "", t, provider.OptionPreset)
	if p.Preset != "" && t.Accepts(provider.OptionPreset) {
		c.enum(path+".preset", p.Preset, t.Presets, "preset")
	}
	switch {
	case p.BaseURL != "":
		if !httpURL(p.BaseURL) {
			c.errorf(path+".base_url", "must be an absolute http:// or https:// URL")
		}
	case t.BaseURL == provider.BaseURLRequired:
		c.errorf(path+".base_url", "is required for type %s", p.Type)
	case t.BaseURL == provider.BaseURLUnlessPreset && p.Preset == "":
		c.errorf(path+".base_url", "is required for type %s without a preset", p.Type)
	}
	c.providerOption(path+".api_version", p.APIVersion != "", t, provider.OptionAPIVersion)
	c.providerOption(path+".region", p.Region != "", t, provider.OptionRegion)
	c.providerOption(path+".discover", p.Discover != nil, t, provider.OptionDiscover)
	c.providerOption(path+".responses_api", p.ResponsesAPI != nil, t, provider.OptionResponsesAPI)
	if p.APIKey != strings.TrimSpace(p.APIKey) {
		c.errorf(path+".api_key", "has leading or trailing whitespace or a line break")
	}
	if p.Prewarm != nil && (*p.Prewarm < 0 || *p.Prewarm > MaxPrewarm) {
		c.errorf(path+".prewarm", "must be between 0 and %d connections", MaxPrewarm)
	}
	for name, value := range p.Headers {
		hp := path + ".headers." + name
		if !validHeaderName(name) {
			c.errorf(hp, "%q is not a valid HTTP header name", name)
		}
		if strings.ContainsAny(value, "\r\n\x00") {
			c.errorf(hp, "header value must not contain a line break or NUL")
		}
	}
}

// providerOption refuses a type-specific field set on a type that does
// not accept it, naming the types that do.
func (c *checker) providerOption(path string, set bool, t *provider.Type, o provider.Option) {
	if !set || t.Accepts(o) {
		return
	}
	if types := c.types.Accepting(o); len(types) > 0 {
		c.errorf(path, "is only allowed with type %s", strings.Join(types, " or "))
	} else {
		c.errorf(path, "is not allowed with type %s", t.Name)
	}
}

func httpURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}

// validHeaderName reports whether s is an RFC 9110 token.
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0 {
			continue
		}
		return false
	}
	return true
}

func (c *checker) model(path string, m *Model, providers, seen map[string]string) {
	if m.Name == "" {
		c.errorf(path+".name", "is required")
	}
	c.unique(seen, m.Name, path+".name", "model name")
	c.enum(path+".strategy", m.Strategy, strategies(), "strategy")
	if len(m.Targets) == 0 {
		c.errorf(path+".targets", "at least one target is required")
	}
	weighted := 0
	for i, t := range m.Targets {
		tp := fmt.Sprintf("%s.targets[%d]", path, i)
		switch _, ok := providers[t.Provider]; {
		case t.Provider == "":
			c.errorf(tp+".provider", "is required")
		case !ok:
			c.errorf(tp+".provider", "unknown provider %q; it must be one of providers[].name", t.Provider)
		}
		if t.Model == "" {
			c.errorf(tp+".model", "is required")
		}
		if t.Weight < 0 {
			c.errorf(tp+".weight", "must not be negative")
		}
		if t.Weight > 0 || !c.d.set[tp+".weight"] {
			weighted++
		}
	}
	if m.Strategy == "weighted" && len(m.Targets) > 0 && weighted == 0 {
		c.errorf(path+".targets", "strategy weighted needs at least one target with a weight above 0")
	}
	c.timeouts(path+".timeouts", m.Timeouts)
}

func (c *checker) key(path string, k *Key, models, providers, secrets, names map[string]string) {
	if k.Key == "" {
		c.errorf(path+".key", "is required")
	} else if first, dup := secrets[k.Key]; dup {
		// Never quote the key: it is a secret.
		c.errorf(path+".key", "duplicate key: the same value as %s (line %d)", parent(first), c.place(first).line)
	} else {
		secrets[k.Key] = path + ".key"
	}
	c.unique(names, k.Name, path+".name", "key name")
	c.nonNegative(path+".rpm", float64(k.RPM))
	c.nonNegative(path+".tpm", float64(k.TPM))
	if b := k.Budget; b != nil {
		c.nonNegative(path+".budget.usd", b.USD)
		if b.Period == "" {
			c.errorf(path+".budget.period", "is required; want one of %s", oneOf(periods()))
		}
		c.enum(path+".budget.period", b.Period, periods(), "budget period")
	}
	for i, m := range k.Models {
		if _, ok := models[m]; !ok {
			c.errorf(fmt.Sprintf("%s.models[%d]", path, i), "unknown model %q; it must be one of models[].name", m)
		}
	}
	for i, p := range k.Providers {
		if _, ok := providers[p]; !ok {
			c.errorf(fmt.Sprintf("%s.providers[%d]", path, i), "unknown provider %q; it must be one of providers[].name", p)
		}
	}
	limited := make([]string, 0, len(k.ModelLimits))
	for m := range k.ModelLimits {
		limited = append(limited, m)
	}
	sort.Strings(limited) // errors in a stable order
	for _, m := range limited {
		mp := path + ".model_limits." + m
		if _, ok := models[m]; !ok {
			c.errorf(mp, "unknown model %q; it must be one of models[].name", m)
		}
		l := k.ModelLimits[m]
		c.nonNegative(mp+".rpm", float64(l.RPM))
		c.nonNegative(mp+".tpm", float64(l.TPM))
	}
}

func (c *checker) cache(cc Cache, providers map[string]string) {
	c.nonNegative("cache.exact.ttl", float64(cc.Exact.TTL))
	c.nonNegative("cache.exact.max_bytes", float64(cc.Exact.MaxBytes))
	s := cc.Semantic
	c.nonNegative("cache.semantic.timeout", float64(s.Timeout))
	c.nonNegative("cache.semantic.max_entries", float64(s.MaxEntries))
	if c.d.set["cache.semantic.threshold"] && !(s.Threshold > 0 && s.Threshold <= 1) {
		c.errorf("cache.semantic.threshold", "must be above 0 and at most 1")
	}
	if _, ok := providers[s.Embedder.Provider]; s.Embedder.Provider != "" && !ok {
		c.errorf("cache.semantic.embedder.provider", "unknown provider %q; it must be one of providers[].name", s.Embedder.Provider)
	}
	if s.Enabled {
		if s.Embedder.Provider == "" {
			c.errorf("cache.semantic.embedder.provider", "is required when the semantic cache is enabled")
		}
		if s.Embedder.Model == "" {
			c.errorf("cache.semantic.embedder.model", "is required when the semantic cache is enabled")
		}
	}
}

// applyDefaults fills what the file left out. It runs after validation, so
// an explicit invalid value is reported rather than replaced.
func applyDefaults(cfg *Config, d *decoder) {
	if cfg.Listen == "" {
		cfg.Listen = DefaultListen
	}
	if cfg.Storage.SQLite == "" && !cfg.Cluster() {
		cfg.Storage.SQLite = DefaultSQLite
	}
	if cfg.Server.MaxBodyBytes == 0 {
		cfg.Server.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.Server.ShutdownGrace == 0 {
		cfg.Server.ShutdownGrace = DefaultShutdownGrace
	}
	if cfg.Server.ReadHeaderTimeout == 0 {
		cfg.Server.ReadHeaderTimeout = DefaultReadHeaderTimeout
	}
	if cfg.Server.H2C == nil {
		cfg.Server.H2C = ptr(true)
	}
	listenerDefaults(&cfg.Server)
	cfg.Timeouts = (&Model{Timeouts: cfg.Timeouts}).EffectiveTimeouts(Timeouts{})
	if cfg.Log.Level == "" {
		cfg.Log.Level = DefaultLogLevel
	}
	if cfg.Log.Requests == nil {
		cfg.Log.Requests = ptr(true)
	}
	for i := range cfg.Providers {
		if cfg.Providers[i].StreamUsage == nil {
			cfg.Providers[i].StreamUsage = ptr(true)
		}
	}
	for i := range cfg.Models {
		m := &cfg.Models[i]
		if m.Strategy == "" {
			m.Strategy = DefaultStrategy
		}
		for j := range m.Targets {
			if !d.set[fmt.Sprintf("models[%d].targets[%d].weight", i, j)] {
				m.Targets[j].Weight = DefaultWeight
			}
		}
	}
	routingDefaults(cfg, d)
	limitsDefaults(cfg)
	usageDefaults(cfg, d)
	telemetryDefaults(cfg)
	uiDefaults(cfg)
	if cfg.Cache.Exact.TTL == 0 {
		cfg.Cache.Exact.TTL = DefaultExactCacheTTL
	}
	if cfg.Cache.Exact.MaxBytes == 0 {
		cfg.Cache.Exact.MaxBytes = DefaultExactCacheBytes
	}
	if cfg.Cache.Semantic.Threshold == 0 {
		cfg.Cache.Semantic.Threshold = DefaultSemanticThreshold
	}
	if cfg.Cache.Semantic.Timeout == 0 {
		cfg.Cache.Semantic.Timeout = DefaultSemanticTimeout
	}
	if cfg.Cache.Semantic.MaxEntries == 0 {
		cfg.Cache.Semantic.MaxEntries = DefaultSemanticEntries
	}
}

func ptr[T any](v T) *T { return &v }
