package mockllm

import (
	"encoding/json"
	"net/http"
	"sort"
	"time"

	"gatehouse/internal/llm"
)

// This file makes the OpenAI emulator call tools: with @mock(tool=NAME)
// (or X-Mock-Tool) the reply is a call of the request's function NAME
// instead of text — unless the conversation already ends in a tool
// result, which the model then answers in text, so a client's tool loop
// ends after one round trip.

// oaiToolCall is the call the emulator makes.
type oaiToolCall struct {
	id, name, args string
}

// oaiToolRequest is the part of a chat request tool calling reads.
type oaiToolRequest struct {
	Messages []struct {
		Role string `json:"role"`
	} `json:"messages"`
	Tools []struct {
		Type     string `json:"type"`
		Function struct {
			Name       string          `json:"name"`
			Parameters json.RawMessage `json:"parameters"`
		} `json:"function"`
	} `json:"tools"`
}

// openAIToolCall returns the call to make, nil when the reply should be
// text, or a 400 when the request offers no function of that name (a
// test asking for a tool its request does not define is broken).
func openAIToolCall(body []byte, name string) (*oaiToolCall, *apiError) {
	var req oaiToolRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, typeError(err)
	}
	if n := len(req.Messages); n > 0 && req.Messages[n-1].Role == "tool" {
		return nil, nil
	}
	for _, t := range req.Tools {
		if t.Function.Name == name {
			return &oaiToolCall{id: "call_" + newRequestID()[4:28], name: name, args: mockArguments(t.Function.Parameters)}, nil
		}
	}
	return nil, invalidRequest("tools", "invalid_mock_directive", "@mock(tool=%s): the request defines no function named %q", name, name)
}

// mockArguments builds arguments that satisfy the schema's required
// properties: "mock" for strings, 1 for numbers, true for booleans,
// empty arrays and objects. Keys are sorted, so the text is predictable.
func mockArguments(schema json.RawMessage) string {
	var s struct {
		Properties map[string]struct {
			Type any `json:"type"`
		} `json:"properties"`
		Required []string `json:"required"`
	}
	_ = json.Unmarshal(schema, &s)
	req := append([]string(nil), s.Required...)
	sort.Strings(req)
	b := []byte{'{'}
	for i, k := range req {
		if i > 0 {
			b = append(b, ',')
		}
		b = llm.AppendQuote(b, k)
		b = append(b, ':')
		typ, _ := s.Properties[k].Type.(string)
		switch typ {
		case "number", "integer":
			b = append(b, '1')
		case "boolean":
			b = append(b, "true"...)
		case "array":
			b = append(b, "[]"...)
		case "object":
			b = append(b, "{}"...)
		default:
			b = append(b, `"mock"`...)
		}
	}
	return string(append(b, '}'))
}

// argPieces splits the arguments into the deltas a stream sends, at most
// chunks of them; each piece counts as one completion token.
func argPieces(args string, chunks int) []string {
	size := max((len(args)+chunks-1)/max(chunks, 1), 4)
	var out []string
	for len(args) > size {
		out = append(out, args[:size])
		args = args[size:]
	}
	return append(out, args)
}

// appendOAIToolCall appends a tool call object; streamed ones carry
// their index first.
func appendOAIToolCall(b []byte, tc *oaiToolCall, streamed bool) []byte {
	b = append(b, '{')
	if streamed {
		b = append(b, `"index":0,`...)
	}
	b = append(b, `"id":`...)
	b = llm.AppendQuote(b, tc.id)
	b = append(b, `,"type":"function","function":{"name":`...)
	b = llm.AppendQuote(b, tc.name)
	b = append(b, `,"arguments":`...)
	b = llm.AppendQuote(b, tc.args)
	return append(b, "}}"...)
}

// completeToolCall writes a chat.completion whose message calls tc.
func (c *call) completeToolCall(x *exchange, p *plan, tc *oaiToolCall, b []byte) []byte {
	if !c.wait(p.latency) {
		return b
	}
	b = append(b, `{"id":"`...)
	b = appendCompletionID(b)
	b = append(b, `","object":"chat.completion","created":`...)
	b = appendInt(b, time.Now().Unix())
	b = append(b, `,"model":`...)
	b = llm.AppendQuote(b, x.model)
	b = append(b, `,"choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[`...)
	b = appendOAIToolCall(b, tc, false)
	b = append(b, `],"refusal":null,"annotations":[]},"logprobs":null,"finish_reason":"tool_calls"}],"usage":`...)
	b = appendUsage(b, x.promptTokens, len(argPieces(tc.args, p.chunks)))
	b = append(b, `,"service_tier":"`+serviceTier+`","system_fingerprint":"`+systemFingerprint+`"}`...)
	c.writeJSON(http.StatusOK, b)
	return b
}

// streamToolCall streams the call as OpenAI does: the first delta names
// the function with empty arguments, later deltas add argument text.
func (c *call) streamToolCall(x *exchange, p *plan, tc *oaiToolCall, b []byte) []byte {
	if !c.wait(p.ttft) {
		return b
	}
	b, prefix := c.startChunks(x, b)

	first := *tc
	first.args = ""
	b = append(b, `{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[`...)
	b = appendOAIToolCall(b, &first, true)
	b = append(b, `],"refusal":null},"logprobs":null,"finish_reason":null}]`...)
	if !c.write(endChunk(b, x)) {
		return b
	}
	pieces := argPieces(tc.args, p.chunks)
	for i, piece := range pieces {
		if i > 0 && p.tps > 0 && !c.wait(time.Duration(float64(time.Second)/p.tps)) {
			return b
		}
		b = append(b[:prefix], `{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":`...)
		b = llm.AppendQuote(b, piece)
		b = append(b, `}}]},"logprobs":null,"finish_reason":null}]`...)
		if !c.write(endChunk(b, x)) {
			return b
		}
	}
	b = append(b[:prefix], `{"index":0,"delta":{},"logprobs":null,"finish_reason":"tool_calls"}]`...)
	if !c.write(endChunk(b, x)) {
		return b
	}
	if x.includeUsage {
		b = append(b[:prefix], `],"usage":`...)
		b = appendUsage(b, x.promptTokens, len(pieces))
		b = append(b, "}\n\n"...)
		if !c.write(b) {
			return b
		}
	}
	if c.write(done) {
		c.outcome = outcomeCompleted
	}
	return b
}
