package server

import (
	"context"
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"gatehouse/internal/auth"
	"gatehouse/internal/cache"
	"gatehouse/internal/h1"
	"gatehouse/internal/limit"
	"gatehouse/internal/llm"
	"gatehouse/internal/metrics"
	"gatehouse/internal/mockllm"
	"gatehouse/internal/openapitest"
	"gatehouse/internal/provider"
	"gatehouse/internal/provider/anthropic"
	"gatehouse/internal/provider/openai"
	"gatehouse/internal/route"
	"gatehouse/internal/tokens"
)

// These tests hold the client API to docs/openapi.yaml, as
// internal/admin's hold the admin API: the routes Handler registers and
// the document's paths must agree, and real answers of every operation —
// bodies, stream events, headers and statuses — must match what the
// document says.

func loadSpec(t *testing.T) *openapitest.Spec {
	t.Helper()
	s, err := openapitest.Load("../../docs/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// The headers gatehouse sets itself: each must be documented where
	// it is sent.
	s.Headers = []string{"x-gatehouse-", "x-ratelimit-", "retry-after", "request-id", "allow"}
	return s
}

// catchAlls are the patterns Handler registers that are no operation of
// their own, with the error schema of their answer ("" for /admin/,
// which internal/admin's tests hold to the document).
var catchAlls = map[string]string{
	"/":             "#/components/schemas/Error",
	"/v1/messages/": "#/components/schemas/AnthropicError",
	"/admin/":       "",
	"/ui":           "", // the dashboard: internal/ui's tests hold /ui/api/… to the document
	"/ui/":          "",
}

// heldElsewhere says whether the document's path belongs to a handler
// the server only mounts, whose own tests hold it to the document: the
// admin API (internal/admin) and the dashboard's session (internal/ui).
func heldElsewhere(tpl string) bool {
	return strings.HasPrefix(tpl, "/admin/") || strings.HasPrefix(tpl, "/ui/")
}

// servedRoutes reads the routes Handler registers from server.go: each
// mux.HandleFunc's pattern, and the method its only/onlyIn wrapper
// allows ("" for a handler of every method). Reading the source keeps
// Handler as it is; a route added there is found here.
func servedRoutes(t *testing.T) map[string][]string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "server.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	routes := map[string][]string{}
	for _, d := range f.Decls {
		fn, ok := d.(*ast.FuncDecl)
		if !ok || fn.Name.Name != "Handler" || fn.Recv == nil {
			continue
		}
		ast.Inspect(fn.Body, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) != 2 {
				return true
			}
			if sel, ok := call.Fun.(*ast.SelectorExpr); !ok || sel.Sel.Name != "HandleFunc" {
				return true
			}
			lit, ok := call.Args[0].(*ast.BasicLit)
			if !ok {
				t.Fatalf("a HandleFunc pattern that is not a literal: %#v", call.Args[0])
			}
			pattern, _ := strconv.Unquote(lit.Value)
			var methods []string
			if wrap, ok := call.Args[1].(*ast.CallExpr); ok {
				// only(http.MethodPost, …), or methods(map…{http.MethodGet: …}).
				ast.Inspect(wrap, func(n ast.Node) bool {
					if sel, ok := n.(*ast.SelectorExpr); ok && strings.HasPrefix(sel.Sel.Name, "Method") {
						methods = append(methods, strings.ToUpper(strings.TrimPrefix(sel.Sel.Name, "Method")))
					}
					return true
				})
			}
			routes[pattern] = methods
			return false
		})
	}
	if len(routes) < 5 {
		t.Fatalf("found only %d routes in Handler: %v", len(routes), routes)
	}
	return routes
}

// TestOpenAPIRoutes: every route Handler serves is documented (or is a
// catch-all answering 404), every documented path outside /admin/ is
// served by its own route, and the router sends it there.
func TestOpenAPIRoutes(t *testing.T) {
	spec := loadSpec(t)
	documented := map[string]bool{}
	admin := 0
	for _, op := range spec.Operations() {
		if _, tpl, _ := strings.Cut(op, " "); heldElsewhere(tpl) {
			admin++
			continue
		}
		documented[op] = true
	}
	if admin == 0 {
		t.Error("the document has no /admin/ operation, yet Handler serves /admin/")
	}
	served := map[string]string{} // "METHOD /template" → mux pattern
	for pattern, methods := range servedRoutes(t) {
		if len(methods) == 0 {
			if _, ok := catchAlls[pattern]; !ok {
				t.Errorf("Handler serves %s for every method: document it, or add it to catchAlls", pattern)
			}
			continue
		}
		tpl := strings.ReplaceAll(pattern, "...}", "}")
		for _, method := range methods {
			served[method+" "+tpl] = pattern
		}
	}
	for op := range served {
		if !documented[op] {
			t.Errorf("served but not documented: %s", op)
		}
	}
	s, _ := newTestServer(t)
	mux, ok := s.Handler().(*http.ServeMux)
	if !ok {
		t.Fatalf("Handler is a %T, not a *http.ServeMux", s.Handler())
	}
	for op := range documented {
		pattern, ok := served[op]
		if !ok {
			t.Errorf("documented but not served: %s", op)
			continue
		}
		method, tpl, _ := strings.Cut(op, " ")
		path := strings.ReplaceAll(tpl, "{id}", "resp_1")
		if strings.HasSuffix(pattern, "...}") {
			path = strings.ReplaceAll(tpl, "{id}", "org/model") // model ids may hold a slash
		}
		if _, got := mux.Handler(httptest.NewRequest(method, path, nil)); got != pattern {
			t.Errorf("%s %s routes to %q, want %q", method, path, got, pattern)
		}
	}
	// The catch-alls answer 404 in their dialect's documented shape.
	for pattern, schema := range catchAlls {
		if schema == "" {
			continue
		}
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, pattern+"nothing/here", strings.NewReader("{}")))
		if rec.Code != http.StatusNotFound {
			t.Errorf("%snothing/here: status %d, want 404", pattern, rec.Code)
		}
		for _, p := range spec.ValidateJSON(schema, rec.Body.Bytes(), pattern+"nothing/here") {
			t.Error(p)
		}
	}
}

// apiEnv is a Server in front of the mockllm emulator, with keys, limits,
// budgets, the exact cache and metrics on, over real loopback HTTP.
type apiEnv struct {
	t    *testing.T
	spec *openapitest.Spec
	s    *Server
	url  string
	// seen holds "METHOD /template key" of every answer checked, key
	// being the documented response it matched ("200", "4XX" …).
	seen map[string]bool
	// stored keeps the responses created with store: true.
	stored *memResponses
}

// Keys of the environment.
const (
	keyMain     = "k-main"      // generous rates, a total budget, project with a customer store
	keyOneOpen  = "k-one-oa"    // one request per minute (OpenAI routes)
	keyOneAnth  = "k-one-an"    // one request per minute (Anthropic routes)
	keyChatOnly = "k-chat-only" // may use "chat" only
)

// customers is the CustomerLookup of the environment: "cust-broke" is
// over budget and downgraded to "cheap", "cust-blocked" over budget and
// refused.
type customers struct{}

func (customers) Lookup(_ context.Context, _, id string) (*auth.Customer, error) {
	tiny := 0.0000001
	switch id {
	case "cust-broke":
		return &auth.Customer{ID: "cus_broke", ExternalID: id, DailyUSD: &tiny, OnExceed: auth.OnExceedDowngrade, DowngradeModel: "cheap"}, nil
	case "cust-blocked":
		return &auth.Customer{ID: "cus_blocked", ExternalID: id, DailyUSD: &tiny, OnExceed: auth.OnExceedBlock}, nil
	}
	return nil, nil
}

// failingAuth answers every request with its error; panicking panics,
// as a bug in an authenticator would.
type failingAuth struct {
	err   error
	panic bool
}

func (a failingAuth) Authenticate(*http.Request) (*auth.Principal, error) {
	if a.panic {
		panic("authenticator bug")
	}
	return nil, a.err
}

func newAPIEnv(t *testing.T, engine string) *apiEnv {
	t.Helper()
	up := httptest.NewServer(mockllm.New(mockllm.Options{}))
	t.Cleanup(up.Close)
	reasoner := httptest.NewServer(http.HandlerFunc(reasonerModel))
	t.Cleanup(reasoner.Close)
	// A deployment of the emulator; mock are X-Mock-* headers, sent
	// upstream with every request, that make it fail.
	dep := func(adapter provider.Adapter, model string, mock ...string) *provider.Deployment {
		d := &provider.Deployment{Provider: "up", Type: "openai", Model: model, BaseURL: up.URL + "/v1", Adapter: adapter,
			Client: up.Client(), StreamUsage: true, Header: http.Header{}}
		if _, ok := adapter.(anthropic.Adapter); ok {
			d.Provider, d.Type, d.BaseURL, d.APIKey = "anth", "anthropic", up.URL, "sk-test"
		}
		for i := 0; i+1 < len(mock); i += 2 {
			d.Header.Set(mock[i], mock[i+1])
		}
		return d
	}
	group := func(name string, d *provider.Deployment, timeouts provider.Timeouts) *route.Group {
		// A pool of its own, as deployments of one provider and model
		// share a pool's backend; one attempt, so failures are answered
		// at once, without backoff.
		return route.NewPool(route.PoolOptions{}).Group(route.Spec{Name: name, Strategy: route.Failover,
			Targets: []*provider.Deployment{d}, Timeouts: timeouts, Retry: route.Retry{MaxAttempts: 1}})
	}
	thinks := dep(openai.Adapter{}, "gpt-4o-mini")
	thinks.Provider, thinks.BaseURL, thinks.Client = "reasoner", reasoner.URL+"/v1", reasoner.Client()
	down := dep(openai.Adapter{}, "gpt-4o-mini")
	down.BaseURL, down.Client = "http://127.0.0.1:1/v1", &http.Client{}
	slow := provider.Timeouts{FirstByte: 100 * time.Millisecond}
	// broken answers a stream's headers and breaks off before its first
	// event: an attempt that fails after the gateway set its fields.
	brokenUp := httptest.NewServer(http.HandlerFunc(brokenStream))
	t.Cleanup(brokenUp.Close)
	broken := dep(openai.Adapter{}, "gpt-4o-mini")
	broken.Provider, broken.BaseURL, broken.Client = "broken", brokenUp.URL+"/v1", brokenUp.Client()
	twoTargets := route.NewPool(route.PoolOptions{}).Group(route.Spec{Name: "stream-failover", Strategy: route.Failover,
		Targets: []*provider.Deployment{broken, dep(openai.Adapter{}, "gpt-4o-mini")}, Retry: route.Retry{MaxAttempts: 2}})
	const chatModel, embedModel = "gpt-4o-mini", "text-embedding-3-small"
	table := route.NewTable([]*route.Group{
		group("chat", dep(openai.Adapter{}, chatModel), provider.Timeouts{}),
		group("cheap", dep(openai.Adapter{}, chatModel), provider.Timeouts{}),
		group("org/model", dep(openai.Adapter{}, chatModel), provider.Timeouts{}),
		group("claude", dep(anthropic.Adapter{}, "claude-3-5-haiku-latest"), provider.Timeouts{}),
		group("thinker", thinks, provider.Timeouts{}),
		group("embed", dep(openai.Adapter{}, embedModel), provider.Timeouts{}),
		group("unpriced", dep(openai.Adapter{}, "unpriced-model-x"), provider.Timeouts{}),
		group("down", down, provider.Timeouts{}),
		group("stream-broken", broken, provider.Timeouts{}),
		twoTargets,
		group("slow", dep(openai.Adapter{}, chatModel, "X-Mock-Latency", "2s", "X-Mock-Ttft", "2s"), slow),
		group("cut", dep(openai.Adapter{}, chatModel, "X-Mock-Fail-After", "2"), provider.Timeouts{}),
		group("fail-422", dep(openai.Adapter{}, chatModel, "X-Mock-Error-Status", "422"), provider.Timeouts{}),
		group("fail-503", dep(openai.Adapter{}, chatModel, "X-Mock-Error-Status", "503", "X-Mock-Retry-After", "7"), provider.Timeouts{}),
		group("fail-529", dep(openai.Adapter{}, chatModel, "X-Mock-Error-Status", "529"), provider.Timeouts{}),
		group("embed-slow", dep(openai.Adapter{}, embedModel, "X-Mock-Latency", "2s"), slow),
		group("embed-422", dep(openai.Adapter{}, embedModel, "X-Mock-Error-Status", "422"), provider.Timeouts{}),
		group("embed-503", dep(openai.Adapter{}, embedModel, "X-Mock-Error-Status", "503"), provider.Timeouts{}),
		group("embed-529", dep(openai.Adapter{}, embedModel, "X-Mock-Error-Status", "529"), provider.Timeouts{}),
	})
	admitter, err := limit.NewEmbedded(context.Background(), limit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admitter.Close(context.Background()) })
	prices, err := tokens.NewCatalog(tokens.CatalogOptions{Overrides: map[string]tokens.Price{
		chatModel: tokens.PerMillion(0.15, 0.075, 0.6), "claude-3-5-haiku-latest": tokens.PerMillion(0.8, 0.08, 4),
		embedModel: tokens.PerMillion(0.02, 0.02, 0)}})
	if err != nil {
		t.Fatal(err)
	}
	respCache := cache.New(cache.Options{MaxBytes: 1 << 20})
	t.Cleanup(respCache.Close)
	budget := &auth.Budget{USD: 1000, Period: "total"}
	stored := newMemResponses()
	rt := &Runtime{
		Routes:       table,
		MaxBodyBytes: 64 << 10,
		ModelList:    ModelList(table),
		Auth: auth.NewStatic([]auth.StaticKey{
			{Secret: keyMain, Principal: auth.Principal{KeyID: "key_main", Name: "main", Project: "qa", ProjectID: "proj_qa",
				RPM: 100000, TPM: 100000000, Budget: budget}},
			{Secret: keyOneOpen, Principal: auth.Principal{KeyID: "key_one_oa", Project: "qa", RPM: 1}},
			{Secret: keyOneAnth, Principal: auth.Principal{KeyID: "key_one_an", Project: "qa", RPM: 1}},
			{Secret: keyChatOnly, Principal: auth.Principal{KeyID: "key_chat", Project: "qa", Models: map[string]bool{"chat": true}}},
		}),
		Limits:    &Limits{Admitter: admitter, Prices: prices, Customers: customers{}},
		Metrics:   metrics.New(),
		Caching:   &Caching{Cache: respCache, Enabled: true, TTL: time.Hour, MaxEntryBytes: 1 << 18},
		Responses: stored,
	}
	s := New(rt, slog.New(slog.NewTextHandler(io.Discard, nil)))
	url := serveOn(t, engine, s.Handler())
	return &apiEnv{t: t, spec: loadSpec(t), s: s, url: url, seen: map[string]bool{}, stored: stored}
}

// engines are the HTTP/1 servers gatehouse serve runs on
// (server.http1_engine): the exchange hands its header fields to
// gatehouse's own as lines (h1.FieldWriter), to net/http's through the map.
var engines = []string{"gatehouse", "net/http"}

// serveOn serves h on a loopback port with the engine named and returns
// its URL.
func serveOn(t *testing.T, engine string, h http.Handler) string {
	t.Helper()
	if engine == "net/http" {
		srv := httptest.NewServer(h)
		t.Cleanup(srv.Close)
		return srv.URL
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &h1.Server{Handler: h, NotePrefix: FieldPrefix, ErrorLog: log.New(io.Discard, "", 0)} // as gatehouse serve runs it
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + ln.Addr().String()
}

// brokenStream starts a stream, headers and all, and breaks the
// connection before its first event.
func brokenStream(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	w.(http.Flusher).Flush()
	panic(http.ErrAbortHandler)
}

// reasonerModel is an OpenAI-compatible upstream whose answers carry
// visible reasoning and its signature (as DeepSeek and vLLM send
// reasoning_content), which the emulator does not produce: what
// Anthropic thinking blocks and their deltas are made from.
func reasonerModel(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Stream bool `json:"stream"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	const head = `{"id":"chatcmpl-r1","object":"chat.completion.chunk","created":1700000000,"model":"reasoner-1","choices":`
	const usage = `{"prompt_tokens":9,"completion_tokens":7,"total_tokens":16,"completion_tokens_details":{"reasoning_tokens":4}}`
	if !req.Stream {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"chatcmpl-r1","object":"chat.completion","created":1700000000,"model":"reasoner-1",`+
			`"choices":[{"index":0,"message":{"role":"assistant","content":"Four.","reasoning_content":"Two and two.",`+
			`"reasoning_signature":"sig-1"},"finish_reason":"stop"}],"usage":`+usage+`}`)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	for _, data := range []string{
		head + `[{"index":0,"delta":{"role":"assistant","reasoning_content":"Two and"},"finish_reason":null}]}`,
		head + `[{"index":0,"delta":{"reasoning_content":" two."},"finish_reason":null}]}`,
		head + `[{"index":0,"delta":{"reasoning_signature":"sig-1"},"finish_reason":null}]}`,
		head + `[{"index":0,"delta":{"content":"Four."},"finish_reason":null}]}`,
		head + `[{"index":0,"delta":{},"finish_reason":"stop"}]}`,
		head + `[],"usage":` + usage + `}`,
		"[DONE]",
	} {
		_, _ = io.WriteString(w, "data: "+data+"\n\n")
	}
}

// answer is one response, read whole; trailers are merged into header,
// where the document describes them.
type answer struct {
	status int
	header http.Header
	body   []byte
}

// do sends a request and checks the answer against the document.
func (e *apiEnv) do(method, path string, header http.Header, body string) *answer {
	e.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, e.url+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatalf("%s %s: reading the body: %v", method, path, err)
	}
	a := &answer{status: resp.StatusCode, header: resp.Header.Clone(), body: raw}
	for k, vs := range resp.Header {
		if len(vs) > 1 && gatehouseField(k) {
			e.t.Errorf("%s %s: %s sent %d times: %q", method, path, k, len(vs), vs)
		}
	}
	for k, vs := range resp.Trailer {
		a.header[k] = vs
	}
	e.check(method, path, a)
	return a
}

// gatehouseField reports whether the gateway sets field k itself, once
// an answer (as a line handed to the engine, or in the map).
func gatehouseField(k string) bool {
	return strings.HasPrefix(k, "X-Gatehouse-") || strings.HasPrefix(k, "X-Ratelimit-") ||
		k == "Request-Id" || k == "Content-Type" || k == "Content-Length" || k == "Retry-After"
}

// check holds an answer to the document and notes which documented
// response it was.
func (e *apiEnv) check(method, path string, a *answer) {
	e.t.Helper()
	if id, ok := strings.CutPrefix(path, "/v1/models/"); ok && strings.Contains(id, "/") {
		path = "/v1/models/{id}" // the id is the rest of the path, slashes and all
	}
	for _, p := range e.spec.Check(method, path, a.status, a.header, a.body) {
		e.t.Errorf("openapi: %s\n\tbody: %.600s", p, a.body)
	}
	if tpl, ok := e.spec.Template(path); ok {
		switch _, key := e.spec.Response(method, path, a.status); key {
		case "":
		case "x-method-not-allowed":
			e.seen["* "+tpl+" "+key] = true
		default:
			e.seen[method+" "+tpl+" "+key] = true
		}
	}
}

// hdr builds a header from name, value pairs.
func hdr(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

func bearer(key string, kv ...string) http.Header {
	return hdr(append([]string{"Authorization", "Bearer " + key}, kv...)...)
}

func apiKey(key string, kv ...string) http.Header {
	return hdr(append([]string{"X-Api-Key", key}, kv...)...)
}

// unexercised reports the documented responses of the client API no
// answer has matched, so a status documented is a status seen.
func (e *apiEnv) unexercised() []string {
	var missing []string
	for _, op := range e.spec.Operations() {
		method, tpl, _ := strings.Cut(op, " ")
		if heldElsewhere(tpl) {
			continue
		}
		for _, key := range e.spec.Statuses(method, tpl) {
			if !e.seen[op+" "+key] {
				missing = append(missing, op+" "+key)
			}
		}
		if e.spec.MethodNotAllowed(tpl) && !e.seen["* "+tpl+" x-method-not-allowed"] {
			missing = append(missing, tpl+" x-method-not-allowed")
		}
	}
	slices.Sort(missing)
	return slices.Compact(missing)
}

// unavailableError is the 503 a key store gives when it cannot answer.
func unavailableError() error {
	return &llm.Error{Kind: llm.KindUnavailable, Status: http.StatusServiceUnavailable, Type: "server_error",
		Code: "auth_unavailable", Message: "API keys cannot be checked right now.", RetryAfter: time.Second}
}
