package mockllm

import (
	"encoding/json"
	"strings"
	"testing"
)

const toolsJSON = `"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer"},"metric":{"type":"boolean"}},"required":["days","city","metric"]}}}]`

func TestOpenAIToolCall(t *testing.T) {
	_, ts := start(t, Options{})
	body := `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"weather? @mock(tool=get_weather)"}],` + toolsJSON + `}`
	resp, raw := do(t, ts, "POST", "/v1/chat/completions", body, nil)
	b := string(raw)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	var c struct {
		Choices []struct {
			Message struct {
				Content   *string `json:"content"`
				ToolCalls []struct {
					ID       string `json:"id"`
					Type     string `json:"type"`
					Function struct{ Name, Arguments string }
				} `json:"tool_calls"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(raw, &c); err != nil {
		t.Fatal(err)
	}
	ch := c.Choices[0]
	if ch.FinishReason != "tool_calls" || ch.Message.Content != nil || len(ch.Message.ToolCalls) != 1 {
		t.Fatalf("%s", b)
	}
	tc := ch.Message.ToolCalls[0]
	if !strings.HasPrefix(tc.ID, "call_") || tc.Type != "function" || tc.Function.Name != "get_weather" ||
		tc.Function.Arguments != `{"city":"mock","days":1,"metric":true}` {
		t.Fatalf("tool call %+v", tc)
	}

	// Streamed: the name first, then argument pieces, then finish_reason.
	sbody := `{"model":"gpt-4o-mini","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"@mock(tool=get_weather)"}],` + toolsJSON + `}`
	resp, raw = do(t, ts, "POST", "/v1/chat/completions", sbody, nil)
	b = string(raw)
	if resp.StatusCode != 200 || !strings.HasSuffix(b, "data: [DONE]\n\n") {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	var args strings.Builder
	for _, ev := range strings.Split(strings.TrimSpace(b), "\n\n") {
		data := strings.TrimPrefix(ev, "data: ")
		if data == "[DONE]" {
			continue
		}
		var chunk struct {
			Choices []struct {
				Delta struct {
					ToolCalls []struct {
						Index    int
						Function struct{ Name, Arguments string }
					} `json:"tool_calls"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(data), &chunk); err != nil {
			t.Fatalf("%v: %s", err, data)
		}
		for _, c := range chunk.Choices {
			for _, tc := range c.Delta.ToolCalls {
				args.WriteString(tc.Function.Arguments)
			}
		}
	}
	if args.String() != `{"city":"mock","days":1,"metric":true}` || !strings.Contains(b, `"finish_reason":"tool_calls"`) || !strings.Contains(b, `"name":"get_weather","arguments":""`) {
		t.Fatalf("stream:\n%s", b)
	}

	// After a tool result the model answers in text, so loops end.
	after := `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"@mock(tool=get_weather)"},{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{}"}}]},{"role":"tool","tool_call_id":"call_1","content":"sunny"}],` + toolsJSON + `}`
	if resp, raw = do(t, ts, "POST", "/v1/chat/completions", after, nil); resp.StatusCode != 200 || !strings.Contains(string(raw), `"finish_reason":"stop"`) {
		t.Fatalf("after the result: %d %s", resp.StatusCode, raw)
	}

	// A tool the request does not define is the test's mistake.
	bad := `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"@mock(tool=nope)"}],` + toolsJSON + `}`
	if resp, raw = do(t, ts, "POST", "/v1/chat/completions", bad, nil); resp.StatusCode != 400 || !strings.Contains(string(raw), "nope") {
		t.Fatalf("unknown tool: %d %s", resp.StatusCode, raw)
	}
}
