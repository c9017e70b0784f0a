package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
)

// A stream's in-flight tokens fall as its chunks reach the client, end to
// end: an upstream sends 30 chunks of a reply and pauses; while it pauses,
// GET /admin/models shows the deployment holding 30 tokens fewer than it
// reserved when the stream began, and nothing once the stream ends.
func TestStreamedChunksLowerInFlightTokens(t *testing.T) {
	const sent = 30
	paused, started := make(chan struct{}), make(chan struct{})
	// send lets the upstream send its chunks, finish its reply; both are
	// closed at the end whatever happened, so a failed test never leaves
	// the upstream's handler (and the gateway's shutdown) waiting.
	send, finish := make(chan struct{}), make(chan struct{})
	var sendOnce, finishOnce sync.Once
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		close(started)
		<-send // until the test has read the reservation
		chunk := func(delta string) {
			fmt.Fprintf(w, "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":%q},\"finish_reason\":null}]}\n\n", delta)
			w.(http.Flusher).Flush()
		}
		for range sent {
			chunk("tok ")
		}
		close(paused)
		<-finish
		fmt.Fprint(w, "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":30,\"total_tokens\":39}}\n\ndata: [DONE]\n\n")
	}))
	t.Cleanup(up.Close)
	gw := startGateway(t, `listen: 127.0.0.1:0
admin_key: `+testAdminKey+`
providers:
  - {name: up, type: openai-compatible, base_url: `+up.URL+`/v1, api_key: `+upstreamKey+`}
keys:
  - {key: `+clientKey+`, name: tester, project: qa}
models:
  - {name: m, strategy: least-tokens, targets: [{provider: up, model: m}]}
`)
	// Registered after the gateway: cleanups run last first, so the
	// upstream is let go before the gateway waits for its streams.
	t.Cleanup(func() { sendOnce.Do(func() { close(send) }); finishOnce.Do(func() { close(finish) }) })
	inFlight := func() int64 {
		models, _ := adminModels(t, gw)
		return models["m"].Deployments[0].InFlightTokens
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	type result struct {
		completion int64
		err        error
	}
	done := make(chan result, 1)
	go func() {
		p := userMessage("Count to thirty.")
		p.Model = "m"
		p.MaxTokens = openai.Int(200)
		p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
		client := gw.client()
		s := client.Chat.Completions.NewStreaming(ctx, p)
		var r result
		for s.Next() {
			if u := s.Current().Usage; u.TotalTokens > 0 {
				r.completion = u.CompletionTokens
			}
		}
		r.err = s.Err()
		done <- r
	}()
	<-started
	reserved := inFlight()
	if reserved <= 200 {
		t.Fatalf("in flight before the first chunk: %d tokens, want the prompt and max_tokens (> 200)", reserved)
	}
	sendOnce.Do(func() { close(send) })
	<-paused
	waitFor(t, 30*time.Second, "the relayed chunks to lower the in-flight tokens", func() bool { return inFlight() == reserved-sent })
	finishOnce.Do(func() { close(finish) })
	if r := <-done; r.err != nil || r.completion != sent {
		t.Fatalf("stream: %v, %d completion tokens", r.err, r.completion)
	}
	waitFor(t, 30*time.Second, "the stream's end to release the rest", func() bool { return inFlight() == 0 })
}
