package example

import (
	"net/http"
	"strings"
	"testing"

	"gatehouse/internal/config"
	"gatehouse/internal/llm"
	"gatehouse/internal/provider"
	"gatehouse/internal/provider/providertest"
)

// TestConformance is the one conformance-suite call every provider makes:
// parrot's documented answers, and what each must become.
func TestConformance(t *testing.T) {
	usage := llm.Usage{PromptTokens: 3, CompletionTokens: 5, TotalTokens: 8}
	call := []llm.ToolCall{{Name: "get_weather", Arguments: `{"city":"Paris"}`}}
	providertest.Run(t, providertest.Suite{
		Type:       Type(),
		Settings:   provider.Settings{APIKey: "pk-test"},
		Deployment: provider.Deployment{Provider: "parrot", Model: "m", BaseURL: DefaultBaseURL, APIKey: "pk-test", Adapter: Adapter{}, DropUnsupported: true},
		Text: providertest.Fixture{
			Body: []byte(`{"text":"Hello there","call":null,"stop":"end","usage":{"in":3,"out":5}}`),
			Want: providertest.Want{Content: "Hello there", Finish: "stop", Usage: usage},
		},
		TextStream: providertest.Fixture{
			Body: []byte("{\"text\":\"Hello\"}\n{\"text\":\" there\"}\n{\"stop\":\"end\",\"usage\":{\"in\":3,\"out\":5}}\n"),
			Want: providertest.Want{Content: "Hello there", Finish: "stop", Usage: usage},
		},
		Tool: providertest.Fixture{
			Body: []byte(`{"text":"","call":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"},"stop":"call","usage":{"in":3,"out":5}}`),
			Want: providertest.Want{ToolCalls: call, Finish: "tool_calls", Usage: usage},
		},
		ToolStream: providertest.Fixture{
			Body: []byte("{\"call\":{\"name\":\"get_weather\",\"arguments\":\"{\\\"city\\\":\\\"Paris\\\"}\"}}\n{\"stop\":\"call\",\"usage\":{\"in\":3,\"out\":5}}\n"),
			Want: providertest.Want{ToolCalls: call, Finish: "tool_calls", Usage: usage},
		},
		Errors: []providertest.ErrorFixture{
			{Name: "overloaded", Status: 503, Header: http.Header{"Retry-After": {"2"}}, Body: []byte(`{"error":"too many birds"}`),
				WantStatus: 503, WantMessage: "too many birds", WantRetryAfter: 2e9},
		},
	})
}

// TestRegisteredTypeIsValidatedByConfig registers parrot next to nothing
// else and shows config validation drawing on the registry: the type is
// accepted, and its name is in the list an unknown type is told.
func TestRegisteredTypeIsValidatedByConfig(t *testing.T) {
	r := &provider.Registry{}
	r.Register(Type())
	cfg, err := config.Parse([]byte("providers:\n  - {name: p, type: parrot, api_key: pk-1}\n"), "t.yaml", r)
	if err != nil {
		t.Fatal(err)
	}
	if d, _, err := r.Deployment(provider.Settings{Name: cfg.Providers[0].Name, Type: cfg.Providers[0].Type, APIKey: cfg.Providers[0].APIKey}); err != nil || d.BaseURL != DefaultBaseURL {
		t.Fatalf("deployment %+v: %v", d, err)
	}
	_, err = config.Parse([]byte("providers:\n  - {name: p, type: openai}\n"), "t.yaml", r)
	if err == nil || !strings.Contains(err.Error(), "parrot") {
		t.Fatalf("unknown type: %v", err)
	}
	_, err = config.Parse([]byte("providers:\n  - {name: p, type: parrot, region: eu-west-1}\n"), "t.yaml", r)
	if err == nil || !strings.Contains(err.Error(), "region: is not allowed with type parrot") {
		t.Fatalf("an option parrot does not accept: %v", err)
	}
	if _, _, err := r.Deployment(provider.Settings{Name: "p", Type: "parrot"}); err == nil || !strings.Contains(err.Error(), "api_key is required") {
		t.Fatalf("no key: %v", err)
	}
}
