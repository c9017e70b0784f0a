package mockllm

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestJitterFactor(t *testing.T) {
	if got := jitterFactor(1, []byte("x"), 0); got != 1 {
		t.Fatalf("no jitter: factor %v, want 1", got)
	}
	const n, j = 20000, 0.2
	sum, lo, hi := 0.0, math.Inf(1), math.Inf(-1)
	for i := range n {
		body := []byte(`{"prompt":` + strconv.Itoa(i) + `}`)
		f := jitterFactor(7, body, j)
		if f != jitterFactor(7, body, j) {
			t.Fatal("same seed and body, different factor")
		}
		sum += f
		lo, hi = min(lo, f), max(hi, f)
	}
	if lo < 1-j || hi > 1+j {
		t.Fatalf("factors in [%v, %v], want within [%v, %v]", lo, hi, 1-j, 1+j)
	}
	// A uniform draw: the whole range is used and the mean is 1.
	if lo > 1-0.95*j || hi < 1+0.95*j || math.Abs(sum/n-1) > 0.005 {
		t.Fatalf("factors in [%v, %v] with mean %v: not uniform over ±%v", lo, hi, sum/n, j)
	}
	same := 0
	for i := range 1000 {
		body := []byte(strconv.Itoa(i))
		if jitterFactor(1, body, j) == jitterFactor(2, body, j) {
			same++
		}
	}
	if same > 0 {
		t.Fatalf("%d of 1000 bodies got the same factor under two seeds", same)
	}
}

func TestSlowdownAndStep(t *testing.T) {
	for _, tc := range []struct {
		inFlight int64
		capacity int
		want     float64
	}{
		{0, 4096, 1}, {4096, 4096, 2}, {1024, 4096, 1.25}, {-5, 100, 1}, {300, 100, 4},
	} {
		if got := slowdown(tc.inFlight, tc.capacity); got != tc.want {
			t.Errorf("slowdown(%d, %d) = %v, want %v", tc.inFlight, tc.capacity, got, tc.want)
		}
	}
	if got := loadStep(4*time.Millisecond, 2); got != 8*time.Millisecond {
		t.Errorf("short work: step %v, want all of it at half speed (8ms)", got)
	}
	if got := loadStep(time.Second, 1); got != loadQuantum {
		t.Errorf("long work: step %v, want the quantum %v", got, loadQuantum)
	}
}

func TestLoadModelDefaults(t *testing.T) {
	m := LoadModel{}.withDefaults()
	if m.Capacity != defaultCapacity || m.Jitter != defaultJitter {
		t.Fatalf("defaults: %+v", m)
	}
	if m := (LoadModel{Jitter: -1, Capacity: 10}).withDefaults(); m.Jitter != 0 || m.Capacity != 10 {
		t.Fatalf("negative jitter must mean none, capacity kept: %+v", m)
	}
	if m := (LoadModel{PerToken: 50 * time.Millisecond}).withDefaults(); m.PromptPerToken != time.Millisecond {
		t.Fatalf("prompt tokens by default cost a fiftieth of a reply token: %+v", m)
	}
	if m := (LoadModel{PerToken: time.Millisecond, PromptPerToken: -1}).withDefaults(); m.PromptPerToken != 0 {
		t.Fatalf("negative PromptPerToken must mean free: %+v", m)
	}
}

// metrics reads the gauges of GET /metrics.
func metrics(t *testing.T, ts *httptest.Server) map[string]int64 {
	t.Helper()
	resp, b := do(t, ts, "GET", "/metrics", "", nil)
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
		t.Fatalf("GET /metrics: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	out := map[string]int64{}
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		name, v, ok := strings.Cut(line, " ")
		n, err := strconv.ParseInt(v, 10, 64)
		if !ok || err != nil {
			t.Fatalf("bad metrics line %q", line)
		}
		out[name] = n
	}
	return out
}

// waitMetrics polls /metrics until cond holds, for at most 5 s.
func waitMetrics(t *testing.T, ts *httptest.Server, what string, cond func(map[string]int64) bool) map[string]int64 {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		m := metrics(t, ts)
		if cond(m) {
			return m
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: metrics stayed %v", what, m)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestLoadInFlight checks the accounting the load model runs on: a chat
// completion's prompt and reply tokens count from arrival to the end of
// its answer, whether it completes or its client leaves, and /metrics
// shows them in the shape llama.cpp uses.
func TestLoadInFlight(t *testing.T) {
	s, ts := start(t, Options{})
	body := chatJSON("gpt-4o-mini", "a prompt of some length to count", false, false)
	resp, b := do(t, ts, "POST", "/v1/chat/completions", body, nil)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	var done struct {
		Usage struct {
			Total int64 `json:"total_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(b, &done); err != nil || done.Usage.Total == 0 {
		t.Fatalf("usage of %s: %v", b, err)
	}
	if m := metrics(t, ts); m["mockllm_tokens_in_flight"] != 0 || m["mockllm_chat_requests_in_flight"] != 0 {
		t.Fatalf("after a completed request: %v", m)
	}

	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("stream=%t", stream), func(t *testing.T) {
			body := chatJSON("gpt-4o-mini", "a prompt of some length to count", stream, stream)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			// An hour per token: the request is in flight until cancelled.
			req := newRequest(t, ctx, "POST", ts.URL+"/v1/chat/completions", body, map[string]string{"X-Mock-Per-Token": "1h"})
			errc := make(chan error, 1)
			go func() {
				resp, err := ts.Client().Do(req)
				if err == nil {
					_, err = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
				errc <- err
			}()
			m := waitMetrics(t, ts, "request in flight", func(m map[string]int64) bool { return m["mockllm_chat_requests_in_flight"] == 1 })
			if got := m["mockllm_tokens_in_flight"]; got != done.Usage.Total {
				t.Errorf("tokens in flight %d, want the request's prompt and reply tokens %d", got, done.Usage.Total)
			}
			if got := m["llamacpp:requests_processing"]; got != 1 {
				t.Errorf("llamacpp:requests_processing %d, want 1", got)
			}
			if _, ok := m["llamacpp:requests_deferred"]; !ok {
				t.Error("no llamacpp:requests_deferred")
			}
			cancel()
			<-errc
			waitMetrics(t, ts, "cancelled request released", func(m map[string]int64) bool {
				return m["mockllm_chat_requests_in_flight"] == 0 && m["mockllm_tokens_in_flight"] == 0
			})
			select {
			case <-s.Cancelled():
			case <-time.After(5 * time.Second):
				t.Fatal("the mock did not see the cancellation")
			}
		})
	}
}

// TestLoadPacing checks that a paced request completes with its answer
// intact, streamed and not, and that a bad per_token is refused.
func TestLoadPacing(t *testing.T) {
	_, ts := start(t, Options{Load: LoadModel{PerToken: time.Microsecond, Seed: 3}})
	for _, stream := range []bool{false, true} {
		resp, b := do(t, ts, "POST", "/v1/chat/completions", chatJSON("gpt-4o-mini", "hello there", stream, stream), nil)
		if resp.StatusCode != 200 {
			t.Fatalf("stream=%t: status %d: %s", stream, resp.StatusCode, b)
		}
		if stream && !strings.Contains(string(b), "data: [DONE]") {
			t.Fatalf("stream did not finish: %s", b)
		}
	}
	resp, b := do(t, ts, "POST", "/v1/chat/completions", chatJSON("gpt-4o-mini", "hi @mock(per_token=-3)", false, false), nil)
	if resp.StatusCode != 400 || !strings.Contains(string(b), "per_token") {
		t.Fatalf("negative per_token: %d %s", resp.StatusCode, b)
	}
}
