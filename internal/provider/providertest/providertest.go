// Package providertest is the conformance suite every provider adapter
// runs. An adapter test supplies the provider's documented wire fixtures
// (a text answer, a tool call, both streamed, and error bodies) with what
// each must translate into; the suite checks the translation and the
// invariants every adapter owes the gateway: chunks are valid OpenAI
// chat.completion.chunk objects, streamed tool-call arguments assemble into
// the call, usage is reported once, errors keep status, message and
// Retry-After, and decoding does not depend on how the bytes are split
// (every stream is also fed one byte per read).
//
// It imports only provider and llm, and is used only from tests.
package providertest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"gatehouse/internal/llm"
	"gatehouse/internal/provider"
)

// Suite is one adapter's fixtures.
type Suite struct {
	// Deployment is the deployment under test; its Adapter is the adapter.
	Deployment provider.Deployment
	// Requests are OpenAI request bodies the adapter must be able to
	// translate; KitchenSink is added to them.
	Requests []string

	Text       Fixture // non-streamed text answer
	TextStream Fixture // streamed text answer
	Tool       Fixture // non-streamed answer with tool calls
	ToolStream Fixture // streamed answer with tool calls

	Errors []ErrorFixture

	// Type is the provider's registry entry, built into a deployment
	// from Settings (Name and Type filled in) and checked against the
	// adapter under test: every provider must give it.
	Type     provider.Type
	Settings provider.Settings
}

// Fixture is one successful provider response and what it must become.
type Fixture struct {
	Header http.Header // Content-Type and friends; may be nil
	Body   []byte      // the provider's bytes, exactly as documented
	Want   Want
}

// Want is the translated answer, assembled.
type Want struct {
	Content   string
	Reasoning string
	ToolCalls []llm.ToolCall // IDs compared only when set here
	Finish    string
	Usage     llm.Usage
}

// ErrorFixture is one provider error response.
type ErrorFixture struct {
	Name           string
	Status         int
	Header         http.Header
	Body           []byte
	WantStatus     int
	WantMessage    string // a substring of the client's message
	WantRetryAfter time.Duration
}

// KitchenSink is a request using everything the gateway translates:
// system and developer messages, a multi-turn history with an image, a
// tool call and its result, tools with a forced choice, JSON schema output,
// stop sequences and sampling settings.
const KitchenSink = `{"model":"m","messages":[` +
	`{"role":"system","content":"You are terse."},` +
	`{"role":"developer","content":"Answer in English."},` +
	`{"role":"user","content":[{"type":"text","text":"What is in this image, and what is the weather in Paris?"},` +
	`{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgo="}}]},` +
	`{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},` +
	`{"role":"tool","tool_call_id":"call_1","content":"{\"temp_c\":21}"}],` +
	`"tools":[{"type":"function","function":{"name":"get_weather","description":"Current weather","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}],` +
	`"tool_choice":"auto","temperature":0.2,"top_p":0.9,"max_tokens":256,"stop":["END"],"user":"u-1"}`

// Run runs the suite.
func Run(t *testing.T, s Suite) {
	t.Helper()
	d := &s.Deployment
	if d.Adapter == nil {
		t.Fatal("providertest: Suite.Deployment.Adapter is nil")
	}
	t.Run("type", func(t *testing.T) { checkType(t, s) })
	t.Run("requests", func(t *testing.T) {
		for _, body := range append([]string{KitchenSink}, s.Requests...) {
			for _, stream := range []bool{false, true} {
				checkRequest(t, d, body, stream)
			}
		}
	})
	for _, c := range []struct {
		name   string
		f      Fixture
		stream bool
	}{{"text", s.Text, false}, {"text_stream", s.TextStream, true}, {"tool", s.Tool, false}, {"tool_stream", s.ToolStream, true}} {
		if c.f.Body == nil {
			t.Errorf("%s: no fixture: every adapter must provide it", c.name)
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			req := MustRequest(t, `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, c.stream)
			var got Want
			if c.stream {
				got = Collect(t, OpenStream(t, d, req, c.f, false))
				again := Collect(t, OpenStream(t, d, req, c.f, true))
				if !reflect.DeepEqual(got, again) {
					t.Errorf("fed one byte at a time the stream decodes differently:\nwhole: %+v\nbytes: %+v", got, again)
				}
			} else {
				got = Complete(t, d, req, c.f)
			}
			Compare(t, got, c.f.Want)
		})
	}
	for _, e := range s.Errors {
		t.Run("error_"+e.Name, func(t *testing.T) {
			resp := &http.Response{StatusCode: e.Status, Header: header(e.Header), Body: io.NopCloser(bytes.NewReader(e.Body))}
			ge := d.Adapter.Error(resp, d)
			if ge == nil {
				t.Fatal("Error returned nil")
			}
			if ge.Status != e.WantStatus {
				t.Errorf("status %d, want %d", ge.Status, e.WantStatus)
			}
			if !strings.Contains(ge.Message, e.WantMessage) {
				t.Errorf("message %q does not keep the provider's %q", ge.Message, e.WantMessage)
			}
			if ge.RetryAfter != e.WantRetryAfter {
				t.Errorf("retry after %v, want %v", ge.RetryAfter, e.WantRetryAfter)
			}
		})
	}
}

// checkType builds the suite's type into a deployment as the gateway
// does, and checks that it is the adapter under test, ready to call, and
// that the options it accepts match what its adapter can do.
func checkType(t *testing.T, s Suite) {
	typ := s.Type
	if typ.New == nil {
		t.Fatal("providertest: Suite.Type is not set: give the provider's registry entry")
	}
	r := &provider.Registry{}
	r.Register(typ)
	settings := s.Settings
	settings.Name, settings.Type = "conformance", typ.Name
	if typ.BaseURL == provider.BaseURLRequired && settings.BaseURL == "" {
		settings.BaseURL = "http://127.0.0.1:9/"
	}
	d, _, err := r.Deployment(settings)
	if err != nil {
		t.Fatalf("type %s: %v", typ.Name, err)
	}
	if got, want := reflect.TypeOf(d.Adapter), reflect.TypeOf(s.Deployment.Adapter); got != want {
		t.Errorf("type %s builds adapter %v, the suite tests %v", typ.Name, got, want)
	}
	if d.Client == nil || d.BaseURL == "" || strings.HasSuffix(d.BaseURL, "/") {
		t.Errorf("type %s: client %v, base URL %q: want a client and a base URL without a trailing slash", typ.Name, d.Client, d.BaseURL)
	}
	if d.Provider != "conformance" || d.Type != typ.Name {
		t.Errorf("deployment names provider %q type %q", d.Provider, d.Type)
	}
	_, lists := d.Adapter.(provider.Discoverer)
	if typ.Accepts(provider.OptionDiscover) != lists {
		t.Errorf("type %s: accepts discover %v, but its adapter lists models %v", typ.Name, typ.Accepts(provider.OptionDiscover), lists)
	}
	if _, native := d.Adapter.(provider.ResponsesAPI); typ.Accepts(provider.OptionResponsesAPI) && !native {
		t.Errorf("type %s accepts responses_api, but its adapter cannot send a Responses API request", typ.Name)
	}
	if len(typ.Presets) > 0 != typ.Accepts(provider.OptionPreset) {
		t.Errorf("type %s: presets %v but accepts the preset option %v", typ.Name, typ.Presets, typ.Accepts(provider.OptionPreset))
	}
}

// MustRequest parses an OpenAI request body, setting "stream" as asked.
func MustRequest(t testing.TB, body string, stream bool) *llm.ChatRequest {
	t.Helper()
	if stream {
		body = strings.Replace(body, "{", `{"stream":true,`, 1)
	}
	req, err := llm.ParseChatRequest([]byte(body))
	if err != nil {
		t.Fatalf("parse request: %v", err)
	}
	return req
}

func checkRequest(t *testing.T, d *provider.Deployment, body string, stream bool) {
	t.Helper()
	req := MustRequest(t, body, stream)
	type ctxKey struct{}
	ctx := context.WithValue(context.Background(), ctxKey{}, "mark")
	hr, err := d.Adapter.ChatRequest(ctx, d, req)
	if err != nil {
		t.Fatalf("ChatRequest(%s): %v", body, err)
	}
	if hr.Context().Value(ctxKey{}) != "mark" {
		t.Error("the upstream request does not carry the caller's context: a client hang-up would not cancel it")
	}
	if hr.Method != http.MethodPost && hr.Method != http.MethodGet {
		t.Errorf("method %s", hr.Method)
	}
	if hr.Body != nil {
		b, _ := io.ReadAll(hr.Body)
		if len(b) > 0 && !json.Valid(b) {
			t.Errorf("upstream body is not JSON: %s", b)
		}
	}
}

// OpenStream hands the fixture to the adapter's Stream, whole or one byte
// per read.
func OpenStream(t testing.TB, d *provider.Deployment, req *llm.ChatRequest, f Fixture, byteByByte bool) llm.Stream {
	t.Helper()
	var r io.Reader = bytes.NewReader(f.Body)
	if byteByByte {
		r = &oneByteReader{b: f.Body}
	}
	resp := &http.Response{StatusCode: http.StatusOK, Header: header(f.Header), Body: io.NopCloser(r)}
	s, err := d.Adapter.Stream(resp, d, req)
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	return s
}

// Complete hands the fixture to the adapter's Completion and assembles
// the answer, checking the body is a valid chat.completion.
func Complete(t testing.TB, d *provider.Deployment, req *llm.ChatRequest, f Fixture) Want {
	t.Helper()
	resp := &http.Response{StatusCode: http.StatusOK, Header: header(f.Header), Body: io.NopCloser(bytes.NewReader(f.Body))}
	c, err := d.Adapter.Completion(resp, d, req)
	if err != nil {
		t.Fatalf("Completion: %v", err)
	}
	var cc llm.ChatCompletion
	if err := json.Unmarshal(c.Body, &cc); err != nil {
		t.Fatalf("completion body is not a chat.completion: %v\n%s", err, c.Body)
	}
	if cc.Object != "chat.completion" || cc.ID == "" || len(cc.Choices) == 0 {
		t.Fatalf("completion lacks object, id or choices: %s", c.Body)
	}
	if !c.HasUsage {
		t.Error("completion reports no usage")
	}
	if cc.Usage == nil || cc.Usage.Usage() != c.Usage {
		t.Errorf("usage in the body (%+v) differs from Completion.Usage (%+v)", cc.Usage, c.Usage)
	}
	m := cc.Choices[0].Message
	w := Want{Finish: cc.Choices[0].FinishReason, Usage: c.Usage, Reasoning: m.ReasoningContent}
	if m.Content != nil {
		w.Content = *m.Content
	}
	for _, tc := range m.ToolCalls {
		if tc.Type != "function" || tc.ID == "" {
			t.Errorf("tool call without id or type function: %+v", tc)
		}
		w.ToolCalls = append(w.ToolCalls, llm.ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
	}
	return w
}

// Collect drains s, checking every chunk, and assembles the answer.
func Collect(t testing.TB, s llm.Stream) Want {
	t.Helper()
	defer s.Close()
	var w Want
	var calls []llm.ToolCall
	usageChunks := 0
	for {
		c, err := s.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("stream: %v", err)
		}
		var ch llm.ChatChunk
		if err := json.Unmarshal(c.Data, &ch); err != nil {
			t.Fatalf("chunk is not JSON: %v\n%s", err, c.Data)
		}
		if ch.Object != "chat.completion.chunk" || ch.ID == "" {
			t.Fatalf("chunk lacks object or id: %s", c.Data)
		}
		if c.Usage != nil {
			usageChunks++
			w.Usage = *c.Usage
			if !c.UsageOnly {
				t.Errorf("usage arrived on a chunk with choices; it belongs on a trailing chunk with none: %s", c.Data)
			}
		}
		for _, choice := range ch.Choices {
			d := choice.Delta
			if d.Content != nil {
				w.Content += *d.Content
			}
			w.Reasoning += d.ReasoningContent
			for _, tc := range d.ToolCalls {
				for len(calls) <= tc.Index {
					calls = append(calls, llm.ToolCall{})
				}
				if tc.ID != "" {
					calls[tc.Index].ID = tc.ID
				}
				calls[tc.Index].Name += tc.Function.Name
				calls[tc.Index].Arguments += tc.Function.Arguments
			}
			if choice.FinishReason != nil {
				if w.Finish != "" {
					t.Errorf("finish reason sent twice: %q then %q", w.Finish, *choice.FinishReason)
				}
				w.Finish = *choice.FinishReason
			}
		}
	}
	if usageChunks != 1 {
		t.Errorf("%d usage chunks, want exactly 1", usageChunks)
	}
	for _, c := range calls {
		if c.ID == "" || c.Name == "" {
			t.Errorf("streamed tool call without id or name: %+v", c)
		}
	}
	w.ToolCalls = calls
	return w
}

// Compare reports differences between an assembled answer and the want.
func Compare(t testing.TB, got, want Want) {
	t.Helper()
	if got.Content != want.Content {
		t.Errorf("content %q, want %q", got.Content, want.Content)
	}
	if got.Reasoning != want.Reasoning {
		t.Errorf("reasoning %q, want %q", got.Reasoning, want.Reasoning)
	}
	if got.Finish != want.Finish {
		t.Errorf("finish reason %q, want %q", got.Finish, want.Finish)
	}
	if got.Usage != want.Usage {
		t.Errorf("usage %+v, want %+v", got.Usage, want.Usage)
	}
	if len(got.ToolCalls) != len(want.ToolCalls) {
		t.Fatalf("%d tool calls, want %d: %+v", len(got.ToolCalls), len(want.ToolCalls), got.ToolCalls)
	}
	for i, w := range want.ToolCalls {
		g := got.ToolCalls[i]
		if w.ID != "" && g.ID != w.ID {
			t.Errorf("tool call %d id %q, want %q", i, g.ID, w.ID)
		}
		if g.Name != w.Name {
			t.Errorf("tool call %d name %q, want %q", i, g.Name, w.Name)
		}
		if !jsonEqual(g.Arguments, w.Arguments) {
			t.Errorf("tool call %d arguments %s, want %s", i, g.Arguments, w.Arguments)
		}
	}
}

func jsonEqual(a, b string) bool {
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return a == b
	}
	return reflect.DeepEqual(x, y)
}

func header(h http.Header) http.Header {
	if h == nil {
		return http.Header{}
	}
	return h
}

// oneByteReader yields its bytes one per Read.
type oneByteReader struct{ b []byte }

func (r *oneByteReader) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	if len(p) == 0 {
		return 0, nil
	}
	p[0] = r.b[0]
	r.b = r.b[1:]
	return 1, nil
}
