package config

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

// The secrets of secretsYAML, which no output may contain.
var secretsYAML = struct {
	env  map[string]string
	yaml string
}{
	env: map[string]string{
		"GH_T_ADMIN":  "admin-Secret-0001",
		"GH_T_OPENAI": "sk-Secret-0002",
		"GH_T_HEADER": "Bearer Secret-0003",
		"GH_T_KEY":    "gh-Secret-0004",
		"GH_T_REDIS":  "Secret-0005",
		"GH_T_PG":     "Secret-0006",
		"GH_T_QUERY":  "Secret-0007",
	},
	yaml: `admin_key: ${GH_T_ADMIN}
storage:
  redis: redis://:${GH_T_REDIS}@cache:6379/0
  postgres: postgres://gh:${GH_T_PG}@db:5432/gh
providers:
  - name: openai
    type: openai
    api_key: ${GH_T_OPENAI}
    headers: {Authorization: "${GH_T_HEADER}"}
  - name: gem
    type: gemini
    base_url: https://gemini.example/v1?key=${GH_T_QUERY}
models:
  - {name: m, targets: [{provider: openai, model: x}]}
keys:
  - {key: "${GH_T_KEY}", name: k, budget: {usd: 1, period: day}}
`,
}

func setSecrets(t *testing.T) {
	for k, v := range secretsYAML.env {
		t.Setenv(k, v)
	}
}

func assertNoSecret(t *testing.T, what, s string) {
	t.Helper()
	if strings.Contains(s, "Secret-") {
		t.Errorf("%s leaks a secret:\n%s", what, s)
	}
}

func TestFormattingRedactsSecrets(t *testing.T) {
	setSecrets(t)
	cfg, err := Parse([]byte(secretsYAML.yaml), "t.yaml", testTypes())
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&logs, nil))
	log.Info("cfg", "config", cfg, "provider", cfg.Providers[0], "key", cfg.Keys[0], "value", *cfg)
	outputs := map[string]string{
		"%v *Config":     fmt.Sprintf("%v", cfg),
		"%+v *Config":    fmt.Sprintf("%+v", cfg),
		"%#v *Config":    fmt.Sprintf("%#v", cfg),
		"%+v Config":     fmt.Sprintf("%+v", *cfg),
		"%s Config":      fmt.Sprint(*cfg),
		"%+v providers":  fmt.Sprintf("%+v", cfg.Providers),
		"%#v provider":   fmt.Sprintf("%#v", cfg.Providers[0]),
		"%+v &provider":  fmt.Sprintf("%+v", &cfg.Providers[1]),
		"%+v keys":       fmt.Sprintf("%+v", cfg.Keys),
		"%#v key":        fmt.Sprintf("%#v", cfg.Keys[0]),
		"%+v storage":    fmt.Sprintf("%+v", cfg.Storage),
		"%#v storage":    fmt.Sprintf("%#v", cfg.Storage),
		"Redacted":       fmt.Sprintf("%+v", *cfg.Redacted()),
		"Redacted field": cfg.Redacted().Providers[0].APIKey + cfg.Redacted().Storage.Redis,
		"slog":           logs.String(),
	}
	for what, s := range outputs {
		assertNoSecret(t, what, s)
	}
	// Redaction must not be blanket: the rest is still there to debug with.
	for _, want := range []string{"openai", "cache:6379", "gemini.example", "Authorization", redacted} {
		if !strings.Contains(outputs["%+v *Config"], want) {
			t.Errorf("%%+v lost %q:\n%s", want, outputs["%+v *Config"])
		}
	}
	// Redacted copies; the original keeps its secrets for the code that sends them.
	if cfg.Providers[0].APIKey != "sk-Secret-0002" || cfg.Providers[0].Headers["Authorization"] != "Bearer Secret-0003" || cfg.Keys[0].Key != "gh-Secret-0004" {
		t.Errorf("redaction modified the config: %q %q %q", cfg.Providers[0].APIKey, cfg.Providers[0].Headers, cfg.Keys[0].Key)
	}
}

func TestErrorsRedactSecrets(t *testing.T) {
	setSecrets(t)
	t.Setenv("GH_T_BROKEN", "Secret-0008: {[")
	tests := []struct{ name, yaml string }{
		{"invalid config around secrets", secretsYAML.yaml + "listen: nope\nlog: {level: loud}\n"},
		{"secret of the wrong type", "admin_key: [${GH_T_ADMIN}]\nproviders:\n  - {name: a, type: mock, api_key: {k: ${GH_T_OPENAI}}}\n"},
		{"duplicate keys", "keys:\n  - key: ${GH_T_KEY}\n  - key: ${GH_T_KEY}\n"},
		{"bad storage URLs", "storage:\n  redis: http://:${GH_T_REDIS}@cache\n  postgres: mysql://u:${GH_T_PG}@db/x\n"},
		{"bad cluster URL", "storage:\n  redis: 'redis+cluster://:${GH_T_REDIS}@[::1]:1,[::1]:0'\n"},
		{"bad Sentinel URL", "storage:\n  redis: 'redis+sentinel://:${GH_T_REDIS}@s:1'\n"},
		{"password as a seed", "storage:\n  redis: ['${GH_T_REDIS}@a:1']\n"},
		{"bad header value", "providers:\n  - {name: a, type: mock, headers: {X-A: \"${GH_T_HEADER}\\n\"}}\n"},
		{"api key with a newline", "providers:\n  - {name: a, type: mock, api_key: \"${GH_T_OPENAI}\\n\"}\n"},
		{"syntax error from a value", "admin_key: ${GH_T_BROKEN}\n"},
		{"syntax error quoting a secret", "${GH_T_KEY}: 1\n${GH_T_KEY}: 2\n"},
		{"secret as an unknown key's value", "providers:\n  - {name: a, type: mock, apikey: ${GH_T_OPENAI}}\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.yaml), "t.yaml", testTypes())
			if err == nil {
				t.Fatal("Parse accepted it")
			}
			assertNoSecret(t, "Error()", err.Error())
			assertNoSecret(t, "%+v", fmt.Sprintf("%+v", err))
		})
	}
}

func TestRedactURL(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", ""},
		{"./data/gh.db", "./data/gh.db"},
		{"redis://cache:6379/0", "redis://cache:6379/0"},
		{"redis://:pw@cache:6379/0", "redis://:redacted@cache:6379/0"},
		{"postgres://u:pw@db/x?sslmode=require", "postgres://u:redacted@db/x?sslmode=redacted"},
		{"host=db user=u password=pw", redacted},
		{"https://api.example/v1?key=abc", "https://api.example/v1?key=redacted"},
		{"redis+cluster://u:pw@a:1,b:2", "redis+cluster://u:redacted@a:1,b:2"},
		{"redis+cluster://a:1,b:2", "redis+cluster://a:1,b:2"},
		{"redis+cluster://:pw@[::1]:1,[::1]:2/", "redis+cluster://:redacted@[::1]:1,[::1]:2/"},
		{"redis+cluster://u@[::1]:1,[::1]:2", "redis+cluster://u@[::1]:1,[::1]:2"},
		{"redis+cluster://u:p%zz@[::1]:1,[::1]:2", "redis+cluster://" + redacted + "@[::1]:1,[::1]:2"},
		{"redis+sentinel://:pw@s1:1,s2:2/m", "redis+sentinel://:redacted@s1:1,s2:2/m"},
	}
	for _, tt := range tests {
		if got := redactURL(tt.in); got != tt.want {
			t.Errorf("redactURL(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
