package config

import (
	"errors"
	"strings"
	"testing"
)

// problem is an expected FieldError: msg need only be a part of the message.
type problem struct {
	line, col int
	field     string
	msg       string
}

// checkProblems asserts err lists exactly want, in order.
func checkProblems(t *testing.T, err error, want []problem) {
	t.Helper()
	var errs *Errors
	if !errors.As(err, &errs) {
		t.Fatalf("error %v (%T) is not *Errors", err, err)
	}
	if len(*errs) != len(want) {
		t.Fatalf("got %d problems, want %d:\n%v", len(*errs), len(want), err)
	}
	for i, w := range want {
		g := (*errs)[i]
		if g.Line != w.line || g.Column != w.col || g.Field != w.field || !strings.Contains(g.Message, w.msg) {
			t.Errorf("problem %d:\n got %d:%d %s: %s\nwant %d:%d %s: …%s…", i, g.Line, g.Column, g.Field, g.Message, w.line, w.col, w.field, w.msg)
		}
	}
}

// p1 defines provider p on line 1, for cases about models.
const p1 = "providers: [{name: p, type: mock}]\n"

func TestValidation(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want []problem
	}{
		// Decoding: unknown fields and wrong types.
		{"unknown top-level field", "listne: x\n", []problem{{1, 1, "listne", `unknown field "listne"; did you mean "listen"?`}}},
		{"unknown nested field", "server:\n  max_body: 1\n", []problem{{2, 3, "server.max_body", `unknown field "max_body"`}}},
		{"unknown field in a list item", "providers:\n  - name: a\n    type: mock\n    api-key: k\n", []problem{{4, 5, "providers[0].api-key", `did you mean "api_key"?`}}},
		{"list expected", "providers: {name: a}\n", []problem{{1, 12, "providers", "expected a list, got a mapping"}}},
		{"mapping expected", "storage: ./db\n", []problem{{1, 10, "storage", "expected a mapping, got a string"}}},
		{"string expected", "listen: [a]\n", []problem{{1, 9, "listen", "expected a string, got a list"}}},
		{"integer expected", "keys:\n  - key: k\n    rpm: lots\n", []problem{{3, 10, "keys[0].rpm", "expected an integer, got a string"}}},
		{"integer not float", "keys:\n  - key: k\n    tpm: 1.5\n", []problem{{3, 10, "keys[0].tpm", "expected an integer, got a number"}}},
		{"boolean expected", "log:\n  requests: yes\n", []problem{{2, 13, "log.requests", `expected true or false, got a string ("yes" is a string in YAML 1.2)`}}},
		{"duration needs a unit", "timeouts:\n  idle: 30\n", []problem{{2, 9, "timeouts.idle", "expected a duration with a unit"}}},
		{"duration unparsable", "timeouts:\n  total: soon\n", []problem{{2, 10, "timeouts.total", `invalid duration "soon"`}}},
		{"number expected", "cache:\n  semantic:\n    threshold: high\n", []problem{{3, 16, "cache.semantic.threshold", "expected a number, got a string"}}},
		{"finite number", "cache:\n  semantic:\n    threshold: .nan\n", []problem{{3, 16, "cache.semantic.threshold", "must be a finite number"}}},
		{"alias to unknown anchor", "listen: *nowhere\n", []problem{{1, 9, "listen", "alias to an unknown anchor"}}},
		{"top level must be a mapping", "- a\n- b\n", []problem{{1, 1, "", "expected a mapping, got a list"}}},

		// Syntax.
		{"syntax error", "listen: a\nproviders: [\n", []problem{{2, 12, "", "invalid YAML: sequence end token ']' not found"}}},
		{"duplicate mapping key", "listen: a\nlisten: b\n", []problem{{2, 1, "", `invalid YAML: mapping key "listen" already defined`}}},
		{"two documents", "listen: a:1\n---\nlisten: b:2\n", []problem{{3, 1, "", "one YAML document"}}},

		// Top level, server and log.
		{"prewarm out of range", "providers:\n  - {name: a, type: mock, prewarm: -1}\n  - {name: b, type: mock, prewarm: 10001}\n", []problem{
			{2, 36, "providers[0].prewarm", "must be between 0 and 10000 connections"},
			{3, 36, "providers[1].prewarm", "must be between 0 and 10000 connections"},
		}},
		{"listen without port", "listen: localhost\n", []problem{{1, 9, "listen", "must be host:port"}}},
		{"listen bad port", "listen: \":70000\"\n", []problem{{1, 9, "listen", "must be host:port"}}},
		{"max_body_bytes zero", "server:\n  max_body_bytes: 0\n", []problem{{2, 19, "server.max_body_bytes", "must be greater than 0"}}},
		{"negative server durations", "server:\n  shutdown_grace: -1s\n  read_header_timeout: -2s\n", []problem{
			{2, 19, "server.shutdown_grace", "must not be negative"},
			{3, 24, "server.read_header_timeout", "must not be negative"},
		}},
		{"negative top-level timeouts", "timeouts: {connect: -1s, first_byte: -1s, idle: -1s, total: -1s}\n", []problem{
			{1, 21, "timeouts.connect", "must not be negative"},
			{1, 38, "timeouts.first_byte", "must not be negative"},
			{1, 49, "timeouts.idle", "must not be negative"},
			{1, 61, "timeouts.total", "must not be negative"},
		}},
		{"unknown log level", "log:\n  level: verbose\n", []problem{{2, 10, "log.level", `unknown log level "verbose"; want one of debug, info, warn, error`}}},
		{"redis scheme", "storage:\n  redis: http://:pw@cache:6379\n", []problem{{2, 10, "storage.redis", "must be a redis://, rediss://, unix://, redis+cluster:// or redis+sentinel:// URL, or a list"}}},
		{"redis cluster without ports", "storage:\n  redis: redis+cluster://a,b\n", []problem{{2, 10, "storage.redis", "host:port with a port from 1 to 65535"}}},
		{"redis cluster empty host", "storage:\n  redis: redis+cluster://a:1,,b:2\n", []problem{{2, 10, "storage.redis", "host:port"}}},
		{"redis cluster database", "storage:\n  redis: redis+cluster://a:1/2\n", []problem{{2, 10, "storage.redis", "database 0 only"}}},
		{"redis cluster query", "storage:\n  redis: redis+cluster://a:1?dial_timeout=1s\n", []problem{{2, 10, "storage.redis", "takes no query parameters"}}},
		{"redis cluster bad password", "storage:\n  redis: redis+cluster://u:%zz@a:1\n", []problem{{2, 10, "storage.redis", "percent-encode"}}},
		{"redis sentinel without master", "storage:\n  redis: redis+sentinel://s:26379\n", []problem{{2, 10, "storage.redis", "/<master name>"}}},
		{"redis sentinel bad port", "storage:\n  redis: redis+sentinel://s:0/m\n", []problem{{2, 10, "storage.redis", "host:port"}}},
		{"redis seed without port", "storage:\n  redis:\n    - 10.0.0.1:7000\n    - 10.0.0.2\n", []problem{{4, 7, "storage.redis[1]", "must be host:port"}}},
		{"redis seed not a string", "storage:\n  redis: [a:1, [b:2]]\n", []problem{{2, 16, "storage.redis[1]", "expected host:port, got a list"}}},
		{"redis seed a mapping", "storage:\n  redis:\n    - host: b\n", []problem{{3, 7, "storage.redis[0]", "must be host:port"}}},
		{"redis seeds empty", "storage:\n  redis: []\n", []problem{{2, 10, "storage.redis", "an empty list names no cluster node"}}},
		{"redis a mapping", "storage:\n  redis: {url: x}\n", []problem{{2, 10, "storage.redis", "expected a URL or a list of host:port, got a mapping"}}},
		{"redis prefix with a brace", "limits:\n  redis_prefix: \"gh{1}:\"\n", []problem{{2, 17, "limits.redis_prefix", "must not contain { or }"}}},
		{"postgres scheme", "storage:\n  postgres: mysql://u:pw@db/x\n", []problem{{2, 13, "storage.postgres", "must be a postgres:// URL"}}},

		// Providers.
		{"provider name required", "providers:\n  - type: mock\n", []problem{{2, 5, "providers[0].name", "is required"}}},
		{"provider type required", "providers:\n  - name: a\n", []problem{{2, 5, "providers[0].type", "is required; want one of openai, openai-compatible"}}},
		{"unknown provider type", "providers:\n  - name: a\n    type: openia\n", []problem{{3, 11, "providers[0].type", `unknown provider type "openia"`}}},
		{"duplicate provider", "providers:\n  - {name: a, type: mock}\n  - {name: a, type: mock}\n", []problem{{3, 12, "providers[1].name", `duplicate provider name "a" (first at line 2)`}}},
		{"unknown preset", "providers:\n  - name: a\n    type: openai-compatible\n    preset: grok\n", []problem{{4, 13, "providers[0].preset", `unknown preset "grok"`}}},
		{"preset needs openai-compatible", "providers:\n  - name: a\n    type: openai\n    preset: groq\n", []problem{{4, 13, "providers[0].preset", "only allowed with type openai-compatible"}}},
		{"base_url required for azure", "providers:\n  - name: a\n    type: azure\n", []problem{{2, 5, "providers[0].base_url", "is required for type azure"}}},
		{"base_url required without preset", "providers:\n  - name: a\n    type: openai-compatible\n", []problem{{2, 5, "providers[0].base_url", "required for type openai-compatible without a preset"}}},
		{"base_url relative", "providers:\n  - name: a\n    type: openai\n    base_url: api.openai.com/v1\n", []problem{{4, 15, "providers[0].base_url", "absolute http:// or https:// URL"}}},
		{"base_url scheme", "providers:\n  - name: a\n    type: ollama\n    base_url: ftp://box/\n", []problem{{4, 15, "providers[0].base_url", "absolute http:// or https:// URL"}}},
		{"api_key with a newline", "providers:\n  - name: a\n    type: openai\n    api_key: \"sk-1234\\n\"\n", []problem{{4, 14, "providers[0].api_key", "whitespace or a line break"}}},
		{"bad header name", "providers:\n  - name: a\n    type: mock\n    headers: {\"x y\": v}\n", []problem{{4, 22, "providers[0].headers.x y", "not a valid HTTP header name"}}},
		{"bad header value", "providers:\n  - name: a\n    type: mock\n    headers: {X-A: \"1\\r\\n2\"}\n", []problem{{4, 20, "providers[0].headers.X-A", "must not contain a line break"}}},

		// Models and targets.
		{"model name required", p1 + "models:\n  - targets: [{provider: p, model: x}]\n", []problem{{3, 5, "models[0].name", "is required"}}},
		{"duplicate model", p1 + "models:\n  - {name: m, targets: [{provider: p, model: x}]}\n  - {name: m, targets: [{provider: p, model: y}]}\n",
			[]problem{{4, 12, "models[1].name", `duplicate model name "m" (first at line 3)`}}},
		{"unknown strategy", p1 + "models:\n  - name: m\n    strategy: random\n    targets: [{provider: p, model: x}]\n", []problem{{4, 15, "models[0].strategy", `unknown strategy "random"`}}},
		{"no targets", p1 + "models:\n  - name: m\n", []problem{{3, 5, "models[0].targets", "at least one target is required"}}},
		{"empty targets", p1 + "models:\n  - name: m\n    targets: []\n", []problem{{4, 14, "models[0].targets", "at least one target is required"}}},
		{"target provider required", p1 + "models:\n  - name: m\n    targets:\n      - model: x\n", []problem{{5, 9, "models[0].targets[0].provider", "is required"}}},
		{"target provider unknown", p1 + "models:\n  - name: m\n    targets:\n      - provider: q\n        model: x\n", []problem{{5, 19, "models[0].targets[0].provider", `unknown provider "q"`}}},
		{"target model required", p1 + "models:\n  - name: m\n    targets: [{provider: p}]\n", []problem{{4, 15, "models[0].targets[0].model", "is required"}}},
		{"negative weight", p1 + "models:\n  - name: m\n    targets: [{provider: p, model: x, weight: -1}]\n", []problem{{4, 47, "models[0].targets[0].weight", "must not be negative"}}},
		{"weighted with no weight", p1 + "models:\n  - name: m\n    strategy: weighted\n    targets: [{provider: p, model: x, weight: 0}]\n",
			[]problem{{5, 14, "models[0].targets", "needs at least one target with a weight above 0"}}},
		{"negative model timeout", p1 + "models:\n  - name: m\n    targets: [{provider: p, model: x}]\n    timeouts: {idle: -5s}\n", []problem{{5, 22, "models[0].timeouts.idle", "must not be negative"}}},

		// Keys.
		{"key required", "keys:\n  - name: a\n", []problem{{2, 5, "keys[0].key", "is required"}}},
		{"duplicate key", "keys:\n  - key: same\n  - key: same\n", []problem{{3, 10, "keys[1].key", "the same value as keys[0] (line 2)"}}},
		{"duplicate key name", "keys:\n  - {key: a, name: n}\n  - {key: b, name: n}\n", []problem{{3, 20, "keys[1].name", `duplicate key name "n"`}}},
		{"negative limits", "keys:\n  - key: k\n    rpm: -1\n    tpm: -2\n", []problem{
			{3, 10, "keys[0].rpm", "must not be negative"},
			{4, 10, "keys[0].tpm", "must not be negative"},
		}},
		{"negative budget", "keys:\n  - key: k\n    budget: {usd: -1, period: day}\n", []problem{{3, 19, "keys[0].budget.usd", "must not be negative"}}},
		{"unknown period", "keys:\n  - key: k\n    budget: {usd: 1, period: year}\n", []problem{{3, 30, "keys[0].budget.period", `unknown budget period "year"`}}},
		{"period required", "keys:\n  - key: k\n    budget:\n      usd: 1\n", []problem{{4, 7, "keys[0].budget.period", "is required"}}},
		{"key names unknown model", p1 + "models: [{name: m, targets: [{provider: p, model: x}]}]\nkeys:\n  - key: k\n    models: [m, n]\n",
			[]problem{{5, 17, "keys[0].models[1]", `unknown model "n"`}}},
		{"key names unknown provider", p1 + "keys:\n  - key: k\n    providers: [p, q]\n",
			[]problem{{4, 20, "keys[0].providers[1]", `unknown provider "q"`}}},
		{"model limits", p1 + "models: [{name: m, targets: [{provider: p, model: x}]}]\nkeys:\n  - key: k\n    model_limits:\n      m: {rpm: -1, tpm: 5}\n      n: {rpm: 1}\n",
			[]problem{
				{6, 16, "keys[0].model_limits.m.rpm", "must not be negative"},
				{7, 10, "keys[0].model_limits.n", `unknown model "n"`},
			}},
		{"model limits shape", "keys:\n  - key: k\n    model_limits:\n      m: {rps: 1}\n", []problem{
			{4, 10, "keys[0].model_limits.m", `unknown model "m"`},
			{4, 11, "keys[0].model_limits.m.rps", `unknown field "rps"`},
		}},
		{"model limits not a map", "keys:\n  - key: k\n    model_limits: [m]\n", []problem{{3, 19, "keys[0].model_limits", ""}}},

		// Cache.
		{"negative ttl", "cache:\n  exact: {enabled: true, ttl: -1m}\n", []problem{{2, 31, "cache.exact.ttl", "must not be negative"}}},
		{"threshold zero", "cache:\n  semantic: {threshold: 0}\n", []problem{{2, 25, "cache.semantic.threshold", "above 0 and at most 1"}}},
		{"threshold above one", "cache:\n  semantic: {threshold: 1.01}\n", []problem{{2, 25, "cache.semantic.threshold", "above 0 and at most 1"}}},
		{"semantic needs an embedder", "cache:\n  semantic:\n    enabled: true\n", []problem{
			{3, 5, "cache.semantic.embedder.provider", "is required when the semantic cache is enabled"},
			{3, 5, "cache.semantic.embedder.model", "is required when the semantic cache is enabled"},
		}},
		{"cache size negative", "cache:\n  exact: {max_bytes: -1}\n", []problem{{2, 22, "cache.exact.max_bytes", "must not be negative"}}},
		{"usage retention negative days", "usage:\n  retention: -1d\n", []problem{{2, 14, "usage.retention", `invalid duration "-1d"`}}},
		{"usage redaction pattern invalid", "usage:\n  bodies:\n    redact: [{pattern: 'a(b'}]\n", []problem{{3, 24, "usage.bodies.redact[0].pattern", "invalid regular expression"}}},
		{"usage redaction pattern missing", "usage:\n  bodies:\n    redact: [{replace: x}]\n", []problem{{3, 14, "usage.bodies.redact[0].pattern", "is required"}}},
		{"traces endpoint not a URL", "telemetry:\n  traces: {endpoint: 'localhost:4318'}\n", []problem{{2, 22, "telemetry.traces.endpoint", "absolute http"}}},
		{"traces ratio above one", "telemetry:\n  traces: {sample_ratio: 1.5}\n", []problem{{2, 26, "telemetry.traces.sample_ratio", "from 0 to 1"}}},
		{"session ttl too short", "ui:\n  session_ttl: 30s\n", []problem{{2, 16, "ui.session_ttl", "from 1m to 720h"}}},
		{"session ttl too long", "ui: {session_ttl: 1000h}\n", []problem{{1, 19, "ui.session_ttl", "from 1m to 720h"}}},
		{"usage queue negative", "usage:\n  queue: -1\n", []problem{{2, 10, "usage.queue", ""}}},
		{"embedder provider unknown", "cache:\n  semantic:\n    embedder: {provider: nope, model: e}\n", []problem{{3, 26, "cache.semantic.embedder.provider", `unknown provider "nope"`}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Parse([]byte(tt.yaml), "t.yaml", testTypes())
			if err == nil {
				t.Fatalf("Parse accepted it: %+v", cfg)
			}
			if cfg != nil {
				t.Error("Parse returned a Config with an error")
			}
			checkProblems(t, err, tt.want)
		})
	}
}

// Boundary values that must pass, so the rules above are not too strict.
func TestValidationAccepts(t *testing.T) {
	for _, y := range []string{
		"listen: \":0\"\n",
		"listen: \"[::1]:8080\"\n",
		"cache:\n  semantic: {threshold: 1}\n",
		"keys:\n  - {key: k, rpm: 0, tpm: 0, budget: {usd: 0, period: total}}\n",
		"storage: {postgres: \"host=db user=gh password=x\"}\n",
		"storage: {redis: unix:///run/redis.sock}\n",
		"storage: {redis: 'redis+cluster://u:p@10.0.0.1:7000,10.0.0.2:7000'}\n",
		"storage: {redis: 'redis+cluster://[::1]:7000,[::1]:7001/'}\n",
		"storage: {redis: 'redis+cluster://h:7000/0'}\n",
		"storage: {redis: 'redis+sentinel://:p@s1:26379,s2:26379/mymaster'}\n",
		"storage: {redis: [10.0.0.1:7000, '[::1]:7001', node-3.internal:6379]}\n",
		"providers: [{name: a, type: openai-compatible, preset: llama.cpp}]\n",
		p1 + "models: [{name: m, strategy: weighted, targets: [{provider: p, model: x, weight: 0}, {provider: p, model: y}]}]\n",
		"x-anything: {whatever: [1, 2]}\n",
		"timeouts: {connect: 0}\n",
		"usage: {retention: 0, records: false}\n",
		"usage: {retention: 2d12h30m}\n",
		"telemetry: {traces: {endpoint: 'http://127.0.0.1:4318', sample_ratio: 0}}\n",
		"telemetry: {traces: {}}\n",
	} {
		if _, err := Parse([]byte(y), "t.yaml", testTypes()); err != nil {
			t.Errorf("Parse(%q): %v", y, err)
		}
	}
}

// Every problem in a file is reported at once, in file order, one per line.
func TestMultipleErrors(t *testing.T) {
	src := `listen: nowhere
providers:
  - name: a
    type: openai
    bse_url: https://x
  - name: a
    type: azure
models:
  - name: m
    targets:
      - {provider: b, model: x, weight: -2}
keys:
  - key: k
    budget: {usd: 5, period: fortnight}
`
	_, err := Parse([]byte(src), "gh.yaml", testTypes())
	want := `gh.yaml:1:9: listen: must be host:port, such as 127.0.0.1:8080 or :8080
gh.yaml:5:5: providers[0].bse_url: unknown field "bse_url"; did you mean "base_url"?
gh.yaml:6:5: providers[1].base_url: is required for type azure
gh.yaml:6:11: providers[1].name: duplicate provider name "a" (first at line 3)
gh.yaml:11:20: models[0].targets[0].provider: unknown provider "b"; it must be one of providers[].name
gh.yaml:11:41: models[0].targets[0].weight: must not be negative
gh.yaml:14:30: keys[0].budget.period: unknown budget period "fortnight"; want one of day, week, month, total`
	if err == nil || err.Error() != want {
		t.Errorf("got:\n%v\nwant:\n%s", err, want)
	}
	// Each problem is also reachable with errors.As.
	var fe FieldError
	if !errors.As(err, &fe) || fe.Line != 1 {
		t.Errorf("errors.As(FieldError) = %v", fe)
	}
}

// Windows line endings, even inside a multi-line quoted value, do not
// shift line numbers.
func TestCRLFLineNumbers(t *testing.T) {
	_, err := Parse([]byte("log:\r\n  level: \"x\r\n  y\"\r\nlisten: x\r\n"), "t.yaml", testTypes())
	checkProblems(t, err, []problem{
		{2, 10, "log.level", `unknown log level "x y"`},
		{4, 9, "listen", "must be host:port"},
	})
}

func TestLoadMissingFile(t *testing.T) {
	_, err := Load("testdata/does-not-exist.yaml", testTypes())
	if err == nil || !strings.Contains(err.Error(), "does-not-exist.yaml") {
		t.Errorf("Load(missing) = %v", err)
	}
}

// Aliases cannot turn a small file into an enormous config.
func TestAliasBomb(t *testing.T) {
	var b strings.Builder
	b.WriteString("x-t: &t [")
	for i := range 400 {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("{provider: p, model: x}")
	}
	b.WriteString("]\nx-m: &m {name: m, targets: *t}\nmodels: [")
	for i := range 400 {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("*m")
	}
	b.WriteString("]\n")
	_, err := Parse([]byte(b.String()), "t.yaml", testTypes())
	if err == nil || !strings.Contains(err.Error(), "expands to more than") {
		t.Fatalf("Parse(alias bomb) = %v", err)
	}
}
