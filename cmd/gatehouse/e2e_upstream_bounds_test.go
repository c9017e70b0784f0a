package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"gatehouse/internal/mockllm"
)

// Upstream answers the gateway must not trust: a redirect (following it
// would send the provider's key and the prompt elsewhere) and a body
// larger than the configured bound.

func TestProviderRedirectsAreNotFollowed(t *testing.T) {
	var elsewhere atomic.Int64
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		elsewhere.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"id":"x","object":"chat.completion","choices":[],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`))
	}))
	t.Cleanup(target.Close)
	for _, status := range []int{http.StatusFound, http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, target.URL+r.URL.Path, status)
		}))
		t.Cleanup(redirector.Close)
		gw := startGateway(t, `listen: 127.0.0.1:0
providers:
  - {name: up, type: openai-compatible, base_url: `+redirector.URL+`/v1, api_key: `+upstreamKey+`}
keys:
  - {key: `+clientKey+`, project: qa}
models:
  - name: chat
    targets: [{provider: up, model: gpt-4o-mini}]
`)
		for _, path := range []string{"/v1/chat/completions", "/v1/messages"} {
			resp, body := post(t, gw.URL+path, "application/json", `{"model":"chat","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`,
				map[string]string{"Anthropic-Version": "2023-06-01"})
			if resp.StatusCode != http.StatusBadGateway {
				t.Errorf("%d on %s: got %d, want 502: %s", status, path, resp.StatusCode, body)
				continue
			}
			dialectError(t, path == "/v1/messages", body)
		}
	}
	if n := elsewhere.Load(); n != 0 {
		t.Errorf("the redirect was followed %d times", n)
	}
}

func TestUpstreamResponseSizeIsBounded(t *testing.T) {
	up := startUpstream(t, mockllm.Options{Reply: strings.Repeat("long answer ", 400)}) // about 5 KiB of text
	gw := startGateway(t, `listen: 127.0.0.1:0
providers:
  - {name: up, type: openai-compatible, base_url: `+up.URL+`/v1, api_key: `+upstreamKey+`, max_response_bytes: 4KiB}
  - {name: roomy, type: openai-compatible, base_url: `+up.URL+`/v1, api_key: `+upstreamKey+`}
keys:
  - {key: `+clientKey+`, project: qa}
models:
  - name: chat
    targets: [{provider: up, model: gpt-4o-mini}]
  - name: roomy
    targets: [{provider: roomy, model: gpt-4o-mini}]
`)
	for _, path := range []string{"/v1/chat/completions", "/v1/messages", "/v1/responses"} {
		body := `{"model":"chat","max_tokens":4000,"messages":[{"role":"user","content":"hi"}]}`
		if path == "/v1/responses" {
			body = `{"model":"chat","input":"hi"}`
		}
		resp, got := post(t, gw.URL+path, "application/json", body, map[string]string{"Anthropic-Version": "2023-06-01"})
		if resp.StatusCode != http.StatusBadGateway {
			t.Errorf("%s: got %d, want 502: %.300s", path, resp.StatusCode, got)
			continue
		}
		if path != "/v1/messages" && dialectError(t, false, got) != "upstream_response_too_large" {
			t.Errorf("%s: %s", path, got)
		} else if path == "/v1/messages" {
			dialectError(t, true, got)
		}
	}
	// The same answer within the default bound, and streamed with the
	// small one: streams are relayed as they come.
	if resp, got := post(t, gw.URL+"/v1/chat/completions", "application/json", `{"model":"roomy","messages":[{"role":"user","content":"hi"}]}`, nil); resp.StatusCode != 200 {
		t.Errorf("within the default bound: %d %.300s", resp.StatusCode, got)
	}
	if resp, got := post(t, gw.URL+"/v1/chat/completions", "application/json", `{"model":"chat","stream":true,"messages":[{"role":"user","content":"hi"}]}`, nil); resp.StatusCode != 200 || !strings.Contains(got, "[DONE]") {
		t.Errorf("streamed: %d %.300s", resp.StatusCode, got)
	}
}
