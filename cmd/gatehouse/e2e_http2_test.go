package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"gatehouse/internal/mockllm"
)

// HTTP/2 end to end, in cleartext (h2c, prior knowledge) and over TLS
// (ALPN): the same answers, headers, stream events and trailers as over
// HTTP/1.1, in both dialects, and many streams multiplexed on one
// connection.

const h2Key = "gh-h2-client-key"

func h2Config(up *upstream, extra string) string {
	return `listen: 127.0.0.1:0
providers:
` + upProvider(up) + `keys:
  - {key: ` + h2Key + `, project: qa, rpm: 100000, tpm: 100000000}
models:
  - name: chat
    targets: [{provider: up, model: gpt-4o-mini}]
` + extra
}

// h2cClient speaks HTTP/2 without TLS only: it fails against a server
// that does not.
func h2cClient() *http.Client {
	p := new(http.Protocols)
	p.SetUnencryptedHTTP2(true)
	return &http.Client{Transport: &http.Transport{Protocols: p}}
}

// tlsGateway serves cfg over TLS with a throwaway certificate, offering
// h2 and http/1.1; the client trusts it and speaks HTTP/2 only.
func tlsGateway(t *testing.T, cfg string) (*testGateway, *http.Client) {
	t.Helper()
	certSrv := httptest.NewUnstartedServer(nil) // only for its certificate and a client that trusts it
	certSrv.EnableHTTP2 = true
	certSrv.StartTLS()
	cert := certSrv.TLS.Certificates[0]
	roots := certSrv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
	certSrv.Close()

	dir := t.TempDir()
	path := filepath.Join(dir, "gatehouse.yaml")
	if err := os.WriteFile(path, []byte(withTestStorage(cfg, dir)), 0o600); err != nil {
		t.Fatal(err)
	}
	gw, _ := launchGatewayOn(t, path, false, func(ln net.Listener) net.Listener {
		return tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"h2", "http/1.1"}})
	})
	p := new(http.Protocols)
	p.SetHTTP2(true)
	return gw, &http.Client{Transport: &http.Transport{Protocols: p, TLSClientConfig: &tls.Config{RootCAs: roots}}}
}

func TestHTTP2CleartextAndTLS(t *testing.T) {
	up := startUpstream(t, mockllm.Options{})
	cases := []struct {
		name  string
		start func(t *testing.T) (*testGateway, *http.Client)
	}{
		{"h2c", func(t *testing.T) (*testGateway, *http.Client) {
			return startGateway(t, h2Config(up, "")), h2cClient()
		}},
		{"tls", func(t *testing.T) (*testGateway, *http.Client) { return tlsGateway(t, h2Config(up, "")) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			gw, hc := c.start(t)
			client := openai.NewClient(option.WithBaseURL(gw.URL+"/v1/"), option.WithAPIKey(h2Key),
				option.WithMaxRetries(0), option.WithHTTPClient(hc))
			ctx := context.Background()

			// A completion through the SDK, with the gateway's headers.
			var resp *http.Response
			p := userMessage("Say hello over HTTP/2.")
			p.Model = "chat"
			got, err := client.Chat.Completions.New(ctx, p, option.WithResponseInto(&resp))
			if err != nil {
				t.Fatal(err)
			}
			if resp.ProtoMajor != 2 || len(got.Choices) != 1 || got.Choices[0].Message.Content == "" {
				t.Fatalf("%s: %+v", resp.Proto, got)
			}
			for _, h := range []string{"X-Ratelimit-Limit-Requests", "X-Ratelimit-Remaining-Tokens", "X-Gatehouse-Cost-Usd", "X-Gatehouse-Request-Id", "X-Gatehouse-Provider"} {
				if resp.Header.Get(h) == "" {
					t.Errorf("no %s header over %s", h, resp.Proto)
				}
			}

			// Streams, many at once on the connection(s) the client keeps:
			// every event, the [DONE] and the cost trailer arrive.
			var wg sync.WaitGroup
			errs := make(chan string, 20)
			for range 20 {
				wg.Go(func() {
					if msg := h2Stream(gw, hc); msg != "" {
						errs <- msg
					}
				})
			}
			wg.Wait()
			close(errs)
			for msg := range errs {
				t.Error(msg)
			}

			// The Anthropic dialect, and its errors in its own shape.
			status, body := h2Post(t, hc, gw.URL+"/v1/messages", map[string]string{"x-api-key": h2Key, "anthropic-version": "2023-06-01"},
				`{"model":"chat","max_tokens":50,"messages":[{"role":"user","content":"Hello"}]}`)
			if status != 200 || !strings.Contains(body, `"type":"message"`) {
				t.Errorf("messages over HTTP/2: %d %s", status, body)
			}
			status, body = h2Post(t, hc, gw.URL+"/v1/messages", map[string]string{"x-api-key": h2Key, "anthropic-version": "2023-06-01"}, `{"model":`)
			if status != 400 || !strings.HasPrefix(body, `{"type":"error","error":{"type":"invalid_request_error"`) {
				t.Errorf("bad messages body over HTTP/2: %d %s", status, body)
			}
			status, body = h2Post(t, hc, gw.URL+"/v1/chat/completions", map[string]string{"Authorization": "Bearer " + h2Key}, `{"model":`)
			if status != 400 || !strings.HasPrefix(body, `{"error":{`) {
				t.Errorf("bad chat body over HTTP/2: %d %s", status, body)
			}
		})
	}
}

// h2Stream sends one streamed chat completion and says what was wrong
// with it ("" when nothing).
func h2Stream(gw *testGateway, hc *http.Client) string {
	req, _ := http.NewRequest(http.MethodPost, gw.URL+"/v1/chat/completions",
		strings.NewReader(`{"model":"chat","stream":true,"messages":[{"role":"user","content":"Stream over HTTP/2."}]}`))
	req.Header.Set("Authorization", "Bearer "+h2Key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	if resp.ProtoMajor != 2 || resp.StatusCode != 200 {
		return "stream: " + resp.Proto + " " + resp.Status
	}
	events, done := 0, false
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		switch {
		case !ok:
		case line == "[DONE]":
			done = true
		default:
			var chunk struct{ Object string }
			if err := json.Unmarshal([]byte(line), &chunk); err != nil || chunk.Object != "chat.completion.chunk" {
				return "stream event: " + line
			}
			events++
		}
	}
	if err := sc.Err(); err != nil {
		return "stream: " + err.Error()
	}
	if !done || events < 2 {
		return fmt.Sprintf("stream ended after %d events, [DONE] %v", events, done)
	}
	if resp.Trailer.Get("X-Gatehouse-Cost-Usd") == "" {
		return "stream: no cost trailer"
	}
	return ""
}

func h2Post(t *testing.T, hc *http.Client, url string, headers map[string]string, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.ProtoMajor != 2 {
		t.Errorf("%s answered over %s", url, resp.Proto)
	}
	return resp.StatusCode, string(b)
}

// With server.h2c off, a cleartext HTTP/2 client is refused and HTTP/1.1
// is served as ever.
func TestH2COff(t *testing.T) {
	up := startUpstream(t, mockllm.Options{})
	gw := startGateway(t, h2Config(up, "server: {h2c: false}\n"))
	body := `{"model":"chat","messages":[{"role":"user","content":"hi"}]}`
	req, _ := http.NewRequest(http.MethodPost, gw.URL+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+h2Key)
	if resp, err := h2cClient().Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("h2c off, yet a cleartext HTTP/2 request was answered: %s %s", resp.Proto, resp.Status)
	}
	req, _ = http.NewRequest(http.MethodPost, gw.URL+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+h2Key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.ProtoMajor != 1 {
		t.Fatalf("HTTP/1.1 with h2c off: %s %s", resp.Proto, resp.Status)
	}
}
