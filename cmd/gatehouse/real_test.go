//go:build realinference

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// streamed is what a client read from one chat stream.
type streamed struct {
	resp     *http.Response
	text     string
	arrivals []time.Time // when each chunk carrying content arrived
	finish   string
	usage    openai.CompletionUsage
	usageRaw []string // chunks that carried a usage object
	start    time.Time
	end      time.Time // when the stream ended
	err      error
}

// streamChat sends params as a stream through gw and reads it to the end.
func streamChat(ctx context.Context, gw *testGateway, params openai.ChatCompletionNewParams, opts ...option.RequestOption) *streamed {
	out := &streamed{start: time.Now()}
	client := gw.client()
	s := client.Chat.Completions.NewStreaming(ctx, params, append(opts, option.WithResponseInto(&out.resp))...)
	var text strings.Builder
	for s.Next() {
		c := s.Current()
		if strings.Contains(c.RawJSON(), `"usage":{`) {
			out.usageRaw = append(out.usageRaw, c.RawJSON())
			out.usage = c.Usage
		}
		for _, ch := range c.Choices {
			if ch.Delta.Content != "" {
				text.WriteString(ch.Delta.Content)
				out.arrivals = append(out.arrivals, time.Now())
			}
			if ch.FinishReason != "" {
				out.finish = ch.FinishReason
			}
		}
	}
	out.end, out.text, out.err = time.Now(), text.String(), s.Err()
	return out
}

func smolRequest(prompt string, maxTokens int64) openai.ChatCompletionNewParams {
	p := userMessage(prompt)
	p.Model = "smol"
	p.MaxTokens = openai.Int(maxTokens)
	return p
}

// ignoreEOS makes llama-server generate exactly max_tokens, so a
// request's length does not depend on when the model would stop (gatehouse
// passes fields it does not know through).
var ignoreEOS = option.WithJSONSet("ignore_eos", true)

// wantUsageLogged checks the request's log line bills exactly u.
func wantUsageLogged(t *testing.T, gw *testGateway, id string, u openai.CompletionUsage) {
	t.Helper()
	got := loggedUsage(t, requestLine(t, gw, id))
	if got.PromptTokens != u.PromptTokens || got.CompletionTokens != u.CompletionTokens || got.TotalTokens != u.TotalTokens {
		t.Errorf("log line bills %d+%d=%d tokens, the client got %d+%d=%d", got.PromptTokens, got.CompletionTokens, got.TotalTokens,
			u.PromptTokens, u.CompletionTokens, u.TotalTokens)
	}
}

// loggedUsage reads the usage a request's log line bills.
func loggedUsage(t *testing.T, line string) openai.CompletionUsage {
	t.Helper()
	var l struct {
		Prompt     *int64 `json:"prompt_tokens"`
		Completion *int64 `json:"completion_tokens"`
		Total      *int64 `json:"total_tokens"`
	}
	if err := json.Unmarshal([]byte(line), &l); err != nil || l.Prompt == nil || l.Completion == nil || l.Total == nil {
		t.Fatalf("no usage in log line (%v): %s", err, line)
	}
	return openai.CompletionUsage{PromptTokens: *l.Prompt, CompletionTokens: *l.Completion, TotalTokens: *l.Total}
}

// wantServerCounted checks llama-server's own token counters grew by
// exactly usage since before (it adds a request when the request ends, so
// this waits a little for the last one).
func wantServerCounted(t *testing.T, s *llamaServer, before counters, u openai.CompletionUsage) {
	t.Helper()
	want := counters{prompt: int(u.PromptTokens), predicted: int(u.CompletionTokens)}
	var got counters
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		if got = s.counters(t).sub(before); got == want {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Errorf("llama-server counted %+v, the client was billed %+v", got, want)
}

// Streams, completions and embeddings through gatehouse from a real
// server: chunks arrive as they are generated, and the usage the client,
// the log line and the server's own counters report is one number.
func TestRealChatAndEmbeddings(t *testing.T) {
	servers := startLlamaServers(t, "llama")
	srv := servers[0]
	gw := startGateway(t, realConfig(servers))

	t.Run("stream", func(t *testing.T) {
		before := srv.counters(t)
		params := smolRequest("Count from one to one hundred, one number per line.", 64)
		params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
		got := streamChat(context.Background(), gw, params, ignoreEOS)
		if got.err != nil {
			t.Fatalf("stream: %v", got.err)
		}
		if p := got.resp.Header.Get("X-Gatehouse-Provider"); p != "llama" {
			t.Fatalf("answered by %q", p)
		}
		if strings.TrimSpace(got.text) == "" || len(got.arrivals) < 20 {
			t.Fatalf("%d content chunks, text %q", len(got.arrivals), got.text)
		}
		// Relayed as generated: 64 tokens take ~0.8 s, and the first is
		// with the client long before the stream ends.
		first, last := got.arrivals[0], got.arrivals[len(got.arrivals)-1]
		if lead := got.end.Sub(first); lead < 250*time.Millisecond || last.Sub(first) < 250*time.Millisecond {
			t.Fatalf("first content %v before the end, last %v after the first: buffered, not streamed", lead, last.Sub(first))
		}
		if got.finish != "length" {
			t.Fatalf("finish_reason %q, want length (ignore_eos, max_tokens 64)", got.finish)
		}
		if len(got.usageRaw) != 1 {
			t.Fatalf("%d usage chunks: %q", len(got.usageRaw), got.usageRaw)
		}
		u := got.usage
		if u.CompletionTokens != 64 || u.PromptTokens == 0 || u.TotalTokens != u.PromptTokens+u.CompletionTokens {
			t.Fatalf("usage %+v", u)
		}
		t.Logf("%d content chunks over %v, first after %v; usage chunk %s", len(got.arrivals),
			last.Sub(first).Round(time.Millisecond), first.Sub(got.start).Round(time.Millisecond), got.usageRaw[0])
		wantUsageLogged(t, gw, got.resp.Header.Get("X-Gatehouse-Request-Id"), u)
		wantServerCounted(t, srv, before, u)
	})

	// Without include_usage the client sees no usage, but gatehouse asked
	// the server for it anyway and billed it.
	t.Run("stream without usage", func(t *testing.T) {
		before := srv.counters(t)
		got := streamChat(context.Background(), gw, smolRequest("Name three colours.", 24), ignoreEOS)
		if got.err != nil || got.text == "" || got.finish == "" {
			t.Fatalf("stream: %v, finish %q, text %q", got.err, got.finish, got.text)
		}
		if len(got.usageRaw) != 0 {
			t.Fatalf("the client did not ask for usage but got %q", got.usageRaw)
		}
		u := loggedUsage(t, requestLine(t, gw, got.resp.Header.Get("X-Gatehouse-Request-Id")))
		if u.CompletionTokens != 24 || u.PromptTokens == 0 || u.TotalTokens != u.PromptTokens+24 {
			t.Fatalf("logged usage %+v, want 24 completion tokens", u)
		}
		wantServerCounted(t, srv, before, u)
	})

	t.Run("completion", func(t *testing.T) {
		before := srv.counters(t)
		var resp *http.Response
		client := gw.client()
		got, err := client.Chat.Completions.New(context.Background(), smolRequest("What is the capital of France?", 32),
			option.WithResponseInto(&resp))
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Choices) != 1 || strings.TrimSpace(got.Choices[0].Message.Content) == "" || got.Choices[0].FinishReason == "" {
			t.Fatalf("answer %s", got.RawJSON())
		}
		u := got.Usage
		if u.CompletionTokens == 0 || u.CompletionTokens > 32 || u.PromptTokens == 0 || u.TotalTokens != u.PromptTokens+u.CompletionTokens {
			t.Fatalf("usage %+v", u)
		}
		if resp.Header.Get("X-Gatehouse-Provider") != "llama" || resp.Header.Get("X-Gatehouse-Model") != "smollm2-135m" {
			t.Fatalf("headers %v", resp.Header)
		}
		t.Logf("answer %q, usage %d+%d=%d, model %q", got.Choices[0].Message.Content, u.PromptTokens, u.CompletionTokens, u.TotalTokens, got.Model)
		wantUsageLogged(t, gw, resp.Header.Get("X-Gatehouse-Request-Id"), u)
		wantServerCounted(t, srv, before, u)
	})

	t.Run("embeddings", func(t *testing.T) {
		var resp *http.Response
		client := gw.client()
		got, err := client.Embeddings.New(context.Background(), openai.EmbeddingNewParams{
			Model: "smol-embed",
			Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: []string{"a lighthouse by the sea", "hello"}},
		}, option.WithResponseInto(&resp))
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Data) != 2 || len(got.Data[0].Embedding) != 576 || len(got.Data[1].Embedding) != 576 || got.Data[1].Index != 1 {
			t.Fatalf("embeddings: %d vectors", len(got.Data))
		}
		if got.Usage.PromptTokens == 0 {
			t.Fatalf("usage %+v", got.Usage)
		}
		line := requestLine(t, gw, resp.Header.Get("X-Gatehouse-Request-Id"))
		if !strings.Contains(line, fmt.Sprintf(`"prompt_tokens":%d,`, got.Usage.PromptTokens)) || !strings.Contains(line, `"provider":"llama"`) {
			t.Fatalf("log line %s", line)
		}
	})
}

// A client that hangs up mid-stream stops the generation on the server:
// gatehouse cancels its upstream request at once, and llama-server frees
// the slot instead of generating the 2,000 tokens nobody will read.
func TestRealCancelStopsGeneration(t *testing.T) {
	servers := startLlamaServers(t, "llama")
	srv := servers[0]
	gw := startGateway(t, realConfig(servers))
	before := srv.counters(t)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var resp *http.Response
	client := gw.client()
	s := client.Chat.Completions.NewStreaming(ctx, smolRequest("Write a very long story about a dragon, with many chapters.", 2000),
		ignoreEOS, option.WithResponseInto(&resp))
	chunks := 0
	for chunks < 5 && s.Next() {
		if c := s.Current(); len(c.Choices) > 0 && c.Choices[0].Delta.Content != "" {
			chunks++
		}
	}
	if chunks < 5 {
		t.Fatalf("stream ended after %d chunks: %v", chunks, s.Err())
	}
	if n := srv.processing(t); n != 1 {
		t.Fatalf("server processing %v requests while streaming", n)
	}
	cancel()
	canceled := time.Now()
	s.Close()

	waitFor(t, 30*time.Second, "llama-server to stop generating", func() bool { return srv.processing(t) == 0 })
	stopped := time.Since(canceled)
	generated := srv.counters(t).sub(before).predicted
	time.Sleep(500 * time.Millisecond)
	if again := srv.counters(t).sub(before).predicted; again != generated {
		t.Fatalf("tokens predicted went on growing after the slot was freed: %d → %d", generated, again)
	}
	// A few hundred milliseconds of generation, not 2,000 tokens.
	if generated == 0 || generated > 300 {
		t.Fatalf("server generated %d tokens for a stream canceled after %d chunks", generated, chunks)
	}
	t.Logf("slot free %v after the cancel; %d tokens generated, %d chunks read", stopped.Round(time.Millisecond), generated, chunks)

	// The client was sent a 200 before it left; the log line says how the
	// request ended. No usage: the server never sent its usage chunk.
	line := requestLine(t, gw, resp.Header.Get("X-Gatehouse-Request-Id"))
	for _, want := range []string{`"status":200`, `"error_kind":"canceled"`, `"provider":"llama"`, `"attempts":1`} {
		if !strings.Contains(line, want) {
			t.Errorf("log line lacks %s: %s", want, line)
		}
	}
	if m := scrape(t, gw); !strings.Contains(m, `gatehouse_upstream_attempts_total{model="smollm2-135m",outcome="canceled",provider="llama"} 1`) {
		t.Errorf("attempt not counted as canceled:\n%s", grepLines(m, "gatehouse_upstream_attempts_total"))
	}
}

// providerOf sends one short request through gw and returns who answered.
func providerOf(t *testing.T, gw *testGateway, maxTokens int64) string {
	t.Helper()
	var resp *http.Response
	client := gw.client()
	got, err := client.Chat.Completions.New(context.Background(), smolRequest("Say hello.", maxTokens), ignoreEOS,
		option.WithResponseInto(&resp))
	if err != nil {
		t.Fatalf("request: %v", err)
	}
	if got.Usage.CompletionTokens != maxTokens {
		t.Fatalf("usage %+v", got.Usage)
	}
	return resp.Header.Get("X-Gatehouse-Provider")
}

// answer is who answered one request, and with how many tokens.
type answer struct {
	provider string
	id       string // the gateway's request id
	tokens   int64  // prompt and completion, as the server counted them
}

// concurrently sends one request per max_tokens value at once (prompts
// taken in turn) and returns who answered each.
func concurrently(t *testing.T, gw *testGateway, prompts []string, maxTokens []int64) []answer {
	t.Helper()
	answers := make([]answer, len(maxTokens))
	errs := make([]error, len(maxTokens))
	var wg sync.WaitGroup
	for i := range maxTokens {
		wg.Go(func() {
			var resp *http.Response
			client := gw.client()
			got, err := client.Chat.Completions.New(context.Background(), smolRequest(prompts[i%len(prompts)], maxTokens[i]),
				ignoreEOS, option.WithResponseInto(&resp))
			if errs[i] = err; err == nil {
				answers[i] = answer{resp.Header.Get("X-Gatehouse-Provider"), resp.Header.Get("X-Gatehouse-Request-Id"), got.Usage.TotalTokens}
			}
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
	}
	return answers
}

// least-tokens with llama.cpp's load signal: a server busy with work the
// gateway did not send is avoided while it is busy, and used again after.
func TestRealLeastTokensAvoidsBusyServer(t *testing.T) {
	servers := startLlamaServers(t, "a", "b")
	a := servers[0]
	gw := startGateway(t, realConfig(servers))

	release := a.occupy(t, llamaSlots)
	waitFor(t, 30*time.Second, "a's slots to fill", func() bool { return a.processing(t) >= llamaSlots })
	time.Sleep(3 * loadInterval) // the gateway's poller has read it
	for i := range 6 {
		if p := providerOf(t, gw, 8); p != "b" {
			t.Fatalf("request %d went to %q while a was busy with %d streams", i, p, llamaSlots)
		}
	}

	release()
	waitFor(t, 30*time.Second, "a to go idle", func() bool { return a.processing(t) == 0 })
	time.Sleep(3 * loadInterval)
	got := concurrently(t, gw, []string{"Say hello."}, []int64{16, 16, 16, 16})
	split := map[string]int{}
	for _, a := range got {
		split[a.provider]++
	}
	t.Logf("after a was released, 4 concurrent requests went to %v", split)
	if split["a"] == 0 || split["b"] == 0 {
		t.Fatalf("traffic did not return to both servers: %v", got)
	}
}

// Concurrent requests of very different sizes spread over both servers
// by the tokens in flight, not by count: whatever order they arrive in,
// each goes to the server with fewer tokens reserved, so the two totals
// end up no further apart than the largest request.
func TestRealLeastTokensConcurrentMix(t *testing.T) {
	servers := startLlamaServers(t, "a", "b")
	gw := startGateway(t, realConfig(servers))

	long := "Summarise this: " + strings.Repeat("The keeper climbed the stairs each night to light the lamp above the rocks. ", 25)
	prompts := []string{long, "Hi.", "Name a fruit.", long}
	maxTokens := []int64{200, 8, 16, 120, 8, 160, 24, 8}
	start := time.Now()
	got := concurrently(t, gw, prompts, maxTokens)
	elapsed := time.Since(start)
	reqs, reserved, used := map[string]int{}, map[string]int64{}, map[string]int64{}
	var largest int64
	var order []string
	for i, a := range got {
		// What least-tokens weighed: the gateway's prompt estimate plus
		// max_tokens (all eight were picked before the first finished).
		cost := estimatedPrompt(t, requestLine(t, gw, a.id)) + maxTokens[i]
		largest = max(largest, cost)
		reqs[a.provider]++
		reserved[a.provider] += cost
		used[a.provider] += a.tokens
		order = append(order, fmt.Sprintf("%s:%d", a.provider, cost))
	}
	t.Logf("%d concurrent requests in %v: a took %d (%d tokens reserved, %d used), b took %d (%d reserved, %d used); by request %v",
		len(got), elapsed.Round(time.Millisecond), reqs["a"], reserved["a"], used["a"], reqs["b"], reserved["b"], used["b"], order)
	if reqs["a"] == 0 || reqs["b"] == 0 {
		t.Fatalf("one server took everything: %v", order)
	}
	if d := reserved["a"] - reserved["b"]; max(d, -d) > largest {
		t.Fatalf("reserved tokens a=%d b=%d differ by more than the largest request (%d)", reserved["a"], reserved["b"], largest)
	}
}

// estimatedPrompt reads the prompt tokens the gateway estimated (and
// reserved) for a request from its log line.
func estimatedPrompt(t *testing.T, line string) int64 {
	t.Helper()
	var l struct {
		Estimate *int64 `json:"estimated_prompt_tokens"`
	}
	if err := json.Unmarshal([]byte(line), &l); err != nil || l.Estimate == nil {
		t.Fatalf("no estimated_prompt_tokens in log line (%v): %s", err, line)
	}
	return *l.Estimate
}
