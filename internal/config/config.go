// Package config owns gatehouse's configuration: it turns one YAML file plus
// the environment into a typed, validated, defaulted Config, reports every
// problem with its file, line, column and field path, and reloads the file
// when it changes (Watcher).
//
// It knows nothing about the request path: it must not import other
// gatehouse packages, database drivers or network clients. Its only
// dependencies are the YAML parser and fsnotify.
package config

import (
	"fmt"
	"time"
)

// Built-in defaults, applied by Parse after validation to fields the file
// leaves out.
const (
	DefaultListen            = "127.0.0.1:8080"
	DefaultSQLite            = "./data/gatehouse.db"
	DefaultMaxBodyBytes      = 10 << 20 // 10 MiB
	DefaultShutdownGrace     = Duration(30 * time.Second)
	DefaultReadHeaderTimeout = Duration(10 * time.Second)
	DefaultMaxHeaderBytes    = 32 << 10 // 32 KiB
	DefaultBodyReadTimeout   = Duration(30 * time.Second)

	DefaultConnectTimeout   = Duration(10 * time.Second)
	DefaultFirstByteTimeout = Duration(120 * time.Second)
	DefaultIdleTimeout      = Duration(60 * time.Second)
	DefaultTotalTimeout     = Duration(10 * time.Minute)

	DefaultLogLevel          = "info"
	DefaultStrategy          = "failover"
	DefaultWeight            = 1 // for a target whose weight is left out; an explicit 0 stays 0
	DefaultExactCacheTTL     = Duration(time.Hour)
	DefaultExactCacheBytes   = 128 << 20
	DefaultSemanticTimeout   = Duration(150 * time.Millisecond)
	DefaultSemanticEntries   = 100000
	DefaultSemanticThreshold = 0.95

	// DefaultDebounce is how long a Watcher waits for a burst of file
	// events to settle before it reloads.
	DefaultDebounce = 100 * time.Millisecond
)

// Config is the whole configuration file. Parse and Load return it
// validated and with defaults applied; treat it as read-only afterwards
// (reload builds a new one).
//
// It has unexported lookup indexes: compare Configs in tests with
// cmpopts.IgnoreUnexported(Config{}).
type Config struct {
	Listen    string     `yaml:"listen"`     // host:port; default 127.0.0.1:8080
	AdminKey  string     `yaml:"admin_key"`  // secret: protects /admin and /ui (role admin)
	AdminKeys []AdminKey `yaml:"admin_keys"` // more admin credentials, each named, with a role; see admins.go
	Storage   Storage    `yaml:"storage"`
	Server    Server     `yaml:"server"`
	Timeouts  Timeouts   `yaml:"timeouts"` // defaults for every model; filled with the built-in defaults
	Log       Log        `yaml:"log"`
	Providers []Provider `yaml:"providers"`
	Models    []Model    `yaml:"models"`
	Keys      []Key      `yaml:"keys"`
	Cache     Cache      `yaml:"cache"`
	Routing   Routing    `yaml:"routing"`   // default routing mode of every model
	Retry     Retry      `yaml:"retry"`     // defaults for every model; see routing.go
	Limits    Limits     `yaml:"limits"`    // admission control; see limits.go
	Pricing   Pricing    `yaml:"pricing"`   // cost accounting; see limits.go
	Breaker   Breaker    `yaml:"breaker"`   // circuit breaker of every deployment
	Usage     Usage      `yaml:"usage"`     // usage records; see usage.go
	Telemetry Telemetry  `yaml:"telemetry"` // traces; see telemetry.go
	UI        UI         `yaml:"ui"`        // the dashboard; see ui.go

	models    map[string]int // name → index in Models
	providers map[string]int // name → index in Providers
	source    [32]byte       // SHA-256 of the bytes parsed, so a Watcher can tell if the file changed
	hasSource bool
}

// Storage says where state lives. Embedded mode (the default) uses SQLite;
// cluster mode is on when both Redis and Postgres are set.
type Storage struct {
	SQLite string `yaml:"sqlite"` // default ./data/gatehouse.db outside cluster mode
	// Redis is a redis://, rediss://, unix://, redis+cluster:// or
	// redis+sentinel:// URL (see redis.go); may hold a password. In the
	// file it may also be a list of cluster nodes' host:port, read as the
	// redis+cluster:// URL of them.
	Redis    string `yaml:"redis" config:"redis"`
	Postgres string `yaml:"postgres"` // postgres:// URL or key=value DSN; may hold a password
}

// Server configures the inbound HTTP server.
type Server struct {
	MaxBodyBytes      int64    `yaml:"max_body_bytes" config:"size"` // default 10 MiB; "10MiB", "512KB" or a byte count
	ShutdownGrace     Duration `yaml:"shutdown_grace"`               // default 30s
	ReadHeaderTimeout Duration `yaml:"read_header_timeout"`          // default 10s
	// H2C serves HTTP/2 over plain TCP to clients that open with its
	// preface (prior knowledge, as gRPC-style clients and service meshes
	// do); HTTP/1.1 clients are served as before. Default true.
	H2C *bool `yaml:"h2c"`
	// MaxHeaderBytes bounds a request's header section (request line and
	// every header field); larger requests get 431. Default 32 KiB.
	MaxHeaderBytes int64 `yaml:"max_header_bytes" config:"size"`
	// BodyReadTimeout is the longest wait for the next bytes of a request
	// body: a client that trickles its body slower than that is cut off
	// (408). It does not bound a response, so long streams are unaffected.
	// Default 30s.
	BodyReadTimeout Duration `yaml:"body_read_timeout"`
	// TLS serves HTTPS (HTTP/2 and HTTP/1.1) instead of plain HTTP; see
	// listener.go.
	TLS *TLS `yaml:"tls"`
	// HTTP1Engine is what serves HTTP/1.x connections: "gatehouse" (the
	// gateway's own, internal/h1, the default: it writes a response's
	// header fields for less work and holds less per open stream) or
	// "net/http" (the standard library's server). Requests are parsed by
	// net/http's parser either way, and HTTP/2 is net/http's either way.
	HTTP1Engine string `yaml:"http1_engine"`
}

// The values of server.http1_engine.
const (
	EngineNetHTTP   = "net/http"
	EngineGatehouse = "gatehouse"
)

// Timeouts bound one upstream call. A zero field inherits: model → top
// level → built-in default (see Model.EffectiveTimeouts).
type Timeouts struct {
	Connect   Duration `yaml:"connect"`    // default 10s
	FirstByte Duration `yaml:"first_byte"` // default 120s: request sent → response headers (and first stream event)
	Idle      Duration `yaml:"idle"`       // default 60s: longest gap between stream events
	Total     Duration `yaml:"total"`      // default 10m
}

// Log configures the gateway's own logging.
type Log struct {
	Level    string `yaml:"level"`    // debug | info | warn | error; default info
	Requests *bool  `yaml:"requests"` // log one line per request; default true
}

// Provider is one upstream account: a type of API, where it is, and the
// credential to use.
type Provider struct {
	Name        string            `yaml:"name"`         // referenced by models[].targets[].provider
	Type        string            `yaml:"type"`         // openai | openai-compatible | anthropic | gemini | ollama | azure | bedrock | mock
	Preset      string            `yaml:"preset"`       // only with openai-compatible: a known service's base URL
	BaseURL     string            `yaml:"base_url"`     // absolute http(s) URL; optional where the type or preset has a default
	APIKey      string            `yaml:"api_key"`      // secret: never printed by String, GoString, LogValue or any error
	Local       bool              `yaml:"local"`        // true for ollama/vllm/llama.cpp boxes
	Headers     map[string]string `yaml:"headers"`      // extra headers sent upstream; values are treated as secrets
	StreamUsage *bool             `yaml:"stream_usage"` // ask the upstream for usage in streams; default true
	// DropUnsupported drops request parameters the provider cannot honour
	// instead of answering 400.
	DropUnsupported bool `yaml:"drop_unsupported"`
	// MaxResponseBytes bounds a non-streamed response the gateway reads
	// from this provider; a larger one is answered with 502. Streams are
	// relayed as they come and not bounded. Default 64 MiB.
	MaxResponseBytes int64 `yaml:"max_response_bytes" config:"size"`
	// APIVersion is Azure OpenAI's api-version query parameter; default
	// azure.DefaultAPIVersion for the classic API, none for the v1 API.
	APIVersion string `yaml:"api_version"`
	// Region is the AWS region for bedrock; default AWS_REGION, then
	// AWS_DEFAULT_REGION from the environment.
	Region string `yaml:"region"`
	// Discover lists the provider's models (Ollama's /api/tags) so every
	// model it has is routable by name without a models entry; default
	// true for ollama.
	Discover *bool `yaml:"discover"`
	// ResponsesAPI sends /v1/responses requests to the server as they
	// are, for servers that have OpenAI's Responses API; false translates
	// them to chat completions. Default true for openai and azure (where
	// the api_version has it), false for openai-compatible.
	ResponsesAPI *bool `yaml:"responses_api"`
	// HealthCheck, when set, polls the server's health endpoint and takes
	// its deployments out of selection while it fails.
	HealthCheck *HealthCheck `yaml:"health_check"`
	// Load, when set, reads the server's own load (llama.cpp or vLLM
	// Prometheus metrics) for least-tokens and least-latency.
	Load *LoadSignal `yaml:"load"`
	// Prewarm is how many connections to open to the server when the
	// gateway starts and after each reload, so the first requests skip
	// the TCP and TLS handshakes (a HEAD of base_url each, without
	// credentials); 0 opens none. Default provider.DefaultPrewarm (4),
	// except for a loopback base_url, where there is no handshake worth
	// saving (0).
	Prewarm *int `yaml:"prewarm"`
}

// MaxPrewarm bounds providers[].prewarm: each is a connection held open.
const MaxPrewarm = 10000

// Model is a name clients send as "model", routed to one or more targets.
type Model struct {
	Name     string   `yaml:"name"`
	Strategy string   `yaml:"strategy"` // failover (default) | round-robin | weighted | least-tokens | least-latency | least-requests
	Targets  []Target `yaml:"targets"`
	Timeouts Timeouts `yaml:"timeouts"` // zero fields inherit the top-level timeouts
	Retry    Retry    `yaml:"retry"`    // zero fields inherit the top-level retry settings
	Routing  Routing  `yaml:"routing"`  // empty mode inherits the top-level one
	// Fallbacks are other models tried, in order, when every target of
	// this one failed with an error another deployment could fix.
	Fallbacks []string `yaml:"fallbacks"`
	// ContextFallbacks are models (with longer context windows) tried when
	// the prompt is too long for this one: the provider said so, or the
	// token estimate exceeds MaxContext.
	ContextFallbacks []string `yaml:"context_fallbacks"`
	// MaxContext is the model's context window in tokens; prompts
	// estimated above it (with max_tokens) skip straight to
	// ContextFallbacks. 0: unknown, only the provider's error tells.
	MaxContext int `yaml:"max_context"`
}

// Target is one deployment of a model: a provider and its model id.
type Target struct {
	Provider string `yaml:"provider"` // a providers[].name
	Model    string `yaml:"model"`    // the upstream's model id
	Weight   int    `yaml:"weight"`   // ≥ 0; default 1 when left out; 0 takes the target out of weighted selection
}

// Key is a static virtual key from the file (keys can also live in the
// database, managed by the admin API).
type Key struct {
	Key     string   `yaml:"key"` // secret: the bearer token clients send
	Name    string   `yaml:"name"`
	Project string   `yaml:"project"`
	RPM     int      `yaml:"rpm"` // requests per minute; 0 = unlimited
	TPM     int      `yaml:"tpm"` // tokens per minute; 0 = unlimited
	Budget  *Budget  `yaml:"budget"`
	Models  []string `yaml:"models"` // allowed models; empty = all
	// Providers are the providers (providers[].name) the key's requests
	// may go to; empty = all. A model none of whose targets (fallbacks
	// included) is allowed answers 403.
	Providers []string `yaml:"providers"`
	// ModelLimits are rates per model, by models[].name, on top of RPM
	// and TPM: model_limits: {chat: {rpm: 3, tpm: 10000}}.
	ModelLimits map[string]ModelLimit `yaml:"model_limits"`
	// NoCache bars the key from the response cache.
	NoCache bool `yaml:"no_cache"`
}

// ModelLimit is a key's rate for one model; 0 means unlimited.
type ModelLimit struct {
	RPM int `yaml:"rpm"`
	TPM int `yaml:"tpm"`
}

// Budget caps spend over a period.
type Budget struct {
	USD    float64 `yaml:"usd"`
	Period string  `yaml:"period"` // day | week | month | total; required
}

// Cache holds the cache defaults for every project.
type Cache struct {
	Exact    ExactCache    `yaml:"exact"`
	Semantic SemanticCache `yaml:"semantic"`
}

// ExactCache serves identical requests from a stored response.
type ExactCache struct {
	Enabled bool     `yaml:"enabled"`
	TTL     Duration `yaml:"ttl"` // default 1h
	// MaxBytes bounds the in-process tier (least recently used entries
	// go first); default 128 MiB. "256MiB" or a byte count.
	MaxBytes int64 `yaml:"max_bytes" config:"size"`
}

// SemanticCache serves requests whose embedding is close to a stored one.
type SemanticCache struct {
	Enabled   bool     `yaml:"enabled"`   // the default for every project; a project may opt in on its own
	Threshold float64  `yaml:"threshold"` // cosine similarity in (0,1]; default 0.95
	Embedder  Embedder `yaml:"embedder"`  // required when enabled; a project can opt in only when set
	// Timeout bounds the embedding call; past it the request goes on
	// uncached. Default 150ms.
	Timeout Duration `yaml:"timeout"`
	// MaxEntries bounds the in-process vector index (least recently used
	// go first); default 100000.
	MaxEntries int `yaml:"max_entries"`
	// PerKey scopes the search to the key, not just the project and model.
	PerKey bool `yaml:"per_key"`
}

// Embedder names the model that embeds prompts for the semantic cache.
type Embedder struct {
	Provider string `yaml:"provider"` // a providers[].name
	Model    string `yaml:"model"`
}

// Duration is a time.Duration written in YAML as "30s", "1h" or "1m30s".
type Duration time.Duration

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// String formats d like time.Duration.
func (d Duration) String() string { return time.Duration(d).String() }

// MarshalText writes d as "1m30s".
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText reads "1m30s".
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := parseDuration(string(b))
	if err != nil {
		return fmt.Errorf("invalid duration %q: want a number with a unit, such as 30s, 1m30s or 90d", b)
	}
	*d = Duration(v)
	return nil
}

// Model returns the model named name. It is O(1) on a Config from Parse or
// Load, and falls back to a scan on one built by hand.
func (c *Config) Model(name string) (*Model, bool) {
	if i, ok := c.models[name]; ok && i < len(c.Models) && c.Models[i].Name == name {
		return &c.Models[i], true
	}
	for i := range c.Models {
		if c.Models[i].Name == name {
			return &c.Models[i], true
		}
	}
	return nil, false
}

// Provider returns the provider named name, like Model.
func (c *Config) Provider(name string) (*Provider, bool) {
	if i, ok := c.providers[name]; ok && i < len(c.Providers) && c.Providers[i].Name == name {
		return &c.Providers[i], true
	}
	for i := range c.Providers {
		if c.Providers[i].Name == name {
			return &c.Providers[i], true
		}
	}
	return nil, false
}

// Cluster reports whether the config selects cluster mode (Redis and
// PostgreSQL both set).
func (c *Config) Cluster() bool { return c.Storage.Redis != "" && c.Storage.Postgres != "" }

// buildIndex makes Model and Provider O(1). Names are unique after
// validation; on duplicates the first wins, as in the scan.
func (c *Config) buildIndex() {
	c.models = make(map[string]int, len(c.Models))
	for i, m := range c.Models {
		if _, dup := c.models[m.Name]; !dup {
			c.models[m.Name] = i
		}
	}
	c.providers = make(map[string]int, len(c.Providers))
	for i, p := range c.Providers {
		if _, dup := c.providers[p.Name]; !dup {
			c.providers[p.Name] = i
		}
	}
}

// EffectiveTimeouts resolves m's timeouts field by field: the model's own
// value, else defaults' (usually Config.Timeouts), else the built-in default.
func (m *Model) EffectiveTimeouts(defaults Timeouts) Timeouts {
	pick := func(own, def, builtin Duration) Duration {
		switch {
		case own != 0:
			return own
		case def != 0:
			return def
		}
		return builtin
	}
	return Timeouts{
		Connect:   pick(m.Timeouts.Connect, defaults.Connect, DefaultConnectTimeout),
		FirstByte: pick(m.Timeouts.FirstByte, defaults.FirstByte, DefaultFirstByteTimeout),
		Idle:      pick(m.Timeouts.Idle, defaults.Idle, DefaultIdleTimeout),
		Total:     pick(m.Timeouts.Total, defaults.Total, DefaultTotalTimeout),
	}
}
