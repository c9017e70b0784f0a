package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"gatehouse/internal/mockllm"
)

// Routing and resilience end to end: several upstreams behind one model,
// each failing in its own way, and the official SDK as the client.

// backend is an upstream for routing tests: a mockllm behind a switch
// that can break it (503) at will, counting what reaches it.
type backend struct {
	mock    *mockllm.Server
	URL     string
	broken  atomic.Bool
	failFor atomic.Int64 // this many more requests get a 503
	hits    atomic.Int64
}

func startBackend(t *testing.T, o mockllm.Options) *backend {
	t.Helper()
	o.APIKey = upstreamKey
	b := &backend{mock: mockllm.New(o)}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/v1/") {
			b.hits.Add(1)
		}
		if b.broken.Load() || (strings.HasPrefix(r.URL.Path, "/v1/") && b.failFor.Add(-1) >= 0) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, `{"error":{"message":"The engine is currently overloaded, please try again later.","type":"server_error","param":null,"code":null}}`)
			return
		}
		b.mock.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	b.URL = srv.URL
	return b
}

// resetServer accepts connections and resets them at once.
func resetServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if tc, ok := c.(*net.TCPConn); ok {
				_ = tc.SetLinger(0) // close with RST
			}
			c.Close()
		}
	}()
	return "http://" + ln.Addr().String()
}

// contextLimitServer answers every chat request with OpenAI's
// context-length error.
func contextLimitServer(t *testing.T) (string, *atomic.Int64) {
	t.Helper()
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, `{"error":{"message":"This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, &hits
}

// routingConfig lists one openai-compatible provider per name=URL pair,
// then extra (models and top-level sections) verbatim.
func routingConfig(providers [][2]string, extra string) string {
	var b strings.Builder
	b.WriteString("listen: 127.0.0.1:0\nproviders:\n")
	for _, p := range providers {
		fmt.Fprintf(&b, "  - {name: %s, type: openai-compatible, base_url: %s/v1, api_key: %s}\n", p[0], p[1], upstreamKey)
	}
	b.WriteString("keys:\n  - {key: " + clientKey + ", name: tester, project: qa}\n")
	b.WriteString(extra)
	return b.String()
}

func chatWith(t *testing.T, gw *testGateway, model, text string) (*openai.ChatCompletion, *http.Response, error) {
	t.Helper()
	var resp *http.Response
	params := userMessage(text)
	params.Model = model
	client := gw.client()
	got, err := client.Chat.Completions.New(context.Background(), params, option.WithResponseInto(&resp))
	return got, resp, err
}

func wantAnswer(t *testing.T, got *openai.ChatCompletion, resp *http.Response, err error, provider, attempts string) {
	t.Helper()
	if err != nil {
		t.Fatalf("request failed: %v", err)
	}
	if len(got.Choices) != 1 || got.Choices[0].Message.Content == "" {
		t.Fatalf("empty answer %+v", got)
	}
	if p, a := resp.Header.Get("X-Gatehouse-Provider"), resp.Header.Get("X-Gatehouse-Attempts"); p != provider || a != attempts {
		t.Fatalf("answered by %q after %q attempts, want %q after %q", p, a, provider, attempts)
	}
}

func TestFailoverToNextDeployment(t *testing.T) {
	good := startBackend(t, mockllm.Options{})
	unavailable := startBackend(t, mockllm.Options{ErrorStatus: 503})
	limited := startBackend(t, mockllm.Options{ErrorStatus: 429, RetryAfter: "30"})
	slow := startBackend(t, mockllm.Options{Latency: 10 * time.Second, TTFT: 10 * time.Second})
	reset := resetServer(t)
	gw := startGateway(t, routingConfig([][2]string{
		{"unavailable", unavailable.URL}, {"limited", limited.URL}, {"slow", slow.URL}, {"reset", reset}, {"good", good.URL},
	}, `models:
  - name: m503
    targets: [{provider: unavailable, model: gpt-4o-mini}, {provider: good, model: gpt-4o-mini}]
  - name: m429
    targets: [{provider: limited, model: gpt-4o-mini}, {provider: good, model: gpt-4o-mini}]
  - name: mhang
    timeouts: {first_byte: 200ms}
    targets: [{provider: slow, model: gpt-4o-mini}, {provider: good, model: gpt-4o-mini}]
  - name: mreset
    targets: [{provider: reset, model: gpt-4o-mini}, {provider: good, model: gpt-4o-mini}]
`))

	for _, c := range []struct{ model, name string }{{"m503", "503"}, {"m429", "429"}, {"mhang", "hang"}, {"mreset", "reset"}} {
		t.Run(c.name, func(t *testing.T) {
			before := good.mock.Stats().Completed
			start := time.Now()
			got, resp, err := chatWith(t, gw, c.model, "Hello from "+c.name)
			wantAnswer(t, got, resp, err, "good", "2")
			if !strings.Contains(got.Choices[0].Message.Content, "Hello from "+c.name) {
				t.Fatalf("wrong answer %q", got.Choices[0].Message.Content)
			}
			if d := time.Since(start); d > 3*time.Second {
				t.Fatalf("failover took %v", d)
			}
			if n := good.mock.Stats().Completed - before; n != 1 {
				t.Fatalf("good upstream completed %d requests", n)
			}
			// One request, one usage: the log line bills the attempt that answered.
			line := requestLine(t, gw, resp.Header.Get("X-Gatehouse-Request-Id"))
			for _, want := range []string{`"attempts":2`, `"billed_attempt":2`, `"provider":"good"`, `"status":200`,
				fmt.Sprintf(`"total_tokens":%d`, got.Usage.TotalTokens)} {
				if !strings.Contains(line, want) {
					t.Fatalf("log line lacks %s: %s", want, line)
				}
			}
			if strings.Count(gw.Logs.String(), `"msg":"request","request_id":"`+resp.Header.Get("X-Gatehouse-Request-Id")) != 1 {
				t.Fatal("not exactly one request line")
			}
		})
	}
	if n := unavailable.hits.Load(); n != 1 {
		t.Fatalf("503 upstream called %d times", n)
	}

	// The 429's Retry-After keeps that deployment out of selection for
	// later requests while another can serve.
	got, resp, err := chatWith(t, gw, "m429", "again")
	wantAnswer(t, got, resp, err, "good", "1")
	if n := limited.hits.Load(); n != 1 {
		t.Fatalf("rate-limited upstream called %d times during its Retry-After", n)
	}

	// Streams fail over the same way before their first byte.
	params := userMessage("stream after a hang")
	params.Model = "mhang"
	var sresp *http.Response
	client := gw.client()
	s := client.Chat.Completions.NewStreaming(context.Background(), params, option.WithResponseInto(&sresp))
	var text strings.Builder
	for s.Next() {
		if c := s.Current(); len(c.Choices) > 0 {
			text.WriteString(c.Choices[0].Delta.Content)
		}
	}
	if s.Err() != nil || !strings.Contains(text.String(), "stream after a hang") {
		t.Fatalf("stream: %v %q", s.Err(), text.String())
	}
	if sresp.Header.Get("X-Gatehouse-Provider") != "good" || sresp.Header.Get("X-Gatehouse-Attempts") != "2" {
		t.Fatalf("stream headers %v", sresp.Header)
	}
}

// After the first byte there is no second attempt: the client gets a
// clean error event and the other deployment is never called.
func TestMidStreamFailureIsNotRetried(t *testing.T) {
	first := startBackend(t, mockllm.Options{})
	second := startBackend(t, mockllm.Options{})
	gw := startGateway(t, routingConfig([][2]string{{"first", first.URL}, {"second", second.URL}}, `models:
  - name: m
    targets: [{provider: first, model: gpt-4o-mini}, {provider: second, model: gpt-4o-mini}]
`))
	params := userMessage("one two three four five six seven @mock(fail_after=2)")
	params.Model = "m"
	var resp *http.Response
	client := gw.client()
	s := client.Chat.Completions.NewStreaming(context.Background(), params, option.WithResponseInto(&resp))
	chunks := 0
	for s.Next() {
		chunks++
	}
	if s.Err() == nil || !strings.Contains(s.Err().Error(), "ended unexpectedly") || chunks == 0 {
		t.Fatalf("after %d chunks: %v", chunks, s.Err())
	}
	if resp.Header.Get("X-Gatehouse-Provider") != "first" || resp.Header.Get("X-Gatehouse-Attempts") != "1" {
		t.Fatalf("headers %v", resp.Header)
	}
	// The request's log line is written when the gateway is done with it:
	// from then on no attempt can follow, so the count is final.
	line := requestLine(t, gw, resp.Header.Get("X-Gatehouse-Request-Id"))
	if n := second.hits.Load(); n != 0 {
		t.Fatalf("a second attempt was made after the first byte (%d)", n)
	}
	if !strings.Contains(line, `"attempts":1`) || !strings.Contains(line, `"billed_attempt":1`) {
		t.Fatalf("log line %s", line)
	}
}

func TestBreakerOpensAndRecovers(t *testing.T) {
	flaky := startBackend(t, mockllm.Options{})
	steady := startBackend(t, mockllm.Options{})
	gw := startGateway(t, routingConfig([][2]string{{"flaky", flaky.URL}, {"steady", steady.URL}}, `breaker: {failures: 2, cooldown: 400ms}
models:
  - name: m
    targets: [{provider: flaky, model: gpt-4o-mini}, {provider: steady, model: gpt-4o-mini}]
`))
	flaky.broken.Store(true)
	for range 2 {
		got, resp, err := chatWith(t, gw, "m", "x")
		wantAnswer(t, got, resp, err, "steady", "2")
	}
	if !strings.Contains(scrape(t, gw), `gatehouse_breaker_state{model="gpt-4o-mini",provider="flaky"} 2`) {
		t.Fatalf("breaker not open in metrics:\n%s", grepLines(scrape(t, gw), "breaker"))
	}
	// Open: the flaky deployment is skipped without being called.
	for range 3 {
		got, resp, err := chatWith(t, gw, "m", "x")
		wantAnswer(t, got, resp, err, "steady", "1")
	}
	if n := flaky.hits.Load(); n != 2 {
		t.Fatalf("open deployment was called: %d hits", n)
	}
	// It recovers; after the cooldown one probe finds out and closes it.
	// Until the cooldown has passed, requests keep going to steady alone;
	// the first after it probes flaky. Wait for that event, not a time.
	flaky.broken.Store(false)
	var got *openai.ChatCompletion
	var resp *http.Response
	var err error
	waiting := 0 // requests answered by steady while flaky cooled down
	waitFor(t, 30*time.Second, "a probe of the cooled-down deployment", func() bool {
		got, resp, err = chatWith(t, gw, "m", "x")
		if err == nil && resp.Header.Get("X-Gatehouse-Provider") == "steady" {
			wantAnswer(t, got, resp, err, "steady", "1") // flaky still skipped, not tried
			waiting++
			return false
		}
		return true
	})
	wantAnswer(t, got, resp, err, "flaky", "1")
	m := scrape(t, gw)
	for _, want := range []string{
		`gatehouse_breaker_state{model="gpt-4o-mini",provider="flaky"} 0`,
		`gatehouse_breaker_transitions_total{model="gpt-4o-mini",provider="flaky",state="open"} 1`,
		`gatehouse_breaker_transitions_total{model="gpt-4o-mini",provider="flaky",state="half_open"} 1`,
		`gatehouse_upstream_attempts_total{model="gpt-4o-mini",outcome="failure",provider="flaky"} 2`,
		fmt.Sprintf(`gatehouse_upstream_attempts_total{model="gpt-4o-mini",outcome="success",provider="steady"} %d`, 5+waiting),
		fmt.Sprintf(`gatehouse_requests_total{code="200",error_kind="",model="m",route="/v1/chat/completions"} %d`, 6+waiting),
	} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %s:\n%s", want, grepLines(m, "gatehouse_"))
		}
	}
}

// requestLine is the request's own log line (not its attempt lines).
func requestLine(t *testing.T, gw *testGateway, id string) string {
	t.Helper()
	var line string
	waitFor(t, 30*time.Second, "log line of "+id, func() bool {
		for _, l := range strings.Split(gw.Logs.String(), "\n") {
			if strings.Contains(l, `"msg":"request"`) && strings.Contains(l, `"request_id":"`+id+`"`) {
				line = l
				return true
			}
		}
		return false
	})
	return line
}

func scrape(t *testing.T, gw *testGateway) string {
	t.Helper()
	resp, err := http.Get(gw.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics: %d %s", resp.StatusCode, b)
	}
	return string(b)
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

func TestFallbackModels(t *testing.T) {
	down := startBackend(t, mockllm.Options{ErrorStatus: 503})
	backup := startBackend(t, mockllm.Options{})
	small, smallHits := contextLimitServer(t)
	gw := startGateway(t, routingConfig([][2]string{{"down", down.URL}, {"backup", backup.URL}, {"small", small}}, `models:
  - name: primary
    targets: [{provider: down, model: gpt-4o-mini}]
    fallbacks: [secondary]
  - name: secondary
    targets: [{provider: backup, model: gpt-4o}]
  - name: short
    targets: [{provider: small, model: gpt-4o-mini}]
    context_fallbacks: [long]
  - name: tiny
    max_context: 40
    targets: [{provider: small, model: gpt-4o-mini}]
    context_fallbacks: [long]
  - name: long
    targets: [{provider: backup, model: gpt-4.1}]
`))
	// Every deployment of the model fails: its fallback model answers.
	got, resp, err := chatWith(t, gw, "primary", "fall back please")
	wantAnswer(t, got, resp, err, "backup", "2")
	if resp.Header.Get("X-Gatehouse-Model") != "gpt-4o" || got.Model != "gpt-4o" {
		t.Fatalf("answered by model %q", resp.Header.Get("X-Gatehouse-Model"))
	}

	// The provider says the prompt is too long: the long-context model answers.
	got, resp, err = chatWith(t, gw, "short", "a long story")
	wantAnswer(t, got, resp, err, "backup", "2")
	if resp.Header.Get("X-Gatehouse-Model") != "gpt-4.1" || smallHits.Load() != 1 {
		t.Fatalf("model %q, small called %d times", resp.Header.Get("X-Gatehouse-Model"), smallHits.Load())
	}

	// The estimate exceeds max_context: the small model is not even called.
	got, resp, err = chatWith(t, gw, "tiny", strings.Repeat("many words in a prompt ", 20))
	wantAnswer(t, got, resp, err, "backup", "1")
	if smallHits.Load() != 1 {
		t.Fatal("the model whose window is too small was called")
	}
}

func TestCancelDuringBackoffStopsAtOnce(t *testing.T) {
	down := startBackend(t, mockllm.Options{ErrorStatus: 503})
	gw := startGateway(t, routingConfig([][2]string{{"down", down.URL}}, `models:
  - name: m
    targets: [{provider: down, model: gpt-4o-mini}]
    retry: {max_attempts: 5, backoff: 1m, max_backoff: 2m}
`))
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	var resp *http.Response
	params := userMessage("x")
	params.Model = "m"
	client := gw.client()
	_, err := client.Chat.Completions.New(ctx, params, option.WithResponseInto(&resp))
	if err == nil {
		t.Fatal("expected the client's deadline")
	}
	// The gateway notices the hang-up during its backoff and ends the
	// request: its log line appears long before the backoff (at least
	// 30s, jittered, and within the 10-minute total) would end. Once it is
	// written the request is over, so the count is final.
	waitFor(t, 30*time.Second, "the request's log line", func() bool {
		return strings.Contains(gw.Logs.String(), `"status":499`)
	})
	if n := down.hits.Load(); n != 1 {
		t.Fatalf("upstream called %d times; the loop went on after the client left", n)
	}
}

func TestRetryRecoversSingleDeployment(t *testing.T) {
	flaky := startBackend(t, mockllm.Options{})
	gw := startGateway(t, routingConfig([][2]string{{"flaky", flaky.URL}}, `models:
  - name: m
    targets: [{provider: flaky, model: gpt-4o-mini}]
    retry: {max_attempts: 3, backoff: 150ms}
`))
	flaky.failFor.Store(1)
	got, resp, err := chatWith(t, gw, "m", "eventually")
	wantAnswer(t, got, resp, err, "flaky", "2")
}

func TestRoundRobinAcrossUpstreams(t *testing.T) {
	a := startBackend(t, mockllm.Options{})
	b := startBackend(t, mockllm.Options{})
	gw := startGateway(t, routingConfig([][2]string{{"a", a.URL}, {"b", b.URL}}, `models:
  - name: m
    strategy: round-robin
    targets: [{provider: a, model: gpt-4o-mini}, {provider: b, model: gpt-4o-mini}]
  - name: e
    targets: [{provider: a, model: text-embedding-3-small}, {provider: b, model: text-embedding-3-small}]
`))
	for range 6 {
		if _, _, err := chatWith(t, gw, "m", "x"); err != nil {
			t.Fatal(err)
		}
	}
	if a.hits.Load() != 3 || b.hits.Load() != 3 {
		t.Fatalf("round robin spread a=%d b=%d", a.hits.Load(), b.hits.Load())
	}
	// Embeddings fail over too.
	a.broken.Store(true)
	var resp *http.Response
	client := gw.client()
	emb, err := client.Embeddings.New(context.Background(), openai.EmbeddingNewParams{
		Model: "e", Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String("hello")}}, option.WithResponseInto(&resp))
	if err != nil || len(emb.Data) != 1 || resp.Header.Get("X-Gatehouse-Provider") != "b" || resp.Header.Get("X-Gatehouse-Attempts") != "2" {
		t.Fatalf("embeddings: %v %v", err, resp.Header)
	}
}

// The Anthropic Messages route runs the same attempt loop.
func TestMessagesRouteFailsOver(t *testing.T) {
	down := startBackend(t, mockllm.Options{ErrorStatus: 503})
	good := startBackend(t, mockllm.Options{})
	gw := startGateway(t, routingConfig([][2]string{{"down", down.URL}, {"good", good.URL}}, `models:
  - name: m
    targets: [{provider: down, model: gpt-4o-mini}, {provider: good, model: gpt-4o-mini}]
`))
	for _, stream := range []bool{false, true} {
		body := fmt.Sprintf(`{"model":"m","max_tokens":64,"stream":%v,"messages":[{"role":"user","content":"hi there"}]}`, stream)
		req, _ := http.NewRequest(http.MethodPost, gw.URL+"/v1/messages", strings.NewReader(body))
		req.Header.Set("x-api-key", clientKey)
		req.Header.Set("anthropic-version", "2023-06-01")
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || resp.Header.Get("X-Gatehouse-Provider") != "good" || resp.Header.Get("X-Gatehouse-Attempts") != "2" {
			t.Fatalf("stream=%v: %d %v %s", stream, resp.StatusCode, resp.Header, b)
		}
		if stream && (!strings.Contains(string(b), "event: message_stop") || strings.Count(string(b), "event: message_start") != 1) {
			t.Fatalf("stream body %s", b)
		}
	}
}

// TestReloadKeepsOpenBreaker: a deployment whose breaker opened stays out
// of selection across a config reload that keeps it, so the reload does
// not send traffic back to it.
func TestReloadKeepsOpenBreaker(t *testing.T) {
	down := startUpstream(t, mockllm.Options{ErrorStatus: 503})
	ok := startUpstream(t, mockllm.Options{})
	cfg := `listen: 127.0.0.1:0
providers:
  - {name: down, type: openai-compatible, base_url: ` + down.URL + `/v1, api_key: ` + upstreamKey + `}
  - {name: ok, type: openai-compatible, base_url: ` + ok.URL + `/v1, api_key: ` + upstreamKey + `}
keys:
  - {key: ` + clientKey + `, name: tester, project: qa}
breaker: {failures: 2, cooldown: 1h}
models:
  - name: chat
    strategy: failover
    targets: [{provider: down, model: gpt-4o-mini}, {provider: ok, model: gpt-4o-mini}]
`
	gw := startGateway(t, cfg)
	attempts := func() string {
		o := chatOnce(context.Background(), gw.client(), "chat")
		if o.status != 200 {
			t.Fatalf("status %d: %s", o.status, o.msg)
		}
		return o.header.Get("X-Gatehouse-Attempts")
	}
	for range 2 {
		if a := attempts(); a != "2" {
			t.Fatalf("before the breaker opened: %s attempts, want 2", a)
		}
	}
	if a := attempts(); a != "1" {
		t.Fatalf("breaker open: %s attempts, want 1", a)
	}
	replaceFile(t, gw.Path, cfg+"  - name: added-later\n    targets: [{provider: ok, model: gpt-4o}]\n")
	waitFor(t, 30*time.Second, "the reload", func() bool { return strings.Contains(gw.Logs.String(), "config reloaded") })
	if a := attempts(); a != "1" {
		t.Fatalf("after the reload: %s attempts, want 1 (the open breaker was forgotten)", a)
	}
}
