// Package mockllm is gatehouse's fake OpenAI upstream: an http.Handler that
// answers chat completions and the Responses API (both streamed and not),
// embeddings and the models list in the wire format OpenAI documents,
// with latency, token pacing,
// injected errors and broken connections dialled in per server, per
// request header or per "@mock(...)" directive in the prompt.
//
// It exists because real providers cannot be reached from tests or
// benchmarks, and because the failures a gateway must survive (429 with
// Retry-After, a stream that stalls, a connection cut mid-stream, a client
// that hangs up) cannot be ordered from a real provider on demand. It owns
// only the emulation; it imports the standard library and nothing of
// gatehouse, so it can never agree with a gateway bug by sharing its code.
package mockllm

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"gatehouse/internal/llm"
)

// Options configure a Server. The zero value is a fast, well-behaved
// upstream: no delays, no errors, no authentication, eight chunks per
// stream. Every timing and failure field can be overridden per request by
// an X-Mock-* header or an @mock(...) directive (see plan.go).
type Options struct {
	Latency         time.Duration // non-streaming: delay before the response (or an injected error) is written
	TTFT            time.Duration // streaming: delay before the headers and the first chunk
	TokensPerSecond float64       // streaming: pace of content chunks; a chunk of k tokens waits k/TPS (0 = no delay)
	Chunks          int           // content chunks per streamed reply (default 8; fewer when the reply has fewer tokens)
	ErrorStatus     int           // when >0, answer with this status in OpenAI's error shape ...
	ErrorRate       float64       // ... for this fraction of requests (0 with ErrorStatus>0 means always)
	RetryAfter      string        // Retry-After header value sent with injected errors
	APIKey          string        // when set, /v1 requests must carry "Authorization: Bearer <APIKey>" or get OpenAI's 401
	Models          []string      // served by GET /v1/models (default: gpt-4o-mini, gpt-4o, … text-embedding-3-large); chat accepts any model
	Reply           string        // fixed reply text; default: a deterministic reply that quotes the last user message
	RecordLimit     int           // received requests kept for Requests (default 100; negative disables recording)
	Load            LoadModel     // chat completions and responses slow down with the tokens in flight (load.go); off by default

	// AWSAccessKeyID and AWSSecretKey are the key pair Bedrock requests
	// (/model/…) must be SigV4-signed with; AWSSessionToken, when set,
	// must arrive as X-Amz-Security-Token. BedrockAPIKey is a Bedrock API
	// key accepted as "Authorization: Bearer …". With neither a key pair
	// nor an API key, Bedrock requests are not authenticated.
	AWSAccessKeyID  string
	AWSSecretKey    string
	AWSSessionToken string
	BedrockAPIKey   string
}

// defaultModels is what GET /v1/models lists when Options.Models is empty.
var defaultModels = []string{
	"gpt-4o-mini", "gpt-4o", "gpt-4.1", "gpt-4.1-mini", "o4-mini",
	"text-embedding-3-small", "text-embedding-3-large",
}

const (
	defaultChunks      = 8
	defaultRecordLimit = 100
	maxBodyBytes       = 32 << 20
	cancelBuffer       = 1024
)

// Stats counts what the server has seen since New or the last Reset.
// Requests counts every request outside /mock/; each one that has ended is counted
// in exactly one of Completed (a full 2xx answer), Cancelled (the client
// went away first) or Errors (an error status, or a connection aborted on
// purpose by fail_after).
type Stats struct {
	Requests  int64 `json:"requests"`
	Completed int64 `json:"completed"`
	Cancelled int64 `json:"cancelled"`
	Errors    int64 `json:"errors"`
	InFlight  int64 `json:"in_flight"` // requests being handled now; not cleared by Reset
}

// Recorded is one request as the mock received it, so tests can assert
// what a gateway actually sent upstream (model rewrites, credentials,
// stream_options splices). Header and Body must not be modified.
type Recorded struct {
	Method   string
	Path     string
	Header   http.Header
	Body     []byte
	Received time.Time
}

type recordedJSON struct {
	Method   string      `json:"method"`
	Path     string      `json:"path"`
	Header   http.Header `json:"header"`
	Body     string      `json:"body"`
	Received time.Time   `json:"received"`
}

// MarshalJSON writes Body as text rather than base64, because people read
// /mock/requests while debugging a gateway.
func (r Recorded) MarshalJSON() ([]byte, error) {
	return json.Marshal(recordedJSON{r.Method, r.Path, r.Header, string(r.Body), r.Received})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (r *Recorded) UnmarshalJSON(b []byte) error {
	var j recordedJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*r = Recorded{j.Method, j.Path, j.Header, []byte(j.Body), j.Received}
	return nil
}

// Cancellation reports a request whose client went away before the
// handler finished: the proof a gateway propagated a hang-up upstream.
type Cancellation struct {
	Path     string
	Model    string
	Received time.Time // when the request arrived
	Observed time.Time // when the handler saw the cancellation
}

// Server is the emulator. It is safe for concurrent use; create it with New.
type Server struct {
	opts       Options
	models     []string
	modelsBody []byte // GET /v1/models never changes, so it is built once

	requests, completed, cancelled, errors, inFlight atomic.Int64
	errorDraws                                       atomic.Uint64 // spreads ErrorRate evenly, see injectError

	load                     LoadModel    // with defaults filled in
	loadTokens, loadRequests atomic.Int64 // chat completions and responses in flight and their tokens (load.go)

	lastReply atomic.Pointer[lastReply] // see replyFor

	cancelCh chan Cancellation
	bufs     sync.Pool // *[]byte response buffers

	mu   sync.Mutex
	ring []Recorded // circular, len RecordLimit once full
	next int        // index of the oldest record once the ring is full

	// pause, when set, stands in for every wait (latency, ttft, pacing):
	// the package's tests record what would have been waited instead of
	// waiting it. false means the client went away.
	pause func(ctx context.Context, d time.Duration) bool
}

// New returns a Server for o, with defaults filled in.
func New(o Options) *Server {
	if o.Chunks <= 0 {
		o.Chunks = defaultChunks
	}
	if o.RecordLimit == 0 {
		o.RecordLimit = defaultRecordLimit
	}
	s := &Server{opts: o, models: o.Models, cancelCh: make(chan Cancellation, cancelBuffer), load: o.Load.withDefaults()}
	if len(s.models) == 0 {
		s.models = defaultModels
	}
	s.bufs.New = func() any { b := make([]byte, 0, 1024); return &b }
	b := []byte(`{"object":"list","data":[`)
	for i, id := range s.models {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendModel(b, id)
	}
	s.modelsBody = append(b, "]}"...)
	return s
}

// Stats returns the counters. It is cheap: a few atomic loads.
func (s *Server) Stats() Stats {
	return Stats{
		Requests:  s.requests.Load(),
		Completed: s.completed.Load(),
		Cancelled: s.cancelled.Load(),
		Errors:    s.errors.Load(),
		InFlight:  s.inFlight.Load(),
	}
}

// Requests returns the last RecordLimit requests, oldest first.
func (s *Server) Requests() []Recorded {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Recorded, 0, len(s.ring))
	out = append(out, s.ring[s.next:]...)
	return append(out, s.ring[:s.next]...)
}

// Cancelled delivers one Cancellation per request cancelled by its client.
// The channel is buffered; when nobody reads it, values are dropped but
// still counted in Stats.Cancelled.
func (s *Server) Cancelled() <-chan Cancellation { return s.cancelCh }

// Reset clears the counters (except InFlight), the recorded requests and
// any undelivered cancellations, so one server can serve many subtests.
func (s *Server) Reset() {
	s.mu.Lock()
	s.ring, s.next = nil, 0
	s.mu.Unlock()
	for _, c := range []*atomic.Int64{&s.requests, &s.completed, &s.cancelled, &s.errors} {
		c.Store(0)
	}
	s.errorDraws.Store(0)
	for {
		select {
		case <-s.cancelCh:
		default:
			return
		}
	}
}

func (s *Server) record(r *http.Request, body []byte, at time.Time) {
	limit := s.opts.RecordLimit
	if limit < 0 {
		return
	}
	rec := Recorded{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body, Received: at}
	s.mu.Lock()
	if len(s.ring) < limit {
		s.ring = append(s.ring, rec)
	} else {
		s.ring[s.next] = rec
		s.next = (s.next + 1) % limit
	}
	s.mu.Unlock()
}

// outcome is how a request ended; exactly one counter is bumped for it.
type outcome uint8

const (
	outcomeNone outcome = iota
	outcomeCompleted
	outcomeCancelled
	outcomeError
)

// call is the state of one request while it is handled.
type call struct {
	s        *Server
	w        http.ResponseWriter
	r        *http.Request
	ctx      context.Context
	rc       *http.ResponseController
	timer    *time.Timer
	received time.Time
	model    string
	reqID    string
	outcome  outcome
	observed time.Time // when a cancellation was seen
	dialect  string    // "" for OpenAI's wire format, else the dialect's name

	// The fault armed by the plan (faults.go): it strikes when writes
	// reaches faultAt, or replaces a whole 2xx answer.
	fault   fault
	faultAt int
	writes  int
	reset   bool
	// cut, set by armCut, sends half of a whole 2xx answer and then goes
	// silent (cutAbort false) or cuts the connection.
	cut, cutAbort bool
}

// ServeHTTP routes to the emulated endpoints. Only the /v1 routes OpenAI
// serves exist (besides the other dialects', /mock/ and GET /metrics, the
// load gauges of load.go); anything else gets OpenAI's 404 "Invalid URL".
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, "/mock/") {
		s.serveControl(w, r)
		return
	}
	if r.URL.Path == "/metrics" && r.Method == http.MethodGet {
		s.serveMetrics(w)
		return
	}
	c := &call{s: s, w: w, r: r, ctx: r.Context(), rc: http.NewResponseController(w), received: time.Now(), reqID: newRequestID()}
	s.requests.Add(1)
	s.inFlight.Add(1)
	defer s.finish(c)

	body, err := readBody(r)
	s.record(r, body, c.received)
	if err != nil {
		if c.ctx.Err() != nil {
			c.cancel()
			return
		}
		c.fail(errBodyTooLarge)
		return
	}
	if d := dialectFor(r); d != nil {
		c.dialect = d.name
		d.serve(s, c, body)
		return
	}
	if !s.authorized(c) {
		return
	}
	path := r.URL.Path
	switch {
	case path == "/v1/chat/completions" && r.Method == http.MethodPost:
		s.chat(c, body)
	case path == "/v1/embeddings" && r.Method == http.MethodPost:
		s.embeddings(c, body)
	case path == "/v1/responses" && r.Method == http.MethodPost:
		s.responses(c, body)
	case strings.HasPrefix(path, "/v1/responses/"):
		s.responseByID(c, strings.TrimPrefix(path, "/v1/responses/"))
	case path == "/v1/models" && r.Method == http.MethodGet:
		c.writeJSON(http.StatusOK, s.modelsBody)
	case strings.HasPrefix(path, "/v1/models/") && r.Method == http.MethodGet:
		s.model(c, strings.TrimPrefix(path, "/v1/models/"))
	default:
		c.fail(invalidURL(r.Method, path))
	}
}

// finish counts the outcome. It also runs while fail_after's abort panic
// unwinds, which is why the outcome is set before panicking.
func (s *Server) finish(c *call) {
	s.inFlight.Add(-1)
	if c.outcome == outcomeNone {
		// The handler returned without saying how it ended: the context
		// is the only witness left.
		if c.ctx.Err() != nil {
			c.cancel()
		} else {
			c.outcome = outcomeCompleted
		}
	}
	switch c.outcome {
	case outcomeCompleted:
		s.completed.Add(1)
	case outcomeCancelled:
		s.cancelled.Add(1)
		select {
		case s.cancelCh <- Cancellation{Path: c.r.URL.Path, Model: c.model, Received: c.received, Observed: c.observed}:
		default:
		}
	case outcomeError:
		s.errors.Add(1)
	}
}

// cancel marks the request as abandoned by its client.
func (c *call) cancel() {
	if c.outcome != outcomeCancelled {
		c.outcome = outcomeCancelled
		c.observed = time.Now()
	}
}

// wait sleeps for d unless the client goes away first; false means it did.
// One timer serves every wait of a request, so pacing a stream does not
// allocate per chunk.
func (c *call) wait(d time.Duration) bool {
	if d <= 0 {
		if c.ctx.Err() != nil {
			c.cancel()
			return false
		}
		return true
	}
	if c.s.pause != nil {
		if !c.s.pause(c.ctx, d) {
			c.cancel()
			return false
		}
		return true
	}
	if c.timer == nil {
		c.timer = time.NewTimer(d)
	} else {
		c.timer.Reset(d)
	}
	select {
	case <-c.timer.C:
		return true
	case <-c.ctx.Done():
		c.timer.Stop()
		c.cancel()
		return false
	}
}

// block waits until the client goes away: hang and stall_after.
func (c *call) block() {
	<-c.ctx.Done()
	c.cancel()
}

// write sends b and flushes it, so every SSE event reaches the client on
// its own; false means the client is gone.
func (c *call) write(b []byte) bool {
	if c.fault != faultNone && c.writes == c.faultAt {
		return c.strike(b)
	}
	c.writes++
	if _, err := c.w.Write(b); err != nil {
		c.cancel()
		return false
	}
	if err := c.rc.Flush(); err != nil && err != http.ErrNotSupported {
		c.cancel()
		return false
	}
	return true
}

// writeJSON sends a complete JSON response with the headers OpenAI sends.
func (c *call) writeJSON(status int, body []byte) {
	h := c.w.Header()
	h["Content-Type"] = hdrJSON
	c.setCommonHeaders(h)
	c.writeWhole(status, body)
}

// writeWhole sends a complete response whose headers, but for
// Content-Length, are already set, and records how the call ended. Every
// dialect's non-streamed answers end here.
func (c *call) writeWhole(status int, body []byte) {
	if c.fault != faultNone && c.wholeFault(status, body) {
		return
	}
	if c.cut && status < 400 {
		c.cut = false
		c.w.Header()["Content-Length"] = []string{itoa(len(body))}
		c.w.WriteHeader(status)
		if c.write(body[:len(body)/2]) {
			c.breakOff(c.cutAbort)
		}
		return
	}
	c.w.Header()["Content-Length"] = []string{itoa(len(body))}
	c.w.WriteHeader(status)
	if _, err := c.w.Write(body); err != nil {
		c.cancel()
		return
	}
	if status < 400 {
		c.outcome = outcomeCompleted
	} else {
		c.outcome = outcomeError
	}
}

// Header values that never change are shared slices: net/http only reads
// them.
var (
	hdrJSON          = []string{"application/json"}
	hdrEventStream   = []string{"text/event-stream; charset=utf-8"}
	hdrNoCache       = []string{"no-cache"}
	hdrVersion       = []string{"2020-10-01"}
	hdrLimitRequests = []string{"10000"}
	hdrLimitTokens   = []string{"30000000"}
	hdrRemainingReqs = []string{"9999"}
	hdrResetRequests = []string{"6ms"}
	hdrResetTokens   = []string{"0s"}
)

func (c *call) setCommonHeaders(h http.Header) {
	h["X-Request-Id"] = []string{c.reqID}
	h["Openai-Version"] = hdrVersion
	h["Openai-Processing-Ms"] = []string{itoa(int(time.Since(c.received).Milliseconds()))}
	h["X-Ratelimit-Limit-Requests"] = hdrLimitRequests
	h["X-Ratelimit-Limit-Tokens"] = hdrLimitTokens
	h["X-Ratelimit-Remaining-Requests"] = hdrRemainingReqs
	h["X-Ratelimit-Remaining-Tokens"] = hdrLimitTokens
	h["X-Ratelimit-Reset-Requests"] = hdrResetRequests
	h["X-Ratelimit-Reset-Tokens"] = hdrResetTokens
}

func readBody(r *http.Request) ([]byte, error) {
	if r.Body == nil || r.Body == http.NoBody {
		return nil, nil
	}
	n := r.ContentLength
	if n < 0 || n > maxBodyBytes {
		n = 0
	}
	buf := bytes.NewBuffer(make([]byte, 0, n+bytes.MinRead))
	_, err := buf.ReadFrom(http.MaxBytesReader(nil, r.Body, maxBodyBytes))
	return buf.Bytes(), err
}

func (s *Server) authorized(c *call) bool {
	if s.opts.APIKey == "" {
		return true
	}
	got := c.r.Header.Get("Authorization")
	if got == "Bearer "+s.opts.APIKey {
		return true
	}
	if got == "" {
		c.fail(errNoAPIKey)
		return false
	}
	c.fail(incorrectAPIKey(strings.TrimPrefix(got, "Bearer ")))
	return false
}

// modelCreated is the fixed creation time listed for every model, so
// responses are reproducible.
const modelCreated = 1715367049

func appendModel(b []byte, id string) []byte {
	b = append(b, `{"id":`...)
	b = llm.AppendQuote(b, id)
	b = append(b, `,"object":"model","created":`...)
	b = appendInt(b, modelCreated)
	return append(b, `,"owned_by":"system"}`...)
}

func (s *Server) model(c *call, id string) {
	c.model = id
	for _, m := range s.models {
		if m == id {
			c.writeJSON(http.StatusOK, appendModel(nil, id))
			return
		}
	}
	c.fail(modelNotFound(id))
}

// serveControl answers the /mock/ endpoints, which let scripts and tests
// in other processes inspect and reset the mock. They are not counted or
// recorded, and not behind APIKey: the mock is meant for loopback only.
func (s *Server) serveControl(w http.ResponseWriter, r *http.Request) {
	var v any
	switch {
	case r.URL.Path == "/mock/stats" && r.Method == http.MethodGet:
		v = s.Stats()
	case r.URL.Path == "/mock/requests" && r.Method == http.MethodGet:
		v = s.Requests()
	case r.URL.Path == "/mock/reset" && r.Method == http.MethodPost:
		s.Reset()
		w.WriteHeader(http.StatusNoContent)
		return
	default:
		e := invalidURL(r.Method, r.URL.Path)
		w.Header()["Content-Type"] = hdrJSON
		w.WriteHeader(e.status)
		_, _ = w.Write(e.append(nil))
		return
	}
	w.Header()["Content-Type"] = hdrJSON
	_ = json.NewEncoder(w).Encode(v)
}
