package main

import (
	"context"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"gatehouse/internal/config"
	"gatehouse/internal/mockllm"
)

// otlpReceiver is an OTLP/HTTP collector of the test's own: it decodes
// each protobuf export and keeps the spans.
type otlpReceiver struct {
	mu    sync.Mutex
	spans []*tracepb.Span
	srv   *httptest.Server
}

func startOTLPReceiver(t *testing.T) *otlpReceiver {
	t.Helper()
	r := &otlpReceiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path != "/v1/traces" || req.Header.Get("Content-Type") != "application/x-protobuf" {
			http.Error(w, "want POST /v1/traces in protobuf", http.StatusBadRequest)
			return
		}
		body, _ := io.ReadAll(req.Body)
		var ex collectortrace.ExportTraceServiceRequest
		if err := proto.Unmarshal(body, &ex); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		for _, rs := range ex.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				r.spans = append(r.spans, ss.Spans...)
			}
		}
		r.mu.Unlock()
		out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *otlpReceiver) byTrace(traceID []byte) []*tracepb.Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*tracepb.Span
	for _, s := range r.spans {
		if string(s.TraceId) == string(traceID) {
			out = append(out, s)
		}
	}
	return out
}

func attrs(s *tracepb.Span) map[string]string {
	m := map[string]string{}
	for _, kv := range s.Attributes {
		switch v := kv.Value.Value.(type) {
		case *commonpb.AnyValue_StringValue:
			m[kv.Key] = v.StringValue
		case *commonpb.AnyValue_IntValue:
			m[kv.Key] = strconv.FormatInt(v.IntValue, 10)
		case *commonpb.AnyValue_DoubleValue:
			m[kv.Key] = strconv.FormatFloat(v.DoubleValue, 'g', -1, 64)
		}
	}
	return m
}

// TestTracesFollowGenAIConventions: a request from a client that sends a
// traceparent is traced as a child of the client's span — a server span
// "chat chat" with admission, attempt and stream children, the gen_ai.*
// attributes and the usage the client saw — exported over OTLP/HTTP
// within 5 seconds; the upstream receives the attempt span's context.
func TestTracesFollowGenAIConventions(t *testing.T) {
	recv := startOTLPReceiver(t)
	up := startUpstream(t, mockllm.Options{Reply: longReply})
	gw := startGateway(t, usageConfig(up, "telemetry:\n  traces: {endpoint: '"+recv.srv.URL+"', sample_ratio: 1}\n"))
	const clientTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	const clientSpan = "00f067aa0ba902b7"
	c := gw.client(option.WithAPIKey("gh-usage-budgeted"), option.WithHeader("traceparent", "00-"+clientTrace+"-"+clientSpan+"-01"))
	st := c.Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{
		Model: "chat", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("trace me")},
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	})
	var usage openai.CompletionUsage
	for st.Next() {
		if ch := st.Current(); ch.Usage.TotalTokens > 0 {
			usage = ch.Usage
		}
	}
	if err := st.Err(); err != nil {
		t.Fatal(err)
	}
	ended := time.Now()

	traceID, _ := hex.DecodeString(clientTrace)
	var spans []*tracepb.Span
	waitFor(t, 30*time.Second, "the spans of the request", func() bool {
		spans = recv.byTrace(traceID)
		return len(spans) >= 4
	})
	if took := time.Since(ended); took > 5*time.Second {
		t.Fatalf("spans exported %v after the request", took)
	}
	byName := map[string]*tracepb.Span{}
	for _, s := range spans {
		byName[s.Name] = s
	}
	server := byName["chat chat"]
	if server == nil {
		names := []string{}
		for _, s := range spans {
			names = append(names, s.Name)
		}
		t.Fatalf("no server span named \"chat chat\" among %v", names)
	}
	if server.Kind != tracepb.Span_SPAN_KIND_SERVER || hex.EncodeToString(server.ParentSpanId) != clientSpan {
		t.Fatalf("server span kind %v parent %x: want SERVER under the client's span %s", server.Kind, server.ParentSpanId, clientSpan)
	}
	a := attrs(server)
	for k, want := range map[string]string{
		"gen_ai.operation.name": "chat", "gen_ai.request.model": "chat", "gen_ai.response.model": "gpt-4o-mini",
		"gen_ai.system": "openai", "gen_ai.provider.name": "openai", "http.response.status_code": "200",
		"gen_ai.usage.input_tokens":  strconv.FormatInt(usage.PromptTokens, 10),
		"gen_ai.usage.output_tokens": strconv.FormatInt(usage.CompletionTokens, 10),
		"gatehouse.key_id":           "static:budgeted",
	} {
		if a[k] != want {
			t.Errorf("server span %s = %q, want %q", k, a[k], want)
		}
	}
	attempt := byName["chat gpt-4o-mini"]
	for name, kind := range map[string]tracepb.Span_SpanKind{"admission": tracepb.Span_SPAN_KIND_INTERNAL,
		"chat gpt-4o-mini": tracepb.Span_SPAN_KIND_CLIENT, "stream": tracepb.Span_SPAN_KIND_INTERNAL} {
		s := byName[name]
		if s == nil || string(s.ParentSpanId) != string(server.SpanId) || s.Kind != kind {
			t.Fatalf("span %q: %v; want a %v child of the server span", name, s, kind)
		}
	}
	// The upstream got the attempt's context.
	var tp string
	for _, r := range up.mock.Requests() {
		if v := r.Header.Get("Traceparent"); v != "" {
			tp = v
		}
	}
	if want := "00-" + clientTrace + "-" + hex.EncodeToString(attempt.SpanId) + "-01"; tp != want {
		t.Fatalf("upstream traceparent %q, want %q", tp, want)
	}
}

// TestTracesNeedAnEndpoint: traces asked for with no endpoint, in the
// config or the environment, stop the start with an error that says so;
// the environment's endpoint is enough.
func TestTracesNeedAnEndpoint(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	one := 1.0
	if _, err := startTracer(&config.Traces{SampleRatio: &one}); err == nil || !strings.Contains(err.Error(), "OTEL_EXPORTER_OTLP_ENDPOINT") {
		t.Fatalf("no endpoint: %v", err)
	}
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")
	tr, err := startTracer(&config.Traces{SampleRatio: &one})
	if err != nil {
		t.Fatal(err)
	}
	_ = tr.Shutdown(context.Background())
}

// TestTracesOfResponses: a Responses API request is traced as a chat
// request is — the server span named after the operation and model, with
// its usage — and a read of a stored response is named after its route,
// not its id.
func TestTracesOfResponses(t *testing.T) {
	recv := startOTLPReceiver(t)
	up := startUpstream(t, mockllm.Options{})
	gw := startGateway(t, usageConfig(up, "telemetry:\n  traces: {endpoint: '"+recv.srv.URL+"', sample_ratio: 1}\n"))
	const clientTrace = "5cf92f3577b34da6a3ce929d0e0e4737"
	c := gw.client(option.WithAPIKey("gh-usage-budgeted"), option.WithHeader("traceparent", "00-"+clientTrace+"-00f067aa0ba902b8-01"))
	final, _, _ := streamResponse(t, c, responses.ResponseNewParams{Model: "chat", Input: textInput("trace me"), Store: openai.Bool(true)})
	if _, err := c.Responses.Get(context.Background(), final.ID, responses.ResponseGetParams{}); err != nil {
		t.Fatal(err)
	}
	traceID, _ := hex.DecodeString(clientTrace)
	byName := map[string]*tracepb.Span{}
	waitFor(t, 30*time.Second, "the spans of the requests", func() bool {
		for _, s := range recv.byTrace(traceID) {
			byName[s.Name] = s
		}
		return byName["chat chat"] != nil && byName["gen_ai /v1/responses/{id}"] != nil
	})
	a := attrs(byName["chat chat"])
	if a["url.path"] != "/v1/responses" || a["gen_ai.usage.output_tokens"] != strconv.FormatInt(final.Usage.OutputTokens, 10) ||
		a["gen_ai.response.model"] != "gpt-4o-mini" {
		t.Fatalf("server span %v", a)
	}
}
