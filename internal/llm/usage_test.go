package llm

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseUsage(t *testing.T) {
	tests := []struct {
		name   string
		raw    string
		want   Usage
		wantOK bool
	}{
		{"plain", `{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}`, Usage{PromptTokens: 10, CompletionTokens: 5, TotalTokens: 15}, true},
		{"total computed", `{"prompt_tokens":10,"completion_tokens":5}`, Usage{PromptTokens: 10, CompletionTokens: 5, TotalTokens: 15}, true},
		{"total kept when given", `{"prompt_tokens":10,"completion_tokens":5,"total_tokens":20}`, Usage{PromptTokens: 10, CompletionTokens: 5, TotalTokens: 20}, true},
		{
			"details",
			`{"prompt_tokens":100,"completion_tokens":50,"total_tokens":150,` +
				`"prompt_tokens_details":{"cached_tokens":64,"audio_tokens":0},` +
				`"completion_tokens_details":{"reasoning_tokens":32,"accepted_prediction_tokens":0}}`,
			Usage{PromptTokens: 100, CompletionTokens: 50, TotalTokens: 150, CachedTokens: 64, ReasoningTokens: 32},
			true,
		},
		{"null details", `{"prompt_tokens":1,"completion_tokens":1,"prompt_tokens_details":null,"completion_tokens_details":null}`, Usage{PromptTokens: 1, CompletionTokens: 1, TotalTokens: 2}, true},
		{"empty object", `{}`, Usage{}, true},
		{"null", `null`, Usage{}, false},
		{"absent", ``, Usage{}, false},
		{"array", `[1]`, Usage{}, false},
		{"wrong field type", `{"prompt_tokens":"10"}`, Usage{}, false},
		{"float tokens", `{"prompt_tokens":1.5}`, Usage{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := ParseUsage([]byte(tt.raw))
			if ok != tt.wantOK {
				t.Errorf("ParseUsage(%s) ok = %v, want %v", tt.raw, ok, tt.wantOK)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ParseUsage(%s) (-want +got):\n%s", tt.raw, diff)
			}
		})
	}
}

func TestUsageOf(t *testing.T) {
	tests := []struct {
		name   string
		body   string
		want   Usage
		wantOK bool
	}{
		{
			"final stream chunk",
			`{"id":"c","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":12,"total_tokens":21}}`,
			Usage{PromptTokens: 9, CompletionTokens: 12, TotalTokens: 21},
			true,
		},
		{"usage first", `{"usage":{"prompt_tokens":1,"completion_tokens":2},"choices":[{"usage":{"prompt_tokens":7}}]}`, Usage{PromptTokens: 1, CompletionTokens: 2, TotalTokens: 3}, true},
		{"nested usage is not the call's", `{"choices":[{"usage":{"prompt_tokens":7}}]}`, Usage{}, false},
		{"usage null", `{"choices":[],"usage":null}`, Usage{}, false},
		{"no usage", `{"choices":[{"delta":{"content":"hi"}}]}`, Usage{}, false},
		{"not JSON", `data: x`, Usage{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := UsageOf([]byte(tt.body))
			if ok != tt.wantOK {
				t.Errorf("UsageOf(%s) ok = %v, want %v", tt.body, ok, tt.wantOK)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("UsageOf(%s) (-want +got):\n%s", tt.body, diff)
			}
		})
	}
}

// TestKnownKeys: the keys unquoteKey returns as constants are the bytes
// it was given, and cost no allocation.
func TestKnownKeys(t *testing.T) {
	for _, k := range []string{"id", "object", "created", "model", "choices", "index", "message", "messages", "role",
		"content", "refusal", "annotations", "logprobs", "finish_reason", "delta", "usage", "prompt_tokens",
		"completion_tokens", "total_tokens", "prompt_tokens_details", "completion_tokens_details", "cached_tokens",
		"reasoning_tokens", "cost", "service_tier", "system_fingerprint", "stream", "stream_options", "include_usage",
		"max_tokens", "max_completion_tokens", "temperature", "user", "tools", "tool_calls", "type", "text", "name", "error"} {
		q := []byte(`"` + k + `"`)
		got, err := unquoteKey(q)
		if err != nil || got != k {
			t.Errorf("unquoteKey(%s) = %q, %v", q, got, err)
		}
		if n := testing.AllocsPerRun(10, func() { _, _ = unquoteKey(q) }); n != 0 {
			t.Errorf("unquoteKey(%s) allocates %v times", q, n)
		}
	}
	if got, _ := unquoteKey([]byte(`"us\u0061ge"`)); got != "usage" {
		t.Errorf("escaped key: %q", got)
	}
}

func FuzzKnownKey(f *testing.F) {
	f.Add([]byte("usage"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if k, ok := knownKey(b); ok && k != string(b) {
			t.Fatalf("knownKey(%q) = %q", b, k)
		}
	})
}
