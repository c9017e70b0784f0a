package main

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"gatehouse/internal/mockllm"
)

// trap is a loopback listener nobody should ever connect to: an image
// URL pointing at it shows whether the gateway fetches what a client
// names.
type trap struct {
	ln    net.Listener
	conns atomic.Int32
}

func startTrap(t *testing.T) *trap {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tr := &trap{ln: ln}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			tr.conns.Add(1)
			c.Close()
		}
	}()
	t.Cleanup(func() { ln.Close() })
	return tr
}

func (tr *trap) url(name string) string {
	return "http://" + tr.ln.Addr().String() + "/" + name + ".png"
}

// TestImageURLsAreNeverFetched sends an image by URL to a model of each
// provider type. Types whose API takes image URLs get the URL passed on
// as it is; the others refuse the request with 400 in the caller's
// dialect. Either way the gateway itself never opens a connection to the
// URL (it would otherwise be a server-side request forgery tool).
func TestImageURLsAreNeverFetched(t *testing.T) {
	tr := startTrap(t)
	up := startUpstream(t, mockllm.Options{})
	t.Setenv("AWS_ACCESS_KEY_ID", awsKeyID)
	t.Setenv("AWS_SECRET_ACCESS_KEY", awsSecret)
	t.Setenv("AWS_SESSION_TOKEN", "")
	t.Setenv("AWS_BEARER_TOKEN_BEDROCK", "")
	gw := startGateway(t, `listen: 127.0.0.1:0
providers:
  - {name: openai, type: openai, base_url: `+up.URL+`/v1, api_key: `+upstreamKey+`}
  - {name: compat, type: openai-compatible, base_url: `+up.URL+`/v1, api_key: `+upstreamKey+`}
  - {name: azure, type: azure, base_url: `+up.URL+`/openai/v1, api_key: `+upstreamKey+`}
  - {name: anthropic, type: anthropic, base_url: `+up.URL+`, api_key: `+upstreamKey+`}
  - {name: gemini, type: gemini, base_url: `+up.URL+`/v1beta, api_key: `+upstreamKey+`}
  - {name: ollama, type: ollama, base_url: `+up.URL+`, api_key: `+upstreamKey+`, discover: false}
  - {name: bedrock, type: bedrock, base_url: `+up.URL+`, region: us-west-2}
keys:
  - {key: `+clientKey+`, name: tester, project: qa}
models:
  - {name: m-openai, targets: [{provider: openai, model: gpt-4o}]}
  - {name: m-openai-compatible, targets: [{provider: compat, model: gpt-4o}]}
  - {name: m-azure, targets: [{provider: azure, model: prod-4o}]}
  - {name: m-anthropic, targets: [{provider: anthropic, model: claude-sonnet-4-5}]}
  - {name: m-gemini, targets: [{provider: gemini, model: gemini-2.5-flash}]}
  - {name: m-ollama, targets: [{provider: ollama, model: llava}]}
  - {name: m-bedrock, targets: [{provider: bedrock, model: `+bedrockClaude+`}]}
`)
	post := func(path, body string, hdr ...string) (int, []byte) {
		req, _ := http.NewRequest("POST", gw.URL+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	upstreamGot := func(url string) bool {
		for _, r := range up.mock.Requests() {
			if bytes.Contains(r.Body, []byte(url)) {
				return true
			}
		}
		return false
	}
	tests := []struct {
		typ    string
		passes bool // the provider's API takes image URLs
	}{
		{"openai", true}, {"openai-compatible", true}, {"azure", true}, {"anthropic", true}, {"gemini", true},
		{"ollama", false}, {"bedrock", false},
	}
	for _, tt := range tests {
		t.Run(tt.typ, func(t *testing.T) {
			// OpenAI's dialect.
			url := tr.url(tt.typ + "-chat")
			status, body := post("/v1/chat/completions", fmt.Sprintf(
				`{"model":"m-%s","max_tokens":20,"messages":[{"role":"user","content":[{"type":"text","text":"what is this?"},{"type":"image_url","image_url":{"url":%q}}]}]}`,
				tt.typ, url), "Authorization", "Bearer "+clientKey)
			checkImageAnswer(t, tt.passes, status, body, upstreamGot(url), `"error":{`, `"param":"messages[0].content[1].image_url.url"`)

			// Anthropic's dialect.
			url = tr.url(tt.typ + "-messages")
			status, body = post("/v1/messages", fmt.Sprintf(
				`{"model":"m-%s","max_tokens":20,"messages":[{"role":"user","content":[{"type":"text","text":"what is this?"},{"type":"image","source":{"type":"url","url":%q}}]}]}`,
				tt.typ, url), "x-api-key", clientKey, "anthropic-version", "2023-06-01")
			checkImageAnswer(t, tt.passes, status, body, upstreamGot(url), `"type":"error"`, `"invalid_request_error"`)
		})
	}
	// Every answer above has been read in full, so any fetch the gateway
	// made on the way has already connected.
	if n := tr.conns.Load(); n != 0 {
		t.Fatalf("the gateway opened %d connections to client-supplied image URLs", n)
	}
}

func checkImageAnswer(t *testing.T, passes bool, status int, body []byte, forwarded bool, shape, detail string) {
	t.Helper()
	if passes {
		if status != 200 || !forwarded {
			t.Errorf("status %d, URL forwarded upstream %t; want 200 with the URL passed on: %s", status, forwarded, body)
		}
		return
	}
	if status != 400 || forwarded || !bytes.Contains(body, []byte(shape)) || !bytes.Contains(body, []byte(detail)) {
		t.Errorf("status %d, forwarded %t, body %s; want a 400 in the caller's dialect (%s, %s) and nothing sent upstream", status, forwarded, body, shape, detail)
	}
}
