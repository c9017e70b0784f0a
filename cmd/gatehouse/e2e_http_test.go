package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"gatehouse/internal/mockllm"
)

// post sends a raw request to the gateway and decodes its OpenAI error, if any.
func post(t *testing.T, url, contentType, body string, header map[string]string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("Authorization", "Bearer "+clientKey)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

type openAIError struct {
	Error struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	} `json:"error"`
}

func TestBadInputGetsOpenAIErrors(t *testing.T) {
	up := startUpstream(t, mockllm.Options{})
	gw := startGateway(t, baseConfig(up, "server: {max_body_bytes: 4096}\n"))
	chat := gw.URL + "/v1/chat/completions"
	big := `{"model":"chat","messages":[{"role":"user","content":"` + strings.Repeat("x", 5000) + `"}]}`
	cases := []struct {
		name, url, ctype, body string
		status                 int
		code, mention          string
	}{
		{"malformed json", chat, "application/json", `{"model":"chat",`, 400, "invalid_json", "JSON"},
		{"not an object", chat, "application/json", `[1,2]`, 400, "invalid_json", "object"},
		{"model wrong type", chat, "application/json", `{"model":5,"messages":[{"role":"user","content":"x"}]}`, 400, "invalid_type", "'model'"},
		{"messages wrong type", chat, "application/json", `{"model":"chat","messages":"hi"}`, 400, "invalid_type", "'messages'"},
		{"stream wrong type", chat, "application/json", `{"model":"chat","stream":"yes","messages":[{"role":"user","content":"x"}]}`, 400, "invalid_type", "'stream'"},
		{"max_tokens negative", chat, "application/json", `{"model":"chat","max_tokens":-1,"messages":[{"role":"user","content":"x"}]}`, 400, "invalid_value", "max_tokens"},
		{"missing model", chat, "application/json", `{"messages":[{"role":"user","content":"x"}]}`, 400, "missing_required_parameter", "'model'"},
		{"missing messages", chat, "application/json", `{"model":"chat"}`, 400, "missing_required_parameter", "'messages'"},
		{"empty messages", chat, "application/json", `{"model":"chat","messages":[]}`, 400, "empty_array", "messages"},
		{"unknown model", chat, "application/json", `{"model":"gpt-9","messages":[{"role":"user","content":"x"}]}`, 404, "model_not_found", "gpt-9"},
		{"body too large", chat, "application/json", big, 413, "request_too_large", "4096"},
		{"unsupported media type", chat, "text/plain", `{"model":"chat","messages":[{"role":"user","content":"x"}]}`, 415, "unsupported_media_type", "application/json"},
		{"embeddings missing input", gw.URL + "/v1/embeddings", "application/json", `{"model":"embed"}`, 400, "missing_required_parameter", "'input'"},
		{"unknown route", gw.URL + "/v1/nothing", "application/json", `{}`, 404, "unknown_url", "/v1/nothing"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp, body := post(t, c.url, c.ctype, c.body, nil)
			if resp.StatusCode != c.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, c.status, body)
			}
			var e openAIError
			if err := json.Unmarshal([]byte(body), &e); err != nil || e.Error.Message == "" || e.Error.Type == "" {
				t.Fatalf("not an OpenAI error body: %s", body)
			}
			if e.Error.Code == nil || *e.Error.Code != c.code {
				t.Fatalf("code %v, want %s: %s", e.Error.Code, c.code, body)
			}
			if !strings.Contains(e.Error.Message, c.mention) {
				t.Fatalf("message %q does not mention %q", e.Error.Message, c.mention)
			}
			if resp.Header.Get("X-Gatehouse-Request-Id") == "" {
				t.Fatal("no request id on an error response")
			}
		})
	}
	// No bad input reached the upstream.
	if n := up.mock.Stats().Requests; n != 0 {
		t.Fatalf("%d bad requests were sent upstream", n)
	}
	// Wrong method answers in the same dialect.
	resp, err := http.Get(chat)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("GET chat: %d", resp.StatusCode)
	}
}

func TestClientDisconnectCancelsUpstream(t *testing.T) {
	up := startUpstream(t, mockllm.Options{})
	gw := startGateway(t, baseConfig(up, ""))
	for _, stream := range []bool{false, true} {
		// The upstream hangs until its request is cancelled: seeing the
		// cancellation at all proves the hang-up was passed on. How soon
		// is BenchmarkClientDisconnectLag's question, not a test's.
		if _, err := disconnectAndWait(t, gw, up, stream, 30*time.Second); err != nil {
			t.Fatalf("stream=%v: %v", stream, err)
		}
	}
}

// disconnectAndWait sends a request the upstream holds forever, hangs up
// once the upstream has it, and waits for the upstream to see its request
// cancelled: it returns how long after the hang-up that was.
func disconnectAndWait(tb testing.TB, gw *testGateway, up *upstream, stream bool, limit time.Duration) (time.Duration, error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	body := `{"model":"chat","stream":` + map[bool]string{false: "false", true: "true"}[stream] +
		`,"messages":[{"role":"user","content":"wait @mock(hang=true)"}]}`
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, gw.URL+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+clientKey)
	errc := make(chan error, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	for up.mock.Stats().InFlight != 1 {
		select {
		case err := <-errc:
			return 0, fmt.Errorf("the request ended before the upstream held it: %v", err)
		case <-time.After(time.Millisecond):
		}
	}
	cancelled := time.Now()
	cancel()
	defer func() { <-errc }()
	select {
	case c := <-up.mock.Cancelled():
		return c.Observed.Sub(cancelled), nil
	case <-time.After(limit):
		return 0, fmt.Errorf("the upstream request was not cancelled within %v of the hang-up", limit)
	}
}

// BenchmarkClientDisconnectLag measures how soon an upstream sees its
// request cancelled after the client hangs up (reported as lag-µs).
//
//	go test -run '^$' -bench BenchmarkClientDisconnectLag -benchtime 200x ./cmd/gatehouse/
func BenchmarkClientDisconnectLag(b *testing.B) {
	up := startUpstream(b, mockllm.Options{})
	gw := startGateway(b, baseConfig(up, ""))
	for _, stream := range []bool{false, true} {
		b.Run(map[bool]string{false: "whole", true: "stream"}[stream], func(b *testing.B) {
			var total time.Duration
			for range b.N {
				lag, err := disconnectAndWait(b, gw, up, stream, 30*time.Second)
				if err != nil {
					b.Fatal(err)
				}
				total += lag
			}
			b.ReportMetric(float64(total.Microseconds())/float64(b.N), "lag-µs")
		})
	}
}

func TestTimeouts(t *testing.T) {
	up := startUpstream(t, mockllm.Options{})
	gw := startGateway(t, baseConfig(up, `  - name: impatient
    targets: [{provider: up, model: gpt-4o-mini}]
    timeouts: {first_byte: 150ms, idle: 150ms}
`))
	// Before the first byte: a 504 with a message naming the timeout (the
	// upstream would hang forever, so the answer itself proves it fired).
	resp, body := post(t, gw.URL+"/v1/chat/completions", "application/json",
		`{"model":"impatient","messages":[{"role":"user","content":"x @mock(hang=true)"}]}`, nil)
	if resp.StatusCode != http.StatusGatewayTimeout || !strings.Contains(body, "150ms") {
		t.Fatalf("status %d body %s", resp.StatusCode, body)
	}

	// After the first byte: the stream ends with an error event, never hangs.
	req, _ := http.NewRequest(http.MethodPost, gw.URL+"/v1/chat/completions", strings.NewReader(
		`{"model":"impatient","stream":true,"messages":[{"role":"user","content":"x @mock(stall_after=2)"}]}`))
	req.Header.Set("Authorization", "Bearer "+clientKey)
	sresp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer sresp.Body.Close()
	done := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(sresp.Body)
		done <- string(b)
	}()
	select {
	case b := <-done:
		events := strings.Count(b, "data: ")
		if !strings.Contains(b, `"code":"upstream_timeout"`) || strings.Contains(b, "[DONE]") || events < 3 {
			t.Fatalf("stalled stream ended with:\n%s", b)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("stalled stream was not ended by the idle timeout")
	}
}

func TestStreamIsRelayedEventByEvent(t *testing.T) {
	up := startUpstream(t, mockllm.Options{})
	gw := startGateway(t, baseConfig(up, ""))
	// 4 chunks at 10 tokens/s: if the gateway buffered, the first event
	// would arrive with the last, ~1 s after the request.
	req, _ := http.NewRequest(http.MethodPost, gw.URL+"/v1/chat/completions", strings.NewReader(
		`{"model":"chat","stream":true,"messages":[{"role":"user","content":"slowly @mock(chunks=4, tps=10)"}]}`))
	req.Header.Set("Authorization", "Bearer "+clientKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	var arrivals []time.Time
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			break
		}
		if strings.HasPrefix(line, "data: ") {
			arrivals = append(arrivals, time.Now())
		}
	}
	if len(arrivals) < 5 {
		t.Fatalf("only %d events", len(arrivals))
	}
	if spread := arrivals[len(arrivals)-1].Sub(arrivals[0]); spread < 300*time.Millisecond {
		t.Fatalf("events arrived together (spread %v): the stream was buffered", spread)
	}
}

func TestConfigReload(t *testing.T) {
	defer func() {
		if t.Failed() {
			t.Log(t.Name())
		}
	}()
	up := startUpstream(t, mockllm.Options{})
	cfg := baseConfig(up, "")
	gw := startGateway(t, cfg)
	models := func() string {
		req, _ := http.NewRequest(http.MethodGet, gw.URL+"/v1/models", nil)
		req.Header.Set("Authorization", "Bearer "+clientKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	// A valid change is picked up from the file alone (replace by rename,
	// as editors and Kubernetes do).
	next := cfg + "  - name: added-later\n    targets: [{provider: up, model: gpt-4o}]\n"
	replaceFile(t, gw.Path, next)
	waitFor(t, 30*time.Second, "the new model to appear", func() bool {
		return strings.Contains(models(), "added-later") || strings.Contains(gw.Logs.String(), "rejected")
	})
	if strings.Contains(gw.Logs.String(), "rejected") {
		t.Fatalf("valid reload rejected: %s", gw.Logs.String())
	}
	t.Log(gw.Logs.String())

	// An invalid change is rejected with a log line; the running config stays.
	replaceFile(t, gw.Path, next+"bogus_field: 1\n")
	waitFor(t, 30*time.Second, "the rejection log line", func() bool {
		return strings.Contains(gw.Logs.String(), "config reload rejected") && strings.Contains(gw.Logs.String(), "bogus_field")
	})
	if !strings.Contains(models(), "added-later") {
		t.Fatal("an invalid config replaced the running one")
	}
}

func replaceFile(t *testing.T, path, content string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}
