// This file is the workload: scenarios (a prompt-size mix, a number of
// requests and of concurrent clients), the seeded request sequence each
// one expands to, and the closed loop that sends it through one gateway.
// Every strategy is sent the same sequence, in the same order, by the
// same number of clients: only the choice of backend differs.

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// benchKey is the gatehouse key in the generated configs.
const benchKey = "gh-bench-key"

// benchModel is the model name clients send.
const benchModel = "bench"

// band is one part of a prompt-size mix: share of the requests whose
// prompt has lo to hi tokens, drawn uniformly, or log-uniformly when log
// is set (as many prompts of 10–100 tokens as of 100–1,000).
type band struct {
	share  float64
	lo, hi int
	log    bool
}

// scenario is one workload.
type scenario struct {
	name        string
	about       string
	requests    int
	concurrency int
	mix         []band
	maxTokens   int // sent as max_tokens: bounds the reply and is gatehouse's output estimate
	// stream asks for the replies streamed (-stream): gatehouse then
	// lowers a deployment's in-flight tokens chunk by chunk as it relays
	// them, instead of only when a reply ends.
	stream bool
}

// scenarios are the two workloads of the benchmark, by name.
//
// reference follows ../shared/reference/token-aware-balancer.txt: 3
// backends, 60 requests, a mix of short chat turns and the multi-thousand
// token prompts (up to 4,000) it uses as the heavy case, at a
// concurrency of 10. The article does not publish its exact mix or
// concurrency; these are the figures it names, made concrete.
//
// wide is its claim that "wider token variance and higher concurrency
// would amplify the difference": mostly short prompts with a heavy tail
// up to 16,000 tokens (each band log-uniform), eight times as many
// requests, 32 clients.
var scenarios = map[string]scenario{
	"reference": {
		name: "reference", requests: 60, concurrency: 10, maxTokens: 64,
		about: "60 requests, 10 clients; prompts: 60% 10–200 tokens, 25% 500–1,500, 15% 3,000–4,000",
		mix:   []band{{0.60, 10, 200, false}, {0.25, 500, 1500, false}, {0.15, 3000, 4000, false}},
	},
	"wide": {
		name: "wide", requests: 480, concurrency: 32, maxTokens: 64,
		about: "480 requests, 32 clients; prompts log-uniform: 85% 10–300 tokens, 15% 2,000–16,000",
		mix:   []band{{0.85, 10, 300, true}, {0.15, 2000, 16000, true}},
	},
}

// scenarioOrder is the order scenarios run and print in.
var scenarioOrder = []string{"reference", "wide"}

// request is one request of a sequence.
type request struct {
	promptTokens int // what the prompt was built to hold, about what gateway and mock count
	body         []byte
}

// words are the prompt's vocabulary: common three-letter words, each one
// token in OpenAI's encodings and, with its space, the four characters
// mockllm counts as one token, so the gateway's estimate and the
// backend's accounting agree.
var words = strings.Fields("the and for are but not you all any can had her was one our out day get has him his how man new now old see two way who boy did its let put say she too use")

// generate expands sc into its request sequence. The same seed gives the
// same sequence, byte for byte.
func generate(sc scenario, seed uint64) []request {
	rng := rand.New(rand.NewPCG(seed, uint64(len(sc.name))<<32|uint64(sc.requests)))
	total := 0.0
	for _, b := range sc.mix {
		total += b.share
	}
	out := make([]request, sc.requests)
	for i := range out {
		n := drawSize(rng, sc.mix, total)
		out[i] = request{promptTokens: n, body: chatBody(i, n, sc.maxTokens, sc.stream, rng)}
	}
	return out
}

// drawSize picks a band in proportion to the shares, then a size in it.
func drawSize(rng *rand.Rand, mix []band, total float64) int {
	x := rng.Float64() * total
	b := mix[len(mix)-1]
	for _, m := range mix {
		if x < m.share {
			b = m
			break
		}
		x -= m.share
	}
	u := rng.Float64()
	if b.log {
		return int(math.Round(math.Exp(math.Log(float64(b.lo)) + u*(math.Log(float64(b.hi))-math.Log(float64(b.lo))))))
	}
	return b.lo + int(u*float64(b.hi-b.lo+1))
}

// chatBody is a chat completion request whose one user message holds
// about tokens tokens. The request's index leads the prompt, so no two
// requests are the same (mockllm draws its jitter from the body).
func chatBody(i, tokens, maxTokens int, stream bool, rng *rand.Rand) []byte {
	var p strings.Builder
	p.WriteString("req" + strconv.Itoa(i))
	for range max(tokens-1, 0) {
		p.WriteByte(' ')
		p.WriteString(words[rng.IntN(len(words))])
	}
	req := map[string]any{
		"model":      benchModel,
		"messages":   []map[string]string{{"role": "user", "content": p.String()}},
		"max_tokens": maxTokens,
	}
	if stream {
		req["stream"] = true
	}
	b, _ := json.Marshal(req)
	return b
}

// result is how one request went.
type result struct {
	latency time.Duration
	err     string // "" on success
}

// drive sends seq to url with concurrency clients in a closed loop (each
// takes the next request of the sequence as soon as its last one is
// answered). sample, called every sampleEvery while it runs, returns the
// backends' in-flight tokens (nil when unknown), for the run's skew.
func drive(ctx context.Context, client *http.Client, url string, seq []request, concurrency int, sample func() []int64) pass {
	out := make([]result, len(seq))
	var next sync.Mutex
	i := 0
	take := func() int {
		next.Lock()
		defer next.Unlock()
		if i == len(seq) || ctx.Err() != nil {
			return -1
		}
		i++
		return i - 1
	}
	start := time.Now()
	stop := make(chan struct{})
	skew := make(chan float64, 1)
	go func() { skew <- watch(stop, sample) }()
	var wg sync.WaitGroup
	for range min(concurrency, len(seq)) {
		wg.Go(func() {
			for k := take(); k >= 0; k = take() {
				out[k] = send(ctx, client, url, seq[k].body)
			}
		})
	}
	wg.Wait()
	wall := time.Since(start)
	close(stop)
	return pass{results: out, wall: wall, skew: <-skew}
}

// sampleEvery is how often drive samples the backends' load.
const sampleEvery = 25 * time.Millisecond

// watch averages skewOf(sample()) until stop is closed.
func watch(stop <-chan struct{}, sample func() []int64) float64 {
	t := time.NewTicker(sampleEvery)
	defer t.Stop()
	sum, n := 0.0, 0
	for {
		select {
		case <-stop:
			if n == 0 {
				return 0
			}
			return sum / float64(n)
		case <-t.C:
			if v, ok := skewOf(sample()); ok {
				sum += v
				n++
			}
		}
	}
}

// send makes one request and times it to the end of its body.
func send(ctx context.Context, client *http.Client, url string, body []byte) result {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return result{err: err.Error()}
	}
	req.Header["Authorization"] = []string{"Bearer " + benchKey}
	req.Header["Content-Type"] = []string{"application/json"}
	t0 := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return result{latency: time.Since(t0), err: err.Error()}
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	r := result{latency: time.Since(t0)}
	switch {
	case err != nil:
		r.err = err.Error()
	case resp.StatusCode != http.StatusOK:
		r.err = fmt.Sprintf("HTTP %d: %.200s", resp.StatusCode, b)
	case strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") && !bytes.HasSuffix(b, []byte("data: [DONE]\n\n")):
		r.err = "the stream ended before [DONE]"
	case resp.Header.Get("X-Gatehouse-Attempts") != "" && resp.Header.Get("X-Gatehouse-Attempts") != "1":
		// A retried request measures failover, not balancing.
		r.err = "answered after " + resp.Header.Get("X-Gatehouse-Attempts") + " attempts"
	}
	return r
}

// newClient keeps one connection per client open for the whole run.
func newClient(concurrency int) *http.Client {
	return &http.Client{
		Timeout: 5 * time.Minute,
		Transport: &http.Transport{
			DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
			MaxIdleConns:        concurrency * 2,
			MaxIdleConnsPerHost: concurrency * 2,
			IdleConnTimeout:     time.Minute,
		},
	}
}
