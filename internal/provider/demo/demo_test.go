package demo

import (
	"context"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"gatehouse/internal/llm"
	"gatehouse/internal/provider"
	"gatehouse/internal/provider/providertest"
)

// deployment builds the "mock" type as the gateway does, with the model's
// clock replaced so pacing is recorded rather than waited for.
func deployment(t *testing.T, header http.Header, slept *[]time.Duration) *provider.Deployment {
	t.Helper()
	r := &provider.Registry{}
	r.Register(Type())
	d, tr, err := r.Deployment(provider.Settings{Name: "demo", Type: "mock", Header: header})
	if err != nil || tr != nil {
		t.Fatalf("deployment: %v (transport %v: the demo model needs none)", err, tr)
	}
	d.Model = "gpt-4o-mini"
	d.StreamUsage = true
	d.Client = &http.Client{Transport: provider.HandlerTransport{Handler: Model{
		Sleep: func(_ context.Context, d time.Duration) error { *slept = append(*slept, d); return nil },
	}}}
	return &d
}

func do(t *testing.T, d *provider.Deployment, body string, stream bool) providertest.Want {
	t.Helper()
	req := providertest.MustRequest(t, body, stream)
	hr, err := d.Adapter.ChatRequest(context.Background(), d, req)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := d.Client.Do(hr)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	if stream {
		s, err := d.Adapter.Stream(resp, d, req)
		if err != nil {
			t.Fatal(err)
		}
		return providertest.Collect(t, s)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return providertest.Complete(t, d, req, providertest.Fixture{Header: resp.Header, Body: b})
}

func TestDemoAnswersWholeAndStreamedAlike(t *testing.T) {
	var slept []time.Duration
	d := deployment(t, http.Header{"X-Mock-Ttft": {"150ms"}, "X-Mock-Tps": {"20"}}, &slept)
	body := `{"model":"demo-chat","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hello, gateway"}]}`
	whole := do(t, d, body, false)
	streamed := do(t, d, body, true)
	want := Reply("Hello, gateway")
	if whole.Content != want || streamed.Content != want {
		t.Fatalf("content %q / streamed %q, want %q", whole.Content, streamed.Content, want)
	}
	words := len(strings.Fields(want))
	for _, got := range []providertest.Want{whole, streamed} {
		if got.Finish != "stop" || got.Usage.CompletionTokens != words || got.Usage.PromptTokens != 2+3+2+3 {
			t.Fatalf("finish %q usage %+v, want stop and %d completion, 10 prompt tokens", got.Finish, got.Usage, words)
		}
	}
	// The whole answer waits the ttft once; the stream waits it, then
	// 1/20 s between its words.
	want2 := append([]time.Duration{150 * time.Millisecond, 150 * time.Millisecond}, slices.Repeat([]time.Duration{50 * time.Millisecond}, words-1)...)
	if !slices.Equal(slept, want2) {
		t.Fatalf("paced %v, want %v", slept, want2)
	}
}

func TestDemoStopsAtMaxTokens(t *testing.T) {
	var slept []time.Duration
	d := deployment(t, nil, &slept)
	got := do(t, d, `{"model":"m","max_tokens":3,"messages":[{"role":"user","content":"hi"}]}`, true)
	if got.Content != "Hello from the" || got.Finish != "length" || got.Usage.CompletionTokens != 3 {
		t.Fatalf("got %+v", got)
	}
	if len(slept) != 0 {
		t.Fatalf("paced %v without pacing headers", slept)
	}
}

func TestDemoEmbeddings(t *testing.T) {
	var slept []time.Duration
	d := deployment(t, nil, &slept)
	e := d.Adapter.(provider.Embedder)
	for _, format := range []string{"", `,"encoding_format":"base64"`} {
		req, err := llm.ParseEmbedRequest([]byte(`{"model":"m","input":["the cat sat","the cat sat","stock prices fell"]` + format + `}`))
		if err != nil {
			t.Fatal(err)
		}
		hr, err := e.EmbedRequest(context.Background(), d, req)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := d.Client.Do(hr)
		if err != nil {
			t.Fatal(err)
		}
		c, err := e.Embedding(resp, d, req)
		if err != nil {
			t.Fatal(err)
		}
		if c.Usage.PromptTokens != 9 || !strings.Contains(string(c.Body), `"index":2`) {
			t.Fatalf("format %q: usage %+v body %.200s", format, c.Usage, c.Body)
		}
	}
	a, b, other := Embed("the cat sat"), Embed("The cat  sat"), Embed("stock prices fell")
	if !slices.Equal(a, b) || dot(a, a) < 0.999 || dot(a, other) > 0.5 {
		t.Fatalf("equal texts %v, |a|² %v, unrelated %v", slices.Equal(a, b), dot(a, a), dot(a, other))
	}
}

func dot(a, b []float32) float32 {
	var s float32
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}

func TestDemoRefusesBadRequests(t *testing.T) {
	for _, c := range []struct{ path, body string }{
		{"/v1/chat/completions", `{`},
		{"/v1/chat/completions", `{"model":"m","messages":[]}`},
		{"/v1/embeddings", `{"model":"m","input":[]}`},
		{"/v1/completions", `{}`},
	} {
		req, _ := http.NewRequest(http.MethodPost, "http://demo"+c.path, strings.NewReader(c.body))
		resp, err := provider.HandlerTransport{Handler: Model{}}.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode/100 != 4 || !strings.Contains(string(b), `"error"`) {
			t.Fatalf("%s %s: %d %s", c.path, c.body, resp.StatusCode, b)
		}
	}
}
