package server

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"gatehouse/internal/llm"
	"gatehouse/internal/provider"
	"gatehouse/internal/route"
)

// panicAdapter fails the way a bug in an adapter would.
type panicAdapter struct{}

func (panicAdapter) ChatRequest(context.Context, *provider.Deployment, *llm.ChatRequest) (*http.Request, error) {
	panic("adapter bug")
}
func (panicAdapter) Completion(*http.Response, *provider.Deployment, *llm.ChatRequest) (*llm.Completion, error) {
	panic("unreachable")
}
func (panicAdapter) Stream(*http.Response, *provider.Deployment, *llm.ChatRequest) (llm.Stream, error) {
	panic("unreachable")
}
func (panicAdapter) Error(*http.Response, *provider.Deployment) *llm.Error { panic("unreachable") }

func newTestServer(t *testing.T) (*Server, *bytes.Buffer) {
	t.Helper()
	d := &provider.Deployment{Provider: "p", Type: "openai", Model: "m", Adapter: panicAdapter{}, Client: http.DefaultClient}
	table := route.NewTable([]*route.Group{route.NewGroup("chat", route.Failover, []*provider.Deployment{d}, nil, provider.Timeouts{})})
	var logs bytes.Buffer
	s := New(&Runtime{Routes: table, MaxBodyBytes: 1 << 20, LogRequests: true, ModelList: ModelList(table)},
		slog.New(slog.NewJSONHandler(&logs, nil)))
	return s, &logs
}

func TestPanicBecomesErrorInTheCallersDialect(t *testing.T) {
	s, logs := newTestServer(t)
	h := s.Handler()
	for _, tc := range []struct {
		path, body string
		shape      func(map[string]any) bool
	}{
		{"/v1/chat/completions", `{"model":"chat","messages":[{"role":"user","content":"hi"}]}`,
			func(m map[string]any) bool {
				e, ok := m["error"].(map[string]any)
				return ok && e["type"] == "server_error"
			}},
		{"/v1/messages", `{"model":"chat","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`,
			func(m map[string]any) bool {
				e, ok := m["error"].(map[string]any)
				return ok && m["type"] == "error" && e["type"] == "api_error"
			}},
	} {
		// Twice: the first panic must not take the server down.
		for i := 0; i < 2; i++ {
			rec := httptest.NewRecorder()
			req := httptest.NewRequest(http.MethodPost, tc.path, strings.NewReader(tc.body))
			req.Header.Set("Content-Type", "application/json")
			h.ServeHTTP(rec, req)
			if rec.Code != http.StatusInternalServerError {
				t.Fatalf("%s: status %d, body %s", tc.path, rec.Code, rec.Body)
			}
			var body map[string]any
			if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || !tc.shape(body) {
				t.Fatalf("%s: body %s is not the dialect's error shape", tc.path, rec.Body)
			}
			id := rec.Header().Get("X-Gatehouse-Request-Id")
			if id == "" || !strings.Contains(rec.Body.String(), id) {
				t.Fatalf("%s: the message does not name request %q: %s", tc.path, id, rec.Body)
			}
		}
	}
	if n := strings.Count(logs.String(), `"msg":"panic serving request"`); n != 4 {
		t.Fatalf("%d panic log lines, want 4:\n%s", n, logs)
	}
}

func TestReadyzFailsWhileDraining(t *testing.T) {
	s, _ := newTestServer(t)
	h := s.Handler()
	get := func(path string) int {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec.Code
	}
	if get("/readyz") != http.StatusOK || get("/healthz") != http.StatusOK {
		t.Fatal("not ready before draining")
	}
	s.Drain()
	if get("/readyz") != http.StatusServiceUnavailable {
		t.Fatal("still ready while draining")
	}
	if get("/healthz") != http.StatusOK {
		t.Fatal("not live while draining: the process would be killed before its streams finish")
	}
}
