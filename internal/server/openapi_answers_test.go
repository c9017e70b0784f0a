package server

import (
	"bytes"
	"encoding/json"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"gatehouse/internal/openapitest"
)

// apiCall is one request of TestOpenAPIAnswers and the status it must
// get.
type apiCall struct {
	name         string
	method, path string
	header       http.Header
	body         string
	status       int
	// badBody: the request is refused for its body, which the document's
	// request schema must refuse too.
	badBody bool
	check   func(t *testing.T, a *answer)
}

// Request bodies. Each accepted one is also held to the document's
// request schema.
const (
	chatBody = `{"model":"chat","messages":[{"role":"system","content":"Be brief."},` +
		`{"role":"user","content":[{"type":"text","text":"Describe this picture"},` +
		`{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgo=","detail":"low"}}]}],` +
		`"max_completion_tokens":50,"temperature":0.2,"top_p":1,"seed":7,"stop":["\n\n\n"],"user":"u-1",` +
		`"metadata":{"team":"qa"},"response_format":{"type":"text"},"n":1}`
	chatStreamBody = `{"model":"chat","stream":true,"stream_options":{"include_usage":true},` +
		`"messages":[{"role":"user","content":"Stream a short answer"}],"max_tokens":40}`
	toolsField = `"tools":[{"type":"function","function":{"name":"get_weather","description":"Weather of a city",` +
		`"parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}],` +
		`"tool_choice":"auto","parallel_tool_calls":true`
	chatToolBody = `{"model":"chat",` + toolsField + `,"messages":[{"role":"user","content":"Weather in Paris? @mock(tool=get_weather)"}]}`
	chatToolLoop = `{"model":"chat",` + toolsField + `,"messages":[{"role":"user","content":"Weather in Paris?"},` +
		`{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},` +
		`{"role":"tool","tool_call_id":"call_1","content":"sunny"}],"tool_choice":{"type":"function","function":{"name":"get_weather"}}}`
	chatJSONSchema = `{"model":"claude","messages":[{"role":"developer","content":"Answer in JSON."},{"role":"user","content":"Name a colour"}],` +
		`"response_format":{"type":"json_schema","json_schema":{"name":"colour","schema":{"type":"object","properties":{"name":{"type":"string"}}}}}}`
	embedBody = `{"model":"embed","input":["first text","second text"],"encoding_format":"float","user":"u-1"}`

	messagesBody = `{"model":"chat","max_tokens":100,"system":[{"type":"text","text":"Be brief.","cache_control":{"type":"ephemeral"}}],` +
		`"messages":[{"role":"user","content":[{"type":"text","text":"Describe this"},` +
		`{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}}]}],` +
		`"temperature":0.5,"stop_sequences":["END"],"metadata":{"user_id":"u-2"},"service_tier":"auto"}`
	messagesStream = `{"model":"claude","max_tokens":100,"stream":true,"system":"Be brief.",` +
		`"messages":[{"role":"user","content":"Stream to me"}],"thinking":{"type":"disabled"}}`
	anthropicTools = `"tools":[{"name":"get_weather","description":"Weather of a city",` +
		`"input_schema":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}],"tool_choice":{"type":"auto"}`
	messagesTool = `{"model":"chat","max_tokens":200,` + anthropicTools +
		`,"messages":[{"role":"user","content":"Weather in Paris? @mock(tool=get_weather)"}]}`
	messagesToolLoop = `{"model":"chat","max_tokens":200,` + anthropicTools + `,"messages":[` +
		`{"role":"user","content":"Weather in Paris?"},` +
		`{"role":"assistant","content":[{"type":"text","text":"Let me look."},{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{"city":"Paris"}}]},` +
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"sunny"}]}]}]}`
	countBody = `{"model":"chat","system":"Be brief.","messages":[{"role":"user","content":"How many tokens is this?"}],` + anthropicTools + `}`

	responsesBody = `{"model":"chat","instructions":"Be brief.","input":[{"role":"user","content":[{"type":"input_text","text":"Describe this"},` +
		`{"type":"input_image","image_url":"data:image/png;base64,iVBORw0KGgo=","detail":"low"}]}],` +
		`"max_output_tokens":100,"temperature":0.5,"top_p":1,"user":"u-3","metadata":{"team":"qa"},"text":{"format":{"type":"text"}},` +
		`"service_tier":"auto","truncation":"disabled"}`
	responsesTools = `"tools":[{"type":"function","name":"get_weather","description":"Weather of a city",` +
		`"parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}],"tool_choice":"auto"`
	responsesTool = `{"model":"chat",` + responsesTools + `,"input":"Weather in Paris? @mock(tool=get_weather)"}`
	responsesLoop = `{"model":"claude",` + responsesTools + `,"input":[{"role":"user","content":"Weather in Paris?"},` +
		`{"type":"function_call","call_id":"call_1","name":"get_weather","arguments":"{\"city\":\"Paris\"}"},` +
		`{"type":"function_call_output","call_id":"call_1","output":"sunny"}]}`
)

// responsesOf makes a small Responses request body for a model.
func responsesOf(model, text string, stream bool) string {
	return `{"model":"` + model + `","stream":` + boolText(stream) + `,"input":"` + text + `"}`
}

// chatOf and messagesOf make small request bodies for a model.
func chatOf(model, text string, stream bool) string {
	return `{"model":"` + model + `","stream":` + boolText(stream) + `,"messages":[{"role":"user","content":"` + text + `"}]}`
}

func messagesOf(model, text string, stream bool) string {
	return `{"model":"` + model + `","max_tokens":64,"stream":` + boolText(stream) + `,"messages":[{"role":"user","content":"` + text + `"}]}`
}

func embedOf(model string) string { return `{"model":"` + model + `","input":"some text"}` }

func boolText(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

// streamDone checks an OpenAI stream completed with [DONE], and that
// include_usage brought a priced usage chunk.
func streamDone(wantUsage bool) func(t *testing.T, a *answer) {
	return func(t *testing.T, a *answer) {
		events := openapitest.Events(a.body)
		if len(events) < 3 || events[len(events)-1].Data != "[DONE]" {
			t.Fatalf("stream does not end with [DONE]: %s", a.body)
		}
		usage := events[len(events)-2].Data
		if got := strings.Contains(usage, `"usage":{`) && strings.Contains(usage, `"cost":`); got != wantUsage {
			t.Errorf("priced usage chunk %v, want %v: %s", got, wantUsage, usage)
		}
		if a.header.Get("X-Gatehouse-Cost-Usd") == "" {
			t.Error("no x-gatehouse-cost-usd trailer")
		}
	}
}

// eventsEnd checks the names of an Anthropic stream's events.
func eventsEnd(want ...string) func(t *testing.T, a *answer) {
	return func(t *testing.T, a *answer) {
		var names []string
		for _, e := range openapitest.Events(a.body) {
			names = append(names, e.Name)
		}
		if len(names) < len(want) || strings.Join(names[len(names)-len(want):], " ") != strings.Join(want, " ") {
			t.Errorf("events %v, want them to end with %v", names, want)
		}
	}
}

func bodyHas(parts ...string) func(t *testing.T, a *answer) {
	return func(t *testing.T, a *answer) {
		for _, p := range parts {
			if !bytes.Contains(a.body, []byte(p)) {
				t.Errorf("body lacks %s: %s", p, a.body)
			}
		}
	}
}

// costInUsage: the cost header's figure is the top-level usage object's
// "cost", where the gateway put it (for a body it built, through the slot
// its builder returned).
func costInUsage(t *testing.T, a *answer) {
	var v struct {
		Usage map[string]json.RawMessage `json:"usage"`
	}
	if err := json.Unmarshal(a.body, &v); err != nil {
		t.Fatalf("%v: %s", err, a.body)
	}
	want := a.header.Get("X-Gatehouse-Cost-Usd")
	if got := string(v.Usage["cost"]); want == "" || got != want {
		t.Errorf("usage.cost %q, cost header %q: %s", got, want, a.body)
	}
}

func headerIs(name, want string) func(t *testing.T, a *answer) {
	return func(t *testing.T, a *answer) {
		if got := a.header.Get(name); got != want {
			t.Errorf("%s: %q, want %q", name, got, want)
		}
	}
}

func all(checks ...func(t *testing.T, a *answer)) func(t *testing.T, a *answer) {
	return func(t *testing.T, a *answer) {
		for _, c := range checks {
			c(t, a)
		}
	}
}

// TestOpenAPIAnswers sends every operation of the client API requests
// that succeed and requests that fail in each documented way, holds each
// answer to the document, and requires every documented status of every
// operation to have been seen.
//
// It runs on both HTTP/1 engines, and each answer must carry the same
// header fields on both.
func TestOpenAPIAnswers(t *testing.T) {
	fields := map[string]map[string]string{}
	for _, engine := range engines {
		t.Run(engine, func(t *testing.T) { fields[engine] = openAPIAnswers(t, engine) })
	}
	if t.Failed() {
		return
	}
	if diff := cmp.Diff(fields["net/http"], fields["gatehouse"]); diff != "" {
		t.Errorf("header fields by call, net/http's server (-) and gatehouse's (+):\n%s", diff)
	}
}

// openAPIAnswers runs TestOpenAPIAnswers' calls on engine and returns
// the names of each answer's header fields, by call.
func openAPIAnswers(t *testing.T, engine string) map[string]string {
	fields := map[string]string{}
	e := newAPIEnv(t, engine)
	main := bearer(keyMain)
	big := `{"model":"chat","messages":[{"role":"user","content":"` + strings.Repeat("a", 70<<10) + `"}]}`
	const chat, embed, msgs, count = "/v1/chat/completions", "/v1/embeddings", "/v1/messages", "/v1/messages/count_tokens"
	const resp = "/v1/responses"
	calls := []apiCall{
		// Chat completions.
		{name: "chat", method: "POST", path: chat, header: main, body: chatBody, status: 200,
			check: all(bodyHas(`"object":"chat.completion"`, `"cost":`), costInUsage, headerIs("X-Gatehouse-Cache", "miss"), headerIs("X-Gatehouse-Provider", "up"))},
		{name: "chat from the cache", method: "POST", path: chat, header: main, body: chatBody, status: 200,
			check: all(headerIs("X-Gatehouse-Cache", "hit"), headerIs("X-Gatehouse-Attempts", "0"), costInUsage)},
		{name: "chat with x-api-key", method: "POST", path: chat, header: apiKey(keyMain, "Cache-Control", "no-cache"),
			body: chatOf("chat", "hello there", false), status: 200, check: headerIs("X-Gatehouse-Cache", "bypass")},
		{name: "chat stream", method: "POST", path: chat, header: main, body: chatStreamBody, status: 200, check: streamDone(true)},
		{name: "chat stream from the cache", method: "POST", path: chat, header: main, body: chatStreamBody, status: 200,
			check: all(streamDone(true), headerIs("X-Gatehouse-Cache", "hit"))},
		{name: "chat whole from a cached stream", method: "POST", path: chat, header: main,
			body: strings.Replace(chatStreamBody, `"stream":true`, `"stream":false`, 1), status: 200, check: headerIs("X-Gatehouse-Cache", "hit")},
		{name: "chat stream without usage", method: "POST", path: chat, header: main, body: chatOf("chat", "no usage please", true), status: 200,
			check: streamDone(false)},
		{name: "chat calls a tool", method: "POST", path: chat, header: main, body: chatToolBody, status: 200,
			check: bodyHas(`"tool_calls":[`, `"finish_reason":"tool_calls"`)},
		{name: "chat streams a tool call", method: "POST", path: chat, header: main,
			body: strings.Replace(chatToolBody, `"model":"chat",`, `"model":"chat","stream":true,`, 1), status: 200, check: bodyHas(`"tool_calls":[`)},
		{name: "chat with reasoning", method: "POST", path: chat, header: main, body: chatOf("thinker", "two and two?", false), status: 200,
			check: bodyHas(`"reasoning_content":"Two and two."`)},
		{name: "chat stream with reasoning", method: "POST", path: chat, header: main, body: chatOf("thinker", "two and two?", true), status: 200,
			check: bodyHas(`"reasoning_signature":"sig-1"`)},
		{name: "chat tool loop", method: "POST", path: chat, header: main, body: chatToolLoop, status: 200},
		{name: "chat translated", method: "POST", path: chat, header: main, body: chatJSONSchema, status: 200},
		{name: "chat translated stream", method: "POST", path: chat, header: main, body: chatOf("claude", "stream it", true), status: 200,
			check: streamDone(false)},
		{name: "chat translated tool stream", method: "POST", path: chat, header: main,
			body: strings.Replace(chatToolBody, `"model":"chat",`, `"model":"claude","stream":true,`, 1), status: 200},
		{name: "chat stream broken mid-way", method: "POST", path: chat, header: main, body: chatOf("cut", "break off", true), status: 200,
			check: func(t *testing.T, a *answer) {
				events := openapitest.Events(a.body)
				if len(events) == 0 || !strings.HasPrefix(events[len(events)-1].Data, `{"error":`) {
					t.Errorf("stream does not end with an error event: %s", a.body)
				}
			}},
		{name: "chat stream after an attempt broken before its first event", method: "POST", path: chat, header: main,
			body: chatOf("stream-failover", "fail over", true), status: 200,
			check: all(streamDone(false), headerIs("X-Gatehouse-Attempts", "2"), headerIs("X-Gatehouse-Provider", "up"))},
		{name: "chat stream broken before its first event", method: "POST", path: chat, header: main,
			body: chatOf("stream-broken", "break at once", true), status: 502,
			check: all(headerIs("X-Gatehouse-Provider", "broken"), headerIs("X-Gatehouse-Cost-Usd", "0.000000"), headerIs("Trailer", ""))},
		{name: "chat downgraded customer", method: "POST", path: chat, header: bearer(keyMain, "X-Gatehouse-Customer", "cust-broke"),
			body: chatOf("chat", "downgrade me", false), status: 200, check: headerIs("X-Gatehouse-Downgraded-From", "chat")},
		{name: "chat labels", method: "POST", path: chat, header: bearer(keyMain, "X-Gatehouse-Label-Team", "blue", "X-Gatehouse-Cache-Ttl", "60"),
			body: chatOf("chat", "labelled", false), status: 200},
		{name: "chat bad JSON", method: "POST", path: chat, header: main, body: `{"model":`, status: 400},
		{name: "chat without messages", method: "POST", path: chat, header: main, body: `{"model":"chat"}`, status: 400, badBody: true},
		{name: "chat empty messages", method: "POST", path: chat, header: main, body: `{"model":"chat","messages":[]}`, status: 400, badBody: true},
		{name: "chat bad max_tokens", method: "POST", path: chat, header: main, body: `{"model":"chat","max_tokens":0,"messages":[{"role":"user","content":"x"}]}`,
			status: 400, badBody: true},
		{name: "chat bad label", method: "POST", path: chat, header: bearer(keyMain, "X-Gatehouse-Label-Bad.Name", "x"), body: chatOf("chat", "x", false), status: 400},
		{name: "chat bad cache ttl", method: "POST", path: chat, header: bearer(keyMain, "X-Gatehouse-Cache-Ttl", "-1"), body: chatOf("chat", "x", false), status: 400},
		{name: "chat no key", method: "POST", path: chat, body: chatOf("chat", "x", false), status: 401},
		{name: "chat bad key", method: "POST", path: chat, header: bearer("nope"), body: chatOf("chat", "x", false), status: 401},
		{name: "chat model not allowed", method: "POST", path: chat, header: bearer(keyChatOnly), body: chatOf("claude", "x", false), status: 403},
		{name: "chat price unknown", method: "POST", path: chat, header: main, body: chatOf("unpriced", "x", false), status: 403},
		{name: "chat unknown model", method: "POST", path: chat, header: main, body: chatOf("nope", "x", false), status: 404},
		{name: "chat GET", method: "GET", path: chat, header: main, status: 405},
		{name: "chat too large", method: "POST", path: chat, header: main, body: big, status: 413},
		{name: "chat not JSON", method: "POST", path: chat, header: bearer(keyMain, "Content-Type", "text/plain"), body: chatOf("chat", "x", false), status: 415},
		{name: "chat rate limit 1", method: "POST", path: chat, header: bearer(keyOneOpen), body: chatOf("chat", "first", false), status: 200},
		{name: "chat rate limited", method: "POST", path: chat, header: bearer(keyOneOpen), body: chatOf("chat", "second", false), status: 429,
			check: func(t *testing.T, a *answer) {
				if a.header.Get("Retry-After") == "" || a.header.Get("X-Ratelimit-Limit-Requests") != "1" {
					t.Errorf("429 headers %v", a.header)
				}
			}},
		{name: "chat customer over budget", method: "POST", path: chat, header: bearer(keyMain, "X-Gatehouse-Customer", "cust-blocked"),
			body: chatOf("chat", "x", false), status: 429, check: bodyHas(`"type":"insufficient_quota"`)},
		{name: "chat upstream down", method: "POST", path: chat, header: main, body: chatOf("down", "x", false), status: 502},
		{name: "chat upstream 503", method: "POST", path: chat, header: main, body: chatOf("fail-503", "x", false), status: 503,
			check: headerIs("Retry-After", "7")},
		{name: "chat upstream slow", method: "POST", path: chat, header: main, body: chatOf("slow", "x", false), status: 504},
		{name: "chat upstream 422", method: "POST", path: chat, header: main, body: chatOf("fail-422", "x", false), status: 422},
		{name: "chat upstream 529", method: "POST", path: chat, header: main, body: chatOf("fail-529", "x", false), status: 529},

		// Embeddings.
		{name: "embeddings", method: "POST", path: embed, header: main, body: embedBody, status: 200,
			check: all(bodyHas(`"object":"embedding"`, `"cost":`), headerIs("X-Gatehouse-Cache", "bypass"))},
		{name: "embeddings without input", method: "POST", path: embed, header: main, body: `{"model":"embed"}`, status: 400, badBody: true},
		{name: "embeddings not supported", method: "POST", path: embed, header: main, body: embedOf("claude"), status: 400},
		{name: "embeddings no key", method: "POST", path: embed, body: embedOf("embed"), status: 401},
		{name: "embeddings model not allowed", method: "POST", path: embed, header: bearer(keyChatOnly), body: embedOf("embed"), status: 403},
		{name: "embeddings unknown model", method: "POST", path: embed, header: main, body: embedOf("nope"), status: 404},
		{name: "embeddings GET", method: "GET", path: embed, header: main, status: 405},
		{name: "embeddings too large", method: "POST", path: embed, header: main, body: big, status: 413},
		{name: "embeddings not JSON", method: "POST", path: embed, header: bearer(keyMain, "Content-Type", "text/plain"), body: embedOf("embed"), status: 415},
		{name: "embeddings rate limited", method: "POST", path: embed, header: bearer(keyOneOpen), body: embedOf("embed"), status: 429},
		{name: "embeddings upstream down", method: "POST", path: embed, header: main, body: embedOf("down"), status: 502},
		{name: "embeddings upstream 503", method: "POST", path: embed, header: main, body: embedOf("embed-503"), status: 503},
		{name: "embeddings upstream slow", method: "POST", path: embed, header: main, body: embedOf("embed-slow"), status: 504},
		{name: "embeddings upstream 422", method: "POST", path: embed, header: main, body: embedOf("embed-422"), status: 422},
		{name: "embeddings upstream 529", method: "POST", path: embed, header: main, body: embedOf("embed-529"), status: 529},

		// Models.
		{name: "models", method: "GET", path: "/v1/models", header: main, status: 200, check: bodyHas(`"id":"org/model"`)},
		{name: "models with x-api-key", method: "GET", path: "/v1/models", header: apiKey(keyMain), status: 200},
		{name: "models no key", method: "GET", path: "/v1/models", status: 401},
		{name: "models POST", method: "POST", path: "/v1/models", header: main, body: "{}", status: 405},
		{name: "model", method: "GET", path: "/v1/models/chat", header: main, status: 200},
		{name: "model with a slash", method: "GET", path: "/v1/models/org/model", header: main, status: 200, check: bodyHas(`"id":"org/model"`)},
		{name: "model no key", method: "GET", path: "/v1/models/chat", status: 401},
		{name: "model unknown", method: "GET", path: "/v1/models/nope", header: main, status: 404},
		{name: "model DELETE", method: "DELETE", path: "/v1/models/chat", header: main, status: 405},

		// Messages.
		{name: "messages", method: "POST", path: msgs, header: apiKey(keyMain), body: messagesBody, status: 200,
			check: all(bodyHas(`"type":"message"`, `"cost":`), costInUsage, func(t *testing.T, a *answer) {
				if a.header.Get("Request-Id") != a.header.Get("X-Gatehouse-Request-Id") {
					t.Errorf("request-id %q differs from x-gatehouse-request-id %q", a.header.Get("Request-Id"), a.header.Get("X-Gatehouse-Request-Id"))
				}
			})},
		{name: "messages from the cache", method: "POST", path: msgs, header: apiKey(keyMain), body: messagesBody, status: 200,
			check: headerIs("X-Gatehouse-Cache", "hit")},
		{name: "messages with bearer", method: "POST", path: msgs, header: main, body: messagesOf("chat", "bearer works", false), status: 200},
		{name: "messages stream", method: "POST", path: msgs, header: apiKey(keyMain), body: messagesStream, status: 200,
			check: eventsEnd("message_delta", "message_stop")},
		{name: "messages stream from the cache", method: "POST", path: msgs, header: apiKey(keyMain), body: messagesStream, status: 200,
			check: all(eventsEnd("message_delta", "message_stop"), headerIs("X-Gatehouse-Cache", "hit"))},
		{name: "messages stream pass-through backend", method: "POST", path: msgs, header: apiKey(keyMain), body: messagesOf("chat", "stream please", true),
			status: 200, check: eventsEnd("content_block_stop", "message_delta", "message_stop")},
		{name: "messages tool use", method: "POST", path: msgs, header: apiKey(keyMain), body: messagesTool, status: 200,
			check: bodyHas(`"type":"tool_use"`, `"stop_reason":"tool_use"`)},
		{name: "messages tool use stream", method: "POST", path: msgs, header: apiKey(keyMain),
			body: strings.Replace(messagesTool, `"max_tokens":200,`, `"max_tokens":200,"stream":true,`, 1), status: 200,
			check: bodyHas(`"input_json_delta"`)},
		{name: "messages tool loop", method: "POST", path: msgs, header: apiKey(keyMain), body: messagesToolLoop, status: 200},
		{name: "messages thinking", method: "POST", path: msgs, header: apiKey(keyMain),
			body: `{"model":"claude","max_tokens":2048,"thinking":{"type":"enabled","budget_tokens":1024},"messages":[{"role":"user","content":"Think"}]}`, status: 200},
		{name: "messages with thinking", method: "POST", path: msgs, header: apiKey(keyMain), body: messagesOf("thinker", "two and two?", false),
			status: 200, check: bodyHas(`"type":"thinking","thinking":"Two and two.","signature":"sig-1"`)},
		{name: "messages stream with thinking", method: "POST", path: msgs, header: apiKey(keyMain), body: messagesOf("thinker", "two and two?", true),
			status: 200, check: bodyHas(`"type":"thinking_delta"`, `"type":"signature_delta"`, `"type":"text_delta"`)},
		{name: "messages stream broken mid-way", method: "POST", path: msgs, header: apiKey(keyMain), body: messagesOf("cut", "break off", true), status: 200,
			check: eventsEnd("error")},
		{name: "messages bad JSON", method: "POST", path: msgs, header: apiKey(keyMain), body: `{"model"`, status: 400},
		{name: "messages without max_tokens", method: "POST", path: msgs, header: apiKey(keyMain),
			body: `{"model":"chat","messages":[{"role":"user","content":"x"}]}`, status: 400, badBody: true},
		{name: "messages unknown field", method: "POST", path: msgs, header: apiKey(keyMain),
			body: `{"model":"chat","max_tokens":10,"messages":[{"role":"user","content":"x"}],"colour":"red"}`, status: 400, badBody: true},
		{name: "messages server tool", method: "POST", path: msgs, header: apiKey(keyMain),
			body: `{"model":"chat","max_tokens":10,"messages":[{"role":"user","content":"x"}],"mcp_servers":[]}`, status: 400, badBody: true},
		{name: "messages no key", method: "POST", path: msgs, body: messagesOf("chat", "x", false), status: 401,
			check: bodyHas(`"type":"authentication_error"`, `x-api-key`)},
		{name: "messages bad key", method: "POST", path: msgs, header: apiKey("nope"), body: messagesOf("chat", "x", false), status: 401},
		{name: "messages model not allowed", method: "POST", path: msgs, header: apiKey(keyChatOnly), body: messagesOf("claude", "x", false), status: 403},
		{name: "messages unknown model", method: "POST", path: msgs, header: apiKey(keyMain), body: messagesOf("nope", "x", false), status: 404,
			check: bodyHas(`"type":"not_found_error"`)},
		{name: "messages GET", method: "GET", path: msgs, header: apiKey(keyMain), status: 405},
		{name: "messages too large", method: "POST", path: msgs, header: apiKey(keyMain), body: big, status: 413},
		{name: "messages not JSON", method: "POST", path: msgs, header: apiKey(keyMain, "Content-Type", "text/plain"), body: messagesOf("chat", "x", false), status: 415},
		{name: "messages rate limit 1", method: "POST", path: msgs, header: apiKey(keyOneAnth), body: messagesOf("chat", "first", false), status: 200},
		{name: "messages rate limited", method: "POST", path: msgs, header: apiKey(keyOneAnth), body: messagesOf("chat", "second", false), status: 429,
			check: bodyHas(`"type":"rate_limit_error"`)},
		{name: "messages upstream down", method: "POST", path: msgs, header: apiKey(keyMain), body: messagesOf("down", "x", false), status: 502},
		{name: "messages upstream 503", method: "POST", path: msgs, header: apiKey(keyMain), body: messagesOf("fail-503", "x", false), status: 503},
		{name: "messages upstream slow", method: "POST", path: msgs, header: apiKey(keyMain), body: messagesOf("slow", "x", false), status: 504},
		{name: "messages upstream 422", method: "POST", path: msgs, header: apiKey(keyMain), body: messagesOf("fail-422", "x", false), status: 422},
		{name: "messages upstream 529", method: "POST", path: msgs, header: apiKey(keyMain), body: messagesOf("fail-529", "x", false), status: 529,
			check: bodyHas(`"type":"overloaded_error"`)},

		// Responses.
		{name: "responses", method: "POST", path: resp, header: main, body: responsesBody, status: 200,
			check: all(bodyHas(`"object":"response"`, `"status":"completed"`, `"cost":`, `"instructions":"Be brief."`), costInUsage, headerIs("X-Gatehouse-Cache", "miss"))},
		{name: "responses from the cache", method: "POST", path: resp, header: main, body: responsesBody, status: 200,
			check: all(headerIs("X-Gatehouse-Cache", "hit"), costInUsage)},
		{name: "responses stream", method: "POST", path: resp, header: main, body: responsesOf("chat", "stream please", true), status: 200,
			check: eventsEnd("response.output_item.done", "response.completed")},
		{name: "responses stream with thinking", method: "POST", path: resp, header: main, body: responsesOf("thinker", "two and two?", true),
			status: 200, check: bodyHas(`"type":"reasoning"`, "response.reasoning_text.delta")},
		{name: "responses stream broken mid-way", method: "POST", path: resp, header: main, body: responsesOf("cut", "break off", true), status: 200,
			check: eventsEnd("response.output_item.done", "response.failed")},
		{name: "responses tool call", method: "POST", path: resp, header: main, body: responsesTool, status: 200,
			check: bodyHas(`"type":"function_call"`, `"name":"get_weather"`)},
		{name: "responses tool loop", method: "POST", path: resp, header: main, body: responsesLoop, status: 200},
		{name: "responses json schema", method: "POST", path: resp, header: main,
			body:   `{"model":"claude","input":"Name a colour","text":{"format":{"type":"json_schema","name":"colour","schema":{"type":"object","properties":{"name":{"type":"string"}}}}}}`,
			status: 200},
		{name: "responses bad JSON", method: "POST", path: resp, header: main, body: `{"model"`, status: 400},
		{name: "responses input number", method: "POST", path: resp, header: main, body: `{"model":"chat","input":3}`, status: 400, badBody: true},
		{name: "responses without input", method: "POST", path: resp, header: main, body: `{"model":"chat"}`, status: 400},
		{name: "responses built-in tool", method: "POST", path: resp, header: main,
			body: `{"model":"chat","input":"x","tools":[{"type":"web_search"}]}`, status: 400, check: bodyHas(`"param":"tools[0].type"`)},
		{name: "responses unknown previous", method: "POST", path: resp, header: main,
			body: `{"model":"chat","input":"x","previous_response_id":"resp_nope"}`, status: 404, check: bodyHas(`"code":"previous_response_not_found"`)},
		{name: "responses no key", method: "POST", path: resp, body: responsesOf("chat", "x", false), status: 401},
		{name: "responses model not allowed", method: "POST", path: resp, header: bearer(keyChatOnly), body: responsesOf("claude", "x", false), status: 403},
		{name: "responses unknown model", method: "POST", path: resp, header: main, body: responsesOf("nope", "x", false), status: 404},
		{name: "responses GET", method: "GET", path: resp, header: main, status: 405},
		{name: "responses too large", method: "POST", path: resp, header: main, body: big, status: 413},
		{name: "responses not JSON", method: "POST", path: resp, header: bearer(keyMain, "Content-Type", "text/plain"), body: responsesOf("chat", "x", false), status: 415},
		{name: "responses rate limited", method: "POST", path: resp, header: bearer(keyOneOpen), body: responsesOf("chat", "x", false), status: 429},
		{name: "responses upstream down", method: "POST", path: resp, header: main, body: responsesOf("down", "x", false), status: 502},
		{name: "responses upstream 503", method: "POST", path: resp, header: main, body: responsesOf("fail-503", "x", false), status: 503},
		{name: "responses upstream slow", method: "POST", path: resp, header: main, body: responsesOf("slow", "x", false), status: 504},
		{name: "responses upstream 422", method: "POST", path: resp, header: main, body: responsesOf("fail-422", "x", false), status: 422},
		{name: "responses upstream 529", method: "POST", path: resp, header: main, body: responsesOf("fail-529", "x", false), status: 529},
		{name: "stored response unknown", method: "GET", path: resp + "/resp_nope", header: main, status: 404},
		{name: "stored response no key", method: "GET", path: resp + "/resp_nope", status: 401},
		{name: "stored response POST", method: "POST", path: resp + "/resp_nope", header: main, body: "{}", status: 405},
		{name: "delete stored response unknown", method: "DELETE", path: resp + "/resp_nope", header: main, status: 404},
		{name: "delete stored response no key", method: "DELETE", path: resp + "/resp_nope", status: 401},

		// Token counts.
		{name: "count tokens", method: "POST", path: count, header: apiKey(keyMain), body: countBody, status: 200, check: bodyHas(`"input_tokens":`)},
		{name: "count tokens unknown field", method: "POST", path: count, header: apiKey(keyMain),
			body: `{"model":"chat","messages":[{"role":"user","content":"x"}],"colour":"red"}`, status: 400, badBody: true},
		{name: "count tokens no key", method: "POST", path: count, body: countBody, status: 401},
		{name: "count tokens model not allowed", method: "POST", path: count, header: apiKey(keyChatOnly),
			body: `{"model":"claude","messages":[{"role":"user","content":"x"}]}`, status: 403},
		{name: "count tokens unknown model", method: "POST", path: count, header: apiKey(keyMain),
			body: `{"model":"nope","messages":[{"role":"user","content":"x"}]}`, status: 404},
		{name: "count tokens GET", method: "GET", path: count, header: apiKey(keyMain), status: 405},
		{name: "count tokens too large", method: "POST", path: count, header: apiKey(keyMain), body: big, status: 413},
		{name: "count tokens not JSON", method: "POST", path: count, header: apiKey(keyMain, "Content-Type", "text/plain"), body: countBody, status: 415},

		// Operations.
		{name: "healthz", method: "GET", path: "/healthz", status: 200},
		{name: "healthz POST", method: "POST", path: "/healthz", body: "{}", status: 405},
		{name: "readyz", method: "GET", path: "/readyz", status: 200},
		{name: "readyz POST", method: "POST", path: "/readyz", body: "{}", status: 405},
		{name: "metrics", method: "GET", path: "/metrics", status: 200, check: bodyHas("gatehouse_requests_total")},
		{name: "metrics POST", method: "POST", path: "/metrics", body: "{}", status: 405},
	}
	for _, c := range calls {
		t.Run(c.name, func(t *testing.T) {
			e.t = t
			a := e.do(c.method, c.path, c.header, c.body)
			if a.status != c.status {
				t.Fatalf("status %d, want %d: %.600s", a.status, c.status, a.body)
			}
			switch {
			case c.badBody:
				if len(e.spec.CheckRequest(c.method, c.path, []byte(c.body))) == 0 {
					t.Errorf("the document's request schema accepts a body gatehouse refuses: %s", c.body)
				}
			case a.status < 300 && c.method == http.MethodPost && json.Valid([]byte(c.body)):
				for _, p := range e.spec.CheckRequest(c.method, c.path, []byte(c.body)) {
					t.Errorf("openapi: an accepted request is off the document: %s", p)
				}
			}
			if c.check != nil {
				c.check(t, a)
			}
			names := slices.Sorted(maps.Keys(a.header))
			names = slices.DeleteFunc(names, func(k string) bool { return k == "Date" })
			fields[c.name] = strings.Join(names, " ")
		})
	}
	e.t = t
	e.storedResponses(main)

	// What only a broken key store, a bug, a process without metrics or
	// a draining one answers.
	post := map[string]string{chat: chatOf("chat", "x", false), embed: embedOf("embed"), msgs: messagesOf("chat", "x", false), count: countBody,
		resp: responsesOf("chat", "x", false)}
	rt := *e.s.Runtime()
	for _, phase := range []struct {
		auth   Authenticator
		status int
	}{
		{failingAuth{err: unavailableError()}, 503},
		{failingAuth{panic: true}, 500},
	} {
		broken := rt
		broken.Auth = phase.auth
		e.s.Swap(&broken)
		for path, body := range post {
			if a := e.do("POST", path, main, body); a.status != phase.status {
				t.Errorf("%s with %T: status %d, want %d: %s", path, phase.auth, a.status, phase.status, a.body)
			}
		}
		if phase.status == 503 {
			for _, path := range []string{"/v1/models", "/v1/models/chat"} {
				if a := e.do("GET", path, main, ""); a.status != 503 || a.header.Get("Retry-After") == "" {
					t.Errorf("%s with an unavailable key store: status %d, Retry-After %q", path, a.status, a.header.Get("Retry-After"))
				}
			}
		}
	}
	noMetrics := rt
	noMetrics.Metrics = nil
	e.s.Swap(&noMetrics)
	if a := e.do("GET", "/metrics", nil, ""); a.status != 404 {
		t.Errorf("/metrics without metrics: status %d", a.status)
	}
	e.s.Drain()
	if a := e.do("GET", "/readyz", nil, ""); a.status != 503 {
		t.Errorf("/readyz while draining: status %d", a.status)
	}

	for _, m := range e.unexercised() {
		t.Errorf("documented, never answered: %s", m)
	}
	return fields
}

// storedResponses walks a stored response through GET and DELETE, and
// the store's failures.
func (e *apiEnv) storedResponses(main http.Header) {
	t := e.t
	a := e.do("POST", "/v1/responses", main, `{"model":"chat","input":"keep this","store":true}`)
	var created struct{ ID string }
	if a.status != 200 || json.Unmarshal(a.body, &created) != nil || created.ID == "" {
		t.Fatalf("store: %d %s", a.status, a.body)
	}
	path := "/v1/responses/" + created.ID
	if got := e.do("GET", path, main, ""); got.status != 200 || !bytes.Equal(got.body, stripCost(a.body)) {
		t.Errorf("GET: %d %s, want the response as created %s", got.status, got.body, a.body)
	}
	cont := e.do("POST", "/v1/responses", main, `{"model":"chat","input":"and then?","previous_response_id":"`+created.ID+`"}`)
	if cont.status != 200 || !bytes.Contains(cont.body, []byte(`"previous_response_id":"`+created.ID+`"`)) {
		t.Errorf("continuing: %d %s", cont.status, cont.body)
	}
	if other := e.do("GET", path, bearer(keyChatOnly), ""); other.status != 404 {
		t.Errorf("a key of another project: %d", other.status)
	}
	e.stored.setBroken(true)
	for _, m := range []string{"GET", "DELETE"} {
		if got := e.do(m, path, main, ""); got.status != 503 {
			t.Errorf("%s with the store down: %d %s", m, got.status, got.body)
		}
	}
	e.stored.setBroken(false)
	if got := e.do("DELETE", path, main, ""); got.status != 200 || !bytes.Contains(got.body, []byte(`"deleted":true`)) {
		t.Errorf("DELETE: %d %s", got.status, got.body)
	}
	if got := e.do("GET", path, main, ""); got.status != 404 {
		t.Errorf("GET after DELETE: %d", got.status)
	}
	// One metric series for every id read, not one per id.
	m := e.do("GET", "/metrics", nil, "")
	if !bytes.Contains(m.body, []byte(`route="/v1/responses/{id}"`)) || bytes.Contains(m.body, []byte(created.ID)) {
		t.Errorf("metrics label stored responses by id: %s", m.body)
	}
}

// stripCost removes the usage's cost the gateway adds to an answer as it
// is sent; the stored response is the one before.
func stripCost(b []byte) []byte {
	i := bytes.Index(b, []byte(`,"cost":`))
	if i < 0 {
		return b
	}
	j := i + len(`,"cost":`)
	for j < len(b) && (b[j] == '.' || b[j] == '-' || b[j] == 'e' || (b[j] >= '0' && b[j] <= '9')) {
		j++
	}
	return append(append([]byte(nil), b[:i]...), b[j:]...)
}
