package config

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

var ignoreIndex = cmpopts.IgnoreUnexported(Config{})

func secs(n int) Duration { return Duration(time.Duration(n) * time.Second) }

// defaultsOnly is what an empty file gives.
func defaultsOnly() *Config {
	return &Config{
		Listen:   DefaultListen,
		Storage:  Storage{SQLite: DefaultSQLite},
		Server:   Server{MaxBodyBytes: DefaultMaxBodyBytes, ShutdownGrace: DefaultShutdownGrace, ReadHeaderTimeout: DefaultReadHeaderTimeout, H2C: ptr(true), MaxHeaderBytes: DefaultMaxHeaderBytes, BodyReadTimeout: DefaultBodyReadTimeout, HTTP1Engine: EngineGatehouse},
		Timeouts: Timeouts{Connect: DefaultConnectTimeout, FirstByte: DefaultFirstByteTimeout, Idle: DefaultIdleTimeout, Total: DefaultTotalTimeout},
		Log:      Log{Level: DefaultLogLevel, Requests: ptr(true)},
		Cache:    Cache{Exact: ExactCache{TTL: DefaultExactCacheTTL, MaxBytes: DefaultExactCacheBytes}, Semantic: SemanticCache{Threshold: DefaultSemanticThreshold, Timeout: DefaultSemanticTimeout, MaxEntries: DefaultSemanticEntries}},
		Routing:  Routing{Mode: DefaultRoutingMode},
		Retry:    Retry{Backoff: DefaultBackoff, MaxBackoff: DefaultMaxBackoff},
		Breaker:  defaultBreaker(),
		Limits:   defaultLimits(),
		Pricing:  Pricing{DefaultMaxOutput: DefaultMaxOutputTokens, Unknown: "refuse"},
		Usage:    defaultUsage("data/usage-spill"),
		UI:       UI{SessionTTL: Duration(DefaultSessionTTL)},
	}
}

func defaultUsage(spill string) Usage {
	return Usage{Records: ptr(true), Retention: DefaultUsageRetention, SpillDir: spill, Queue: DefaultUsageQueue,
		Bodies: Bodies{MaxBytes: DefaultBodyMaxBytes}}
}

func defaultLimits() Limits {
	return Limits{FailurePolicy: DefaultFailurePolicy, Replicas: DefaultReplicas, RedisTimeout: DefaultRedisTimeout,
		Cooldown: DefaultLimitCooldown, FlushEvery: DefaultSpendFlush, SettleQueue: DefaultSettleQueue, RedisPrefix: DefaultRedisPrefix,
		Headers: RateLimitHeadersAll, ReservationTTL: DefaultReservationTTL,
		Lease: Lease{Fraction: DefaultLeaseFraction, Idle: DefaultLeaseIdle}}
}

func withReservationTTL(l Limits, d time.Duration) Limits {
	l.ReservationTTL = Duration(d)
	return l
}

func defaultBreaker() Breaker {
	return Breaker{Failures: DefaultBreakerFailures, ErrorRate: DefaultBreakerErrorRate, MinRequests: DefaultBreakerMinRequests,
		Window: DefaultBreakerWindow, Cooldown: DefaultBreakerCooldown}
}

func TestLoadDesignExample(t *testing.T) {
	t.Setenv("GATEHOUSE_ADMIN_KEY", "admin-secret-1")
	t.Setenv("OPENAI_API_KEY", "sk-openai-secret")
	t.Setenv("ANTHROPIC_API_KEY", "sk-ant-secret")
	t.Setenv("GATEHOUSE_DEMO_KEY", "gh-demo-secret")
	got, err := Load("testdata/design.yaml", testTypes())
	if err != nil {
		t.Fatal(err)
	}
	want := defaultsOnly()
	want.AdminKey = "admin-secret-1"
	want.Providers = []Provider{
		{Name: "openai", Type: "openai", BaseURL: "https://api.openai.com/v1", APIKey: "sk-openai-secret", StreamUsage: ptr(true)},
		{Name: "anthropic", Type: "anthropic", APIKey: "sk-ant-secret", StreamUsage: ptr(true)},
		{Name: "local-embed", Type: "ollama", BaseURL: "http://127.0.0.1:11434", Local: true, StreamUsage: ptr(true)},
	}
	want.Models = []Model{{
		Name:     "gpt-4o-mini",
		Strategy: "failover",
		Targets: []Target{
			{Provider: "openai", Model: "gpt-4o-mini", Weight: 1},
			{Provider: "anthropic", Model: "claude-3-5-haiku-latest", Weight: 1},
		},
	}}
	want.Keys = []Key{{Key: "gh-demo-secret", Project: "demo", RPM: 60, TPM: 100000, Budget: &Budget{USD: 10, Period: "month"}}}
	want.Cache = Cache{
		Exact: ExactCache{Enabled: true, TTL: Duration(time.Hour), MaxBytes: DefaultExactCacheBytes},
		Semantic: SemanticCache{Threshold: 0.95, Embedder: Embedder{Provider: "local-embed", Model: "all-minilm"},
			Timeout: DefaultSemanticTimeout, MaxEntries: DefaultSemanticEntries},
	}
	want.Telemetry = Telemetry{Traces: &Traces{Endpoint: "http://127.0.0.1:4318", SampleRatio: ptr(1.0)}}
	if diff := cmp.Diff(want, got, ignoreIndex); diff != "" {
		t.Errorf("Load(design.yaml) mismatch (-want +got):\n%s", diff)
	}
}

func TestLoadEveryField(t *testing.T) {
	t.Setenv("REDIS_PASSWORD", "redis-pw-secret")
	t.Setenv("PG_PASSWORD", "pg-pw-secret")
	t.Setenv("GROQ_API_KEY", "gsk-secret")
	t.Setenv("TEAM_KEY", "gh-team-secret")
	slow := Timeouts{FirstByte: secs(300), Idle: secs(120)}
	want := &Config{
		Listen:   ":9090",
		AdminKey: "admin-fallback",
		Storage: Storage{
			SQLite:   "/var/lib/gatehouse/gh.db",
			Redis:    "rediss://:redis-pw-secret@redis.internal:6380/1",
			Postgres: "postgres://gh:pg-pw-secret@pg.internal:5432/gh?sslmode=require",
		},
		Server:   Server{MaxBodyBytes: 512 << 10, ShutdownGrace: secs(60), ReadHeaderTimeout: secs(5), H2C: ptr(false), MaxHeaderBytes: DefaultMaxHeaderBytes, BodyReadTimeout: DefaultBodyReadTimeout, HTTP1Engine: EngineGatehouse},
		Timeouts: Timeouts{Connect: secs(3), FirstByte: DefaultFirstByteTimeout, Idle: DefaultIdleTimeout, Total: secs(1800)},
		Log:      Log{Level: "debug", Requests: ptr(false)},
		Providers: []Provider{
			{Name: "groq", Type: "openai-compatible", Preset: "groq", APIKey: "gsk-secret", Headers: map[string]string{"X-Title": "gatehouse"}, StreamUsage: ptr(false)},
			{Name: "box", Type: "ollama", BaseURL: "http://10.0.0.7:11434", Local: true, StreamUsage: ptr(true)},
			{Name: "az", Type: "azure", BaseURL: "https://example.openai.azure.com/openai", APIKey: "${not-a-reference}", StreamUsage: ptr(true)},
		},
		Models: []Model{
			{Name: "llama", Strategy: "weighted", Timeouts: slow, Targets: []Target{
				{Provider: "groq", Model: "llama-3.3-70b-versatile", Weight: 3},
				{Provider: "box", Model: "llama3.3:70b", Weight: 0},
				{Provider: "az", Model: "gpt-4o", Weight: 1},
			}},
			{Name: "local", Strategy: "least-latency", Timeouts: Timeouts{FirstByte: secs(300), Idle: secs(10)},
				Targets: []Target{{Provider: "box", Model: "qwen2.5", Weight: 1}}},
		},
		Keys: []Key{
			{Key: "gh-team-secret", Name: "team", Project: "platform", RPM: 120, Budget: &Budget{USD: 12.5, Period: "week"}, Models: []string{"llama"}},
			{Key: "gh-second", Name: "second", NoCache: true},
		},
		Cache: Cache{
			Exact: ExactCache{Enabled: true, TTL: secs(900), MaxBytes: 64 << 20},
			Semantic: SemanticCache{Enabled: true, Threshold: 0.9, Embedder: Embedder{Provider: "box", Model: "nomic-embed-text"},
				Timeout: Duration(300 * time.Millisecond), MaxEntries: 5000, PerKey: true},
		},
		Routing: Routing{Mode: DefaultRoutingMode},
		Retry:   Retry{Backoff: DefaultBackoff, MaxBackoff: DefaultMaxBackoff},
		Usage: Usage{Records: ptr(true), Retention: Duration(30*24*time.Hour + 12*time.Hour), SpillDir: "/var/lib/gatehouse/spill",
			Queue: 1000, Bodies: Bodies{MaxBytes: 8 << 10, Redact: []Redaction{{Pattern: "acct-[0-9]+", Replace: "[ACCOUNT]"}}}},
		Breaker: defaultBreaker(),
		// The reservation TTL: the longest model total timeout (30m) + 5m.
		Limits:  withReservationTTL(defaultLimits(), 35*time.Minute),
		Pricing: Pricing{DefaultMaxOutput: DefaultMaxOutputTokens, Unknown: "refuse"},
		UI:      UI{Enabled: ptr(false), SessionTTL: Duration(8 * time.Hour)},
	}
	got, err := Load("testdata/full.yaml", testTypes())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got, ignoreIndex); diff != "" {
		t.Errorf("Load(full.yaml) mismatch (-want +got):\n%s", diff)
	}
}

// The quick-start config must keep loading: its commented-out provider
// refers to an unset variable, which must not count.
func TestLoadDemoConfig(t *testing.T) {
	cfg, err := Load("../../examples/demo.yaml", testTypes())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := cfg.Model("demo-chat"); !ok {
		t.Error("demo-chat model missing")
	}
}

func TestDefaults(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want func() *Config
	}{
		{"empty file", "", defaultsOnly},
		{"comments only", "# nothing here\n", defaultsOnly},
		{"explicit nulls", "listen: ~\nserver:\nlog: {level: null}\n", defaultsOnly},
		{"cluster mode leaves sqlite unset", "storage: {redis: redis://r:6379, postgres: postgres://p/db}\n", func() *Config {
			c := defaultsOnly()
			c.Storage = Storage{Redis: "redis://r:6379", Postgres: "postgres://p/db"}
			c.Usage.SpillDir = DefaultClusterSpillDir
			return c
		}},
		{"partial timeouts", "timeouts: {idle: 5s}\n", func() *Config {
			c := defaultsOnly()
			c.Timeouts.Idle = secs(5)
			return c
		}},
		{"model, target and provider defaults", "providers: [{name: p, type: mock}]\nmodels: [{name: m, targets: [{provider: p, model: x}]}]\n", func() *Config {
			c := defaultsOnly()
			c.Providers = []Provider{{Name: "p", Type: "mock", StreamUsage: ptr(true)}}
			c.Models = []Model{{Name: "m", Strategy: DefaultStrategy, Targets: []Target{{Provider: "p", Model: "x", Weight: DefaultWeight}}}}
			return c
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse([]byte(tt.yaml), "t.yaml", testTypes())
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want(), got, ignoreIndex); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSizes(t *testing.T) {
	tests := []struct {
		in      string
		want    int64
		wantErr string
	}{
		{"1024", 1024, ""},
		{"10MiB", 10 << 20, ""},
		{"512KB", 512000, ""},
		{"512kib", 512 << 10, ""},
		{"1.5 MiB", 3 << 19, ""},
		{"2GB", 2e9, ""},
		{"100B", 100, ""},
		{"10 parsecs", 0, "invalid size"},
		{"MiB", 0, "invalid size"},
		{"99999999999GiB", 0, "too large"},
		{"0", 0, "must be greater than 0"},
		{"-5", 0, "must be greater than 0"},
		{"99999999999999999999", 0, "too large"},
		{"18446744073709551615", 0, "out of range"},
		{"[1]", 0, "expected a size"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			cfg, err := Parse([]byte("server:\n  max_body_bytes: "+tt.in+"\n"), "t.yaml", testTypes())
			if tt.wantErr != "" {
				fe := onlyError(t, err)
				if fe.Line != 2 || fe.Field != "server.max_body_bytes" || !strings.Contains(fe.Message, tt.wantErr) {
					t.Errorf("got %v, want line 2 server.max_body_bytes %q", fe, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Server.MaxBodyBytes != tt.want {
				t.Errorf("got %d, want %d", cfg.Server.MaxBodyBytes, tt.want)
			}
		})
	}
}

func TestLookups(t *testing.T) {
	cfg, err := Parse([]byte(`
providers: [{name: a, type: mock}, {name: b, type: mock}]
models:
  - {name: m1, targets: [{provider: a, model: x}]}
  - {name: m2, targets: [{provider: b, model: y}]}
`), "t.yaml", testTypes())
	if err != nil {
		t.Fatal(err)
	}
	if m, ok := cfg.Model("m2"); !ok || m != &cfg.Models[1] {
		t.Errorf("Model(m2) = %v, %v; want &Models[1]", m, ok)
	}
	if _, ok := cfg.Model("nope"); ok {
		t.Error("Model(nope) found")
	}
	if p, ok := cfg.Provider("b"); !ok || p != &cfg.Providers[1] {
		t.Errorf("Provider(b) = %v, %v; want &Providers[1]", p, ok)
	}
	// A hand-built Config has no index and still works.
	hand := &Config{Models: []Model{{Name: "h"}}, Providers: []Provider{{Name: "q"}}}
	if _, ok := hand.Model("h"); !ok {
		t.Error("hand-built Model(h) not found")
	}
	if _, ok := hand.Provider("q"); !ok {
		t.Error("hand-built Provider(q) not found")
	}
}

func TestEffectiveTimeouts(t *testing.T) {
	builtin := Timeouts{Connect: DefaultConnectTimeout, FirstByte: DefaultFirstByteTimeout, Idle: DefaultIdleTimeout, Total: DefaultTotalTimeout}
	tests := []struct {
		name     string
		model    Timeouts
		defaults Timeouts
		want     Timeouts
	}{
		{"nothing set", Timeouts{}, Timeouts{}, builtin},
		{"top level only", Timeouts{}, Timeouts{Idle: secs(7)}, Timeouts{Connect: DefaultConnectTimeout, FirstByte: DefaultFirstByteTimeout, Idle: secs(7), Total: DefaultTotalTimeout}},
		{"model beats top level per field", Timeouts{Connect: secs(1)}, Timeouts{Connect: secs(2), Total: secs(3)},
			Timeouts{Connect: secs(1), FirstByte: DefaultFirstByteTimeout, Idle: DefaultIdleTimeout, Total: secs(3)}},
		{"all from model", Timeouts{secs(1), secs(2), secs(3), secs(4)}, Timeouts{secs(5), secs(6), secs(7), secs(8)}, Timeouts{secs(1), secs(2), secs(3), secs(4)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := &Model{Timeouts: tt.model}
			if diff := cmp.Diff(tt.want, m.EffectiveTimeouts(tt.defaults)); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDurationText(t *testing.T) {
	var d Duration
	if err := d.UnmarshalText([]byte("1m30s")); err != nil || d.D() != 90*time.Second {
		t.Fatalf("UnmarshalText(1m30s) = %v, %v", d, err)
	}
	if b, _ := d.MarshalText(); string(b) != "1m30s" {
		t.Errorf("MarshalText = %s", b)
	}
	if err := d.UnmarshalText([]byte("90")); err == nil {
		t.Error("UnmarshalText(90) accepted a duration without a unit")
	}
}

func TestAnchorsAndMerge(t *testing.T) {
	cfg, err := Parse([]byte(`
x-base: &base {type: openai-compatible, base_url: "http://h:1/v1"}
providers:
  - <<: *base
    name: a
  - <<: [*base]
    name: b
    base_url: http://other:2/v1
models:
  - &m {name: m, targets: [{provider: a, model: x}]}
`), "t.yaml", testTypes())
	if err != nil {
		t.Fatal(err)
	}
	if p := cfg.Providers[0]; p.Type != "openai-compatible" || p.BaseURL != "http://h:1/v1" {
		t.Errorf("merged provider a = %v", p)
	}
	if p := cfg.Providers[1]; p.BaseURL != "http://other:2/v1" {
		t.Errorf("own key must beat merged one: %v", p)
	}
}

// onlyError asserts err is an *Errors holding exactly one problem.
func onlyError(t *testing.T, err error) FieldError {
	t.Helper()
	var errs *Errors
	if !errors.As(err, &errs) {
		t.Fatalf("error %v (%T) is not *Errors", err, err)
	}
	if len(*errs) != 1 {
		t.Fatalf("got %d errors, want 1:\n%v", len(*errs), err)
	}
	return (*errs)[0]
}
