package mockllm

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"
)

// Overrides come from Options, then the directive, then headers.
func TestOverridePrecedence(t *testing.T) {
	tests := []struct {
		name      string
		opts      Options
		directive string
		hdr       map[string]string
		status    int
	}{
		{"options", Options{ErrorStatus: 500}, "", nil, 500},
		{"directive over options", Options{ErrorStatus: 500}, "@mock(error_status=429)", nil, 429},
		{"header over directive", Options{ErrorStatus: 500}, "@mock(error_status=429)", map[string]string{"X-Mock-Error-Status": "503"}, 503},
		{"header switches errors off", Options{ErrorStatus: 500}, "", map[string]string{"X-Mock-Error-Status": "0"}, 200},
		{"directive switches errors off", Options{ErrorStatus: 500}, "@mock(error_status=0)", nil, 200},
		{"only the last user message counts", Options{}, "", nil, 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, ts := start(t, tt.opts)
			body := chatJSON("m", "hello "+tt.directive, false, false)
			if tt.name == "only the last user message counts" {
				body = `{"model":"m","messages":[{"role":"user","content":"@mock(error_status=500)"},{"role":"assistant","content":"ok"},{"role":"user","content":"again"}]}`
			}
			resp, b := do(t, ts, "POST", "/v1/chat/completions", body, tt.hdr)
			if resp.StatusCode != tt.status {
				t.Errorf("status %d, want %d: %s", resp.StatusCode, tt.status, b)
			}
			if tt.status == 200 && strings.Contains(string(b), "@mock") {
				t.Errorf("the directive is echoed in the reply: %s", b)
			}
		})
	}
}

func TestInjectedErrors(t *testing.T) {
	_, ts := start(t, Options{})
	tests := []struct {
		name, directive string
		hdr             map[string]string
		stream          bool
		status          int
		typ, code       string
		retryAfter      string
	}{
		{"429 directive", "@mock(error_status=429, retry_after=2)", nil, false, 429, "requests", "rate_limit_exceeded", "2"},
		{"429 header, stream", "", map[string]string{"X-Mock-Error-Status": "429", "X-Mock-Retry-After": "7"}, true, 429, "requests", "rate_limit_exceeded", "7"},
		{"500", "@mock(error_status=500)", nil, true, 500, "server_error", "<null>", ""},
		{"503 with retry", "@mock(error_status=503,retry_after=1)", nil, false, 503, "server_error", "<null>", "1"},
		{"400", "@mock(error_status=400)", nil, false, 400, "invalid_request_error", "<null>", ""},
		{"404", "@mock(error_status=404)", nil, false, 404, "invalid_request_error", "model_not_found", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, b := do(t, ts, "POST", "/v1/chat/completions", chatJSON("gpt-4o", "hi "+tt.directive, tt.stream, false), tt.hdr)
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tt.status, b)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q: errors are JSON even for stream requests", ct)
			}
			e := decodeError(t, b)
			if e.Error.Type != tt.typ || deref(e.Error.Code) != tt.code {
				t.Errorf("type %q code %q, want %q %q", e.Error.Type, deref(e.Error.Code), tt.typ, tt.code)
			}
			if got := resp.Header.Get("Retry-After"); got != tt.retryAfter {
				t.Errorf("Retry-After %q, want %q", got, tt.retryAfter)
			}
		})
	}
}

func TestErrorRateIsExact(t *testing.T) {
	s, ts := start(t, Options{ErrorStatus: 500, ErrorRate: 0.25, RetryAfter: "3"})
	failed := 0
	for range 40 {
		resp, _ := do(t, ts, "POST", "/v1/chat/completions", chatJSON("m", "hi", false, false), nil)
		switch resp.StatusCode {
		case 500:
			failed++
			if resp.Header.Get("Retry-After") != "3" {
				t.Errorf("Retry-After %q, want Options.RetryAfter", resp.Header.Get("Retry-After"))
			}
		case 200:
		default:
			t.Fatalf("status %d", resp.StatusCode)
		}
	}
	if failed != 10 {
		t.Errorf("%d of 40 requests failed, want exactly 10 at rate 0.25", failed)
	}
	if st := s.Stats(); st.Errors != 10 || st.Completed != 30 {
		t.Errorf("stats %+v", st)
	}
}

func TestTiming(t *testing.T) {
	tests := []struct {
		name      string
		directive string
		hdr       map[string]string
		stream    bool
		min       time.Duration
	}{
		{"ttft header", "", map[string]string{"X-Mock-TTFT": "150ms"}, true, 150 * time.Millisecond},
		{"ttft directive", "@mock(ttft=150ms)", nil, true, 150 * time.Millisecond},
		{"latency directive", "@mock(latency=150)", nil, false, 150 * time.Millisecond},
		{"latency header", "", map[string]string{"X-Mock-Latency": "150ms"}, false, 150 * time.Millisecond},
		{"latency delays errors", "@mock(latency=150ms, error_status=502)", nil, false, 150 * time.Millisecond},
		// 10 tokens in 8 chunks at 50 tokens/s: the 9 after the first chunk take 180ms.
		{"tps", "@mock(tps=50)", nil, true, 180 * time.Millisecond},
		{"ttft does not delay plain", "@mock(ttft=1s)", nil, false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			// Each request's waits are recorded, not waited: the test
			// checks what the server would wait, on no clock.
			s, ts := start(t, Options{})
			var mu sync.Mutex
			var waited time.Duration
			s.pause = func(ctx context.Context, d time.Duration) bool {
				mu.Lock()
				waited += d
				mu.Unlock()
				return ctx.Err() == nil
			}
			resp, err := ts.Client().Do(newRequest(t, context.Background(), "POST", ts.URL+"/v1/chat/completions",
				chatJSON("m", "go "+tt.directive, tt.stream, false), tt.hdr))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			_, _ = io.Copy(io.Discard, resp.Body)
			mu.Lock()
			defer mu.Unlock()
			if diff := waited - tt.min; diff < -time.Millisecond || diff > time.Millisecond {
				t.Errorf("waited %v, want %v", waited, tt.min)
			}
		})
	}
}

func TestHangIsCancelled(t *testing.T) {
	for _, how := range []string{"header", "directive"} {
		t.Run(how, func(t *testing.T) {
			s, ts := start(t, Options{})
			ctx, cancel := context.WithCancel(context.Background())
			hdr, user := map[string]string{"X-Mock-Hang": "true"}, "wait"
			if how == "directive" {
				hdr, user = nil, "wait @mock(hang=true)"
			}
			errc := make(chan error, 1)
			go func() {
				resp, err := ts.Client().Do(newRequest(t, ctx, "POST", ts.URL+"/v1/chat/completions", chatJSON("gpt-hang", user, true, false), hdr))
				if err == nil {
					resp.Body.Close()
				}
				errc <- err
			}()
			for s.Stats().InFlight != 1 {
				select {
				case err := <-errc:
					t.Fatalf("the request ended instead of hanging: %v", err)
				case <-time.After(time.Millisecond):
				}
			}
			if st := s.Stats(); st.Completed != 0 {
				t.Fatalf("while hanging: %+v", st)
			}
			cancel()
			at := time.Now()
			c := waitCancellation(t, s)
			if c.Path != "/v1/chat/completions" || c.Model != "gpt-hang" || c.Received.After(at) {
				t.Errorf("cancellation %+v", c)
			}
			if err := <-errc; !errors.Is(err, context.Canceled) {
				t.Errorf("client error %v, want context.Canceled", err)
			}
			if st := s.Stats(); st.Cancelled != 1 || st.InFlight != 0 {
				t.Errorf("stats %+v", st)
			}
		})
	}
}

func TestStallAfter(t *testing.T) {
	s, ts := start(t, Options{Chunks: 5})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	resp, err := ts.Client().Do(newRequest(t, ctx, "POST", ts.URL+"/v1/chat/completions",
		chatJSON("m", "x @mock(stall_after=2)", true, true), nil))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	ch, errc := make(chan string, 16), make(chan error, 1)
	go readEvents(resp.Body, ch, errc)
	for i := range 3 { // role chunk and two content chunks
		select {
		case ev := <-ch:
			if i > 0 && !strings.Contains(ev, `"delta":{"content":`) {
				t.Errorf("event %d is not a content chunk: %s", i, ev)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("only %d events before the stall", i)
		}
	}
	// Unpaced, a stream that did not stall would have written its next
	// chunk already; hang up, and no event may follow the two chunks.
	cancel()
	waitCancellation(t, s)
	if err := <-errc; err == nil {
		t.Error("a stalled stream ended cleanly")
	}
	for ev := range ch {
		t.Errorf("stream went on after stall_after=2: %q", ev)
	}
}

func TestFailAfter(t *testing.T) {
	s, ts := start(t, Options{Chunks: 5})
	tests := []struct {
		name, directive string
		hdr             map[string]string
		stream          bool
		contentChunks   int
	}{
		{"stream directive", "@mock(fail_after=2)", nil, true, 2},
		{"stream header", "", map[string]string{"X-Mock-Fail-After": "0"}, true, 0},
		{"past the end", "@mock(fail_after=99)", nil, true, 5},
		{"non-stream", "@mock(fail_after=1)", nil, false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s.Reset()
			resp, err := ts.Client().Do(newRequest(t, context.Background(), "POST", ts.URL+"/v1/chat/completions",
				chatJSON("m", "x "+tt.directive, tt.stream, false), tt.hdr))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			if !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Fatalf("read error %v, want an abrupt EOF; got %q", err, b)
			}
			if tt.stream && (strings.Contains(string(b), "[DONE]") || strings.Contains(string(b), `"finish_reason":"stop"`)) {
				t.Errorf("the stream finished before the cut: %s", b)
			}
			if !tt.stream && (len(b) == 0 || json.Valid(b)) {
				t.Errorf("want a truncated body before the cut: %s", b)
			}
			if got := strings.Count(string(b), `"delta":{"content":`); got != tt.contentChunks {
				t.Errorf("%d content chunks before the cut, want %d", got, tt.contentChunks)
			}
			if st := s.Stats(); st.Errors != 1 || st.Completed != 0 {
				t.Errorf("stats %+v, want the abort counted as an error", st)
			}
		})
	}
}

// A client that goes away between paced chunks stops the handler at once.
func TestCancelMidStream(t *testing.T) {
	s, ts := start(t, Options{TokensPerSecond: 5})
	ctx, cancel := context.WithCancel(context.Background())
	resp, err := ts.Client().Do(newRequest(t, ctx, "POST", ts.URL+"/v1/chat/completions", chatJSON("m", "x", true, false), nil))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	buf := make([]byte, 64)
	if _, err := resp.Body.Read(buf); err != nil {
		t.Fatal(err)
	}
	cancel()
	waitCancellation(t, s)
	if st := s.Stats(); st.Cancelled != 1 || st.Completed != 0 {
		t.Errorf("stats %+v", st)
	}
}
