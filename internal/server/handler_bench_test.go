package server

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"gatehouse/internal/auth"
	"gatehouse/internal/limit"
	"gatehouse/internal/metrics"
	"gatehouse/internal/provider"
	"gatehouse/internal/provider/openai"
	"gatehouse/internal/route"
	"gatehouse/internal/tokens"
)

// cannedUpstream answers every call with the same chat completion, in
// memory: the benchmark counts the handler's work, not a socket's.
type cannedUpstream struct{ body string }

func (u cannedUpstream) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		_, _ = io.Copy(io.Discard, r.Body)
		r.Body.Close()
	}
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(strings.NewReader(u.body)), ContentLength: int64(len(u.body)), Request: r}, nil
}

// BenchmarkChatHandler is one non-streamed chat completion through the
// handler of POST /v1/chat/completions, the upstream answering from
// memory: "bare" as gatehouse serve --bare runs it (no key, limits,
// metrics or log line), "full" with a key with rpm, tpm and a budget,
// metrics and the request log line. Its allocs/op are the hot path's
// allocations (BENCHMARKS.md, issue 16).
func BenchmarkChatHandler(b *testing.B) {
	const answer = `{"id":"chatcmpl-1","object":"chat.completion","created":1764000000,"model":"m","choices":[{"index":0,` +
		`"message":{"role":"assistant","content":"A gateway adds a hop, and what it buys is one place for keys, limits and spend.",` +
		`"refusal":null,"annotations":[]},"logprobs":null,"finish_reason":"stop"}],` +
		`"usage":{"prompt_tokens":75,"completion_tokens":20,"total_tokens":95},"service_tier":"default","system_fingerprint":"fp_1"}`
	prompt := strings.Repeat("Summarise the trade-offs of running an LLM gateway in front of several providers. ", 4)[:300]
	body := `{"model":"chat","messages":[{"role":"user","content":"` + prompt + `"}]}`

	for _, full := range []bool{false, true} {
		name := "bare"
		if full {
			name = "full"
		}
		b.Run(name, func(b *testing.B) {
			d := &provider.Deployment{Provider: "up", Type: "openai", Model: "m", BaseURL: "http://upstream.invalid/v1",
				Adapter: openai.Adapter{}, Client: &http.Client{Transport: cannedUpstream{answer}}}
			table := route.NewTable([]*route.Group{route.NewGroup("chat", route.Failover, []*provider.Deployment{d}, nil, provider.Timeouts{})})
			rt := &Runtime{Routes: table, MaxBodyBytes: 1 << 20, ModelList: ModelList(table)}
			s := New(rt, slog.New(slog.DiscardHandler))
			if full {
				e, err := limit.NewEmbedded(context.Background(), limit.Options{})
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { _ = e.Close(context.Background()) })
				prices, err := tokens.NewCatalog(tokens.CatalogOptions{Overrides: map[string]tokens.Price{"m": tokens.PerMillion(1, 1, 1)}})
				if err != nil {
					b.Fatal(err)
				}
				rt.Auth = auth.NewStatic([]auth.StaticKey{{Secret: "gh-bench", Principal: auth.Principal{KeyID: "key1", Project: "bench",
					RPM: 1e9, TPM: 1e12, Budget: &auth.Budget{USD: 1e9, Period: "total"}}}})
				rt.Limits = &Limits{Admitter: e, Prices: prices}
				rt.Metrics = metrics.New()
				rt.LogRequests = true
				s.SetRequestLog(io.Discard)
			}
			h := s.Handler()
			serve := func() *httptest.ResponseRecorder {
				req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(body))
				req.Header.Set("Authorization", "Bearer gh-bench")
				req.Header.Set("Content-Type", "application/json")
				w := httptest.NewRecorder()
				h.ServeHTTP(w, req)
				return w
			}
			w := serve()
			if w.Code != http.StatusOK {
				b.Fatalf("status %d: %s", w.Code, w.Body)
			}
			if got := w.Header().Get("X-Ratelimit-Limit-Requests") != ""; got != full {
				b.Fatalf("x-ratelimit headers %v, want %v", got, full)
			}
			if full && !strings.Contains(w.Body.String(), `"cost":`) {
				b.Fatalf("no cost in the answer's usage: %s", w.Body)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				serve()
			}
		})
	}
}
