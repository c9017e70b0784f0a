// Package server is gatehouse's HTTP front: routes, the order of the
// request pipeline (auth → parse → route → upstream → relay), and turning
// every failure into an error in the caller's API dialect.
//
// Its configuration arrives as an immutable Runtime that a reload swaps
// atomically; requests already running keep the Runtime they started with.
// server never imports a database driver or a store package.
package server

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"gatehouse/internal/account"
	"gatehouse/internal/auth"
	"gatehouse/internal/llm"
	"gatehouse/internal/metrics"
	"gatehouse/internal/reqid"
	"gatehouse/internal/responses"
	"gatehouse/internal/route"
	"gatehouse/internal/telemetry"
	"gatehouse/internal/tokens"
)

// Authenticator resolves the caller of a request.
type Authenticator interface {
	Authenticate(r *http.Request) (*auth.Principal, error)
}

// Runtime is everything one config generation decides. It is never
// modified after it is handed to the Server.
type Runtime struct {
	Routes       *route.Table
	Auth         Authenticator // nil serves every request unauthenticated (bare mode)
	MaxBodyBytes int64
	LogRequests  bool
	// ModelList is the prebuilt body of GET /v1/models.
	ModelList []byte
	// Admin serves /admin/ (it checks the admin key itself); nil answers
	// 404, as when the config sets no admin_key.
	Admin http.Handler
	// UI serves the dashboard under /ui/ (it checks its session itself);
	// nil answers 404 with UIOff as the reason.
	UI    http.Handler
	UIOff string
	// Limits is admission control (rate limits, budgets, cost); nil
	// admits everything and sends no limit or cost headers (bare mode).
	Limits *Limits
	// Metrics records requests and upstream attempts and serves GET
	// /metrics; it is the process's one set of instruments, handed to
	// every generation. nil records nothing and /metrics answers 404.
	Metrics *metrics.Metrics
	// Usage takes one usage record per API request; nil keeps none. It
	// is the process's one sink, handed to every generation.
	Usage UsageSink
	// Bodies redacts and cuts the bodies kept in the records of projects
	// with log_bodies on; nil keeps no bodies.
	Bodies *account.Redactor
	// Tracer exports OpenTelemetry spans; nil (the default) none. Like
	// Metrics, the process's one, handed to every generation.
	Tracer *telemetry.Tracer
	// Caching is the exact response cache; nil caches nothing (every
	// response says bypass).
	Caching *Caching
	// Responses keeps the responses created with store: true; nil keeps
	// none, and store: true and previous_response_id are refused.
	Responses responses.Store
}

// Server serves the gateway API.
type Server struct {
	rt       atomic.Pointer[Runtime]
	log      *slog.Logger
	draining atomic.Bool
	now      func() time.Time
	// tokens loads the tokenizer on first use: only count_tokens needs it
	// today, and a gateway that never serves it never pays for it.
	tokens func() *tokens.Counter
	// completions counts what a model wrote when no usage came with it
	// (a cancelled or broken stream); loaded on first use.
	completions func() *tokens.Completions
	// requestLog, when set, takes the per-request lines encoded by hand
	// (see SetRequestLog); nil sends them through log.
	requestLog io.Writer
	// lineQueue is requestLog when it takes whole lines in buffers of
	// its own (asynclog.Writer); nil otherwise.
	lineQueue lineQueue
	// stamps writes the time of those lines.
	stamps lineStamps
	// admitters is what the running Limits' admitter implements
	// (admitterOf).
	admitters atomic.Pointer[admitterView]
}

// SetRequestLog makes the server write its per-request log lines to w
// itself, one Write per line, in the shape slog's JSON handler gives them
// (time, level, msg, then the fields), instead of through the logger:
// w must be the writer under the logger's JSON handler. The logger still
// decides whether a line's level is enabled. Through slog the line cost
// about 6% of a small request's instructions (BENCHMARKS.md), most of it
// generic attribute handling a fixed set of fields does not need. Call it
// before serving.
func (s *Server) SetRequestLog(w io.Writer) {
	s.requestLog = w
	s.lineQueue, _ = w.(lineQueue)
}

// lineQueue is a request log that lends the buffer a line is written in
// and takes it back with the line (asynclog.Writer): the line is
// written once, where Write would copy it from a buffer of the server's.
type lineQueue interface {
	Line() *[]byte   // an empty buffer for one line
	Queue(b *[]byte) // takes the line in b, and b with it
}

// New returns a Server using rt until the next Swap. log receives one line
// per request (when rt.LogRequests) and every internal error.
func New(rt *Runtime, log *slog.Logger) *Server {
	s := &Server{log: log, now: time.Now, tokens: sync.OnceValue(tokens.New), completions: sync.OnceValue(tokens.NewCompletions)}
	s.rt.Store(rt)
	return s
}

// Swap installs a new runtime for requests that start from now on.
func (s *Server) Swap(rt *Runtime) { s.rt.Store(rt) }

// Runtime returns the runtime new requests use.
func (s *Server) Runtime() *Runtime { return s.rt.Load() }

// Drain makes /readyz fail so load balancers stop sending traffic while
// in-flight requests finish.
func (s *Server) Drain() { s.draining.Store(true) }

// Handler returns the routes. Method and path mismatches answer in
// OpenAI's error shape rather than net/http's plain text.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/chat/completions", s.only(http.MethodPost, s.chat))
	mux.HandleFunc("/v1/embeddings", s.only(http.MethodPost, s.embeddings))
	mux.HandleFunc("/v1/messages", s.onlyIn(dialectAnthropic, http.MethodPost, s.messages))
	mux.HandleFunc("/v1/messages/count_tokens", s.onlyIn(dialectAnthropic, http.MethodPost, s.countTokens))
	mux.HandleFunc("/v1/messages/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, dialectAnthropic, notFound(r), s.stamp(w, s.now()))
	})
	mux.HandleFunc("/v1/responses", s.only(http.MethodPost, s.responsesCreate))
	mux.HandleFunc("/v1/responses/{id}", s.methods(map[string]http.HandlerFunc{
		http.MethodGet: s.storedResponse(false), http.MethodDelete: s.storedResponse(true)}))
	mux.HandleFunc("/v1/models", s.only(http.MethodGet, s.models))
	mux.HandleFunc("/v1/models/{id...}", s.only(http.MethodGet, s.model))
	mux.HandleFunc("/admin/", s.admin)
	mux.HandleFunc("/ui", s.ui)
	mux.HandleFunc("/ui/", s.ui)
	mux.HandleFunc("/metrics", s.only(http.MethodGet, s.metrics))
	mux.HandleFunc("/healthz", s.only(http.MethodGet, s.healthz))
	mux.HandleFunc("/readyz", s.only(http.MethodGet, s.readyz))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.stamp(w, s.now())
		notFound(r).WriteOpenAI(w)
	})
	return mux
}

func notFound(r *http.Request) *llm.Error {
	return &llm.Error{Kind: llm.KindNotFound, Status: http.StatusNotFound, Type: "invalid_request_error",
		Code: "unknown_url", Message: "Unknown request URL: " + r.Method + " " + r.URL.Path + "."}
}

func (s *Server) only(method string, h http.HandlerFunc) http.HandlerFunc {
	return s.onlyIn(dialectOpenAI, method, h)
}

// onlyIn is only for a route of the given dialect.
func (s *Server) onlyIn(d dialect, method string, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != method && !(method == http.MethodGet && r.Method == http.MethodHead) {
			s.notAllowed(w, r, d, method)
			return
		}
		h(w, r)
	}
}

// notAllowed answers a request whose method the route does not serve. It
// is a call of its own so that onlyIn's frame, under every request for
// its whole life (a stream's too), stays small.
func (s *Server) notAllowed(w http.ResponseWriter, r *http.Request, d dialect, method string) {
	id := s.stamp(w, s.now())
	w.Header().Set("Allow", method)
	writeError(w, d, &llm.Error{Kind: llm.KindBadRequest, Status: http.StatusMethodNotAllowed, Type: "invalid_request_error",
		Code: "method_not_allowed", Message: "Method " + r.Method + " is not allowed on " + r.URL.Path + "; use " + method + "."}, id)
}

// methods serves a path whose methods have handlers of their own; any
// other method is a 405 in OpenAI's shape naming those allowed. GET
// serves HEAD too.
func (s *Server) methods(hs map[string]http.HandlerFunc) http.HandlerFunc {
	allowed := make([]string, 0, len(hs))
	for m := range hs {
		allowed = append(allowed, m)
	}
	slices.Sort(allowed)
	allow := strings.Join(allowed, ", ")
	return func(w http.ResponseWriter, r *http.Request) {
		m := r.Method
		if m == http.MethodHead {
			m = http.MethodGet
		}
		if h, ok := hs[m]; ok {
			h(w, r)
			return
		}
		id := s.stamp(w, s.now())
		w.Header().Set("Allow", allow)
		writeError(w, dialectOpenAI, &llm.Error{Kind: llm.KindBadRequest, Status: http.StatusMethodNotAllowed, Type: "invalid_request_error",
			Code: "method_not_allowed", Message: "Method " + r.Method + " is not allowed on " + r.URL.Path + "; use " + allow + "."}, id)
	}
}

// admin hands /admin/ to the runtime's admin handler, if it has one.
func (s *Server) admin(w http.ResponseWriter, r *http.Request) {
	if h := s.rt.Load().Admin; h != nil {
		h.ServeHTTP(w, r)
		return
	}
	s.stamp(w, s.now())
	(&llm.Error{Kind: llm.KindNotFound, Status: http.StatusNotFound, Type: "invalid_request_error", Code: "admin_disabled",
		Message: "The admin API is disabled: set admin_key in the config to enable it."}).WriteOpenAI(w)
}

// ui hands /ui/ to the runtime's dashboard, if it has one.
func (s *Server) ui(w http.ResponseWriter, r *http.Request) {
	rt := s.rt.Load()
	if rt.UI != nil {
		rt.UI.ServeHTTP(w, r)
		return
	}
	why := rt.UIOff
	if why == "" {
		why = "The dashboard is off."
	}
	s.stamp(w, s.now())
	(&llm.Error{Kind: llm.KindNotFound, Status: http.StatusNotFound, Type: "invalid_request_error", Code: "ui_disabled",
		Message: why}).WriteOpenAI(w)
}

func (s *Server) metrics(w http.ResponseWriter, r *http.Request) {
	if m := s.rt.Load().Metrics; m != nil {
		m.Handler().ServeHTTP(w, r)
		return
	}
	notFound(r).WriteOpenAI(w)
}

func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{"status":"ok"}`))
}

func (s *Server) readyz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	if s.draining.Load() || s.rt.Load() == nil {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{"status":"draining"}`))
		return
	}
	_, _ = w.Write([]byte(`{"status":"ready"}`))
}

func (s *Server) models(w http.ResponseWriter, r *http.Request) {
	s.stamp(w, s.now())
	rt := s.rt.Load()
	if rt.Auth != nil {
		if _, err := rt.Auth.Authenticate(r); err != nil {
			llm.AsError(err).WriteOpenAI(w)
			return
		}
	}
	body := rt.ModelList
	if len(rt.Routes.Discovered()) > 0 {
		body = ModelList(rt.Routes) // discovered models change while a runtime lives
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(body)
}

func (s *Server) model(w http.ResponseWriter, r *http.Request) {
	s.stamp(w, s.now())
	rt := s.rt.Load()
	if rt.Auth != nil {
		if _, err := rt.Auth.Authenticate(r); err != nil {
			llm.AsError(err).WriteOpenAI(w)
			return
		}
	}
	id := r.PathValue("id")
	if _, ok := rt.Routes.Lookup(id); !ok {
		llm.ModelNotFound(id).WriteOpenAI(w)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(modelObject(nil, id))
}

// ModelList builds the GET /v1/models body for a route table: the
// configured models, then the discovered ones.
func ModelList(t *route.Table) []byte {
	b := []byte(`{"object":"list","data":[`)
	for i, g := range slices.Concat(t.Groups(), t.Discovered()) {
		if i > 0 {
			b = append(b, ',')
		}
		b = modelObject(b, g.Name)
	}
	return append(b, "]}"...)
}

func modelObject(b []byte, id string) []byte {
	b = append(b, `{"id":`...)
	b = llm.AppendQuote(b, id)
	return append(b, `,"object":"model","created":0,"owned_by":"gatehouse"}`...)
}

// stamp sets the request id and overhead headers of an answer given
// without an exchange (unknown routes, wrong methods) and returns the id.
func (s *Server) stamp(w http.ResponseWriter, start time.Time) string {
	id := reqid.New(start)
	h := w.Header()
	h[hdrRequestID] = []string{id}
	var buf [24]byte
	h[hdrOverhead] = []string{string(appendMillis(buf[:0], s.now().Sub(start)))}
	return id
}

// ctxKey is unexported so nothing outside can collide with it.
type ctxKey struct{}

// RequestID returns the gateway request id carried by ctx, if any.
func RequestID(ctx context.Context) string {
	id, _ := ctx.Value(ctxKey{}).(string)
	return id
}
