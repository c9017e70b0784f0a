package mockllm

import (
	"hash/fnv"
	"math"
	"net/http"
	"strconv"
	"time"
)

// LoadModel makes a server behave like one inference engine batching
// every request it is serving: a request's tokens (prompt and reply) are
// in flight, holding the engine's memory, from the moment it is accepted
// until its answer is complete, and every token it produces takes
//
//	PerToken × (1 + other requests' tokens in flight / Capacity)
//
// while every prompt token it reads takes PromptPerToken times the same
// factor (prefill runs in parallel, so it is much cheaper per token than
// generation). A request alone takes time in proportion to its size; a
// long prompt slows down everyone else on the server for as long as it is
// there. The slowdown is re-read as a request progresses, not fixed when
// it arrives: a heavy request that lands later slows the ones already
// there, which is the head-of-line blocking load balancers are judged by.
//
// Each request's work is scaled by a jitter factor in [1-Jitter, 1+Jitter]
// drawn from a hash of Seed and the request body, so a run is reproducible
// whatever order requests arrive in, and the same request costs the same
// on servers that share a seed.
//
// Only OpenAI chat completions and responses are paced by it: a
// non-streamed answer waits for all its tokens, a stream reads the prompt
// before its first chunk and generates each chunk before sending it.
// Latency, TTFT and TokensPerSecond still apply on top.
type LoadModel struct {
	// PerToken is the time to generate one reply token on an otherwise
	// idle server; 0 disables the model (override per request with
	// per_token).
	PerToken time.Duration
	// PromptPerToken is the time to read one prompt token on an otherwise
	// idle server; 0 means PerToken/50, negative means free.
	PromptPerToken time.Duration
	// Capacity is the number of other requests' in-flight tokens that
	// doubles the time per token; 0 means 4096.
	Capacity int
	// Jitter is the ± share each request's work varies by; 0 means 0.2,
	// negative means none.
	Jitter float64
	// Seed seeds the jitter.
	Seed uint64
}

const (
	defaultCapacity = 4096
	defaultJitter   = 0.2
	// defaultPrefillRatio is how much cheaper a prompt token is than a
	// reply token by default; real engines read prompts one to two
	// orders of magnitude faster than they generate.
	defaultPrefillRatio = 50
	// loadQuantum is the longest a request sleeps before it looks at the
	// load again. Shorter follows the load more closely and costs more
	// wake-ups: at 100 requests in flight, 20 ms is 5,000 a second.
	loadQuantum = 20 * time.Millisecond
)

func (m LoadModel) withDefaults() LoadModel {
	if m.Capacity <= 0 {
		m.Capacity = defaultCapacity
	}
	if m.Jitter == 0 {
		m.Jitter = defaultJitter
	}
	m.Jitter = min(max(m.Jitter, 0), 1)
	if m.PromptPerToken == 0 {
		m.PromptPerToken = m.PerToken / defaultPrefillRatio
	}
	m.PromptPerToken = max(m.PromptPerToken, 0)
	return m
}

// slowdown is the factor by which a request's tokens take longer than on
// an idle server while others holds other requests' tokens.
func slowdown(others int64, capacity int) float64 {
	return 1 + float64(max(others, 0))/float64(capacity)
}

// jitterFactor is the request's work multiplier: a uniform draw in
// [1-j, 1+j] made from seed and body, with no state, so the order in
// which requests arrive does not change it.
func jitterFactor(seed uint64, body []byte, j float64) float64 {
	if j <= 0 {
		return 1
	}
	h := fnv.New64a()
	var s [8]byte
	for i := range s {
		s[i] = byte(seed >> (8 * i))
	}
	_, _ = h.Write(s[:])
	_, _ = h.Write(body)
	// splitmix64's finaliser spreads FNV's weak low bits over the word.
	x := h.Sum64()
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	u := float64(x>>11) / (1 << 53) // [0,1)
	return 1 + j*(2*u-1)
}

// loadStep is how long to sleep for work (time at idle speed) left, with
// the given slowdown: the whole of it, or a quantum after which the load
// is read again.
func loadStep(work time.Duration, factor float64) time.Duration {
	return min(time.Duration(math.Ceil(float64(work)*factor)), loadQuantum)
}

// admit counts a request's tokens as in flight until the returned func
// is called. Every OpenAI chat completion and response is counted, paced
// or not, so /metrics is meaningful without the model too.
func (s *Server) admit(n int64) func() {
	s.loadTokens.Add(n)
	s.loadRequests.Add(1)
	return func() {
		s.loadTokens.Add(-n)
		s.loadRequests.Add(-1)
	}
}

// read spends the time the prompt takes at the server's current load,
// and generate the time n reply tokens take; false means the client went
// away first.
func (c *call) read(p *plan, prompt int) bool {
	if p.perToken <= 0 {
		return true
	}
	cost := c.s.load.PromptPerToken
	if c.s.opts.Load.PromptPerToken == 0 {
		cost = p.perToken / defaultPrefillRatio // follows a per_token override
	}
	return c.process(p, prompt, cost)
}

func (c *call) generate(p *plan, n int) bool { return c.process(p, n, p.perToken) }

func (c *call) process(p *plan, tokens int, perToken time.Duration) bool {
	if perToken <= 0 || tokens <= 0 {
		return true
	}
	capacity := c.s.load.Capacity
	work := time.Duration(float64(tokens) * float64(perToken) * p.jitter)
	for work > 0 {
		f := slowdown(c.s.loadTokens.Load()-p.held, capacity)
		t0 := time.Now()
		if !c.wait(loadStep(work, f)) {
			return false
		}
		// What was done is what the time actually slept bought, so timer
		// lateness is not work for free.
		work -= time.Duration(float64(time.Since(t0)) / f)
	}
	return true
}

// serveMetrics answers GET /metrics in the Prometheus text format with
// the gauges llama.cpp's server exports for its load (the mock has no
// queue, so nothing is ever deferred), so a gateway's load-signal poller
// can be pointed at it.
func (s *Server) serveMetrics(w http.ResponseWriter) {
	var b []byte
	gauge := func(name, help string, v int64) {
		b = append(b, "# HELP "+name+" "+help+"\n# TYPE "+name+" gauge\n"+name+" "...)
		b = strconv.AppendInt(b, v, 10)
		b = append(b, '\n')
	}
	gauge("llamacpp:requests_processing", "Number of requests processing.", s.inFlight.Load())
	gauge("llamacpp:requests_deferred", "Number of requests deferred.", 0)
	gauge("mockllm_chat_requests_in_flight", "Chat completions and responses being answered.", s.loadRequests.Load())
	gauge("mockllm_tokens_in_flight", "Prompt and reply tokens of the chat completions and responses being answered.", s.loadTokens.Load())
	w.Header()["Content-Type"] = []string{"text/plain; version=0.0.4; charset=utf-8"}
	_, _ = w.Write(b)
}
