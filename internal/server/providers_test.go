package server

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"gatehouse/internal/auth"
	"gatehouse/internal/mockllm"
	"gatehouse/internal/provider"
	"gatehouse/internal/provider/openai"
	"gatehouse/internal/route"
)

// TestKeysLimitedToProviders holds a key limited to some providers: a
// model only other providers serve is a 403 in the caller's dialect with
// nothing sent upstream, and failover and fallbacks pass over the
// providers the key may not use instead of calling them.
func TestKeysLimitedToProviders(t *testing.T) {
	// Two upstreams, each counting the requests it gets.
	var calls = map[string]*atomic.Int64{"alpha": {}, "beta": {}}
	url := map[string]string{}
	for name, n := range calls {
		mock := mockllm.New(mockllm.Options{})
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			n.Add(1)
			mock.ServeHTTP(w, r)
		}))
		t.Cleanup(srv.Close)
		url[name] = srv.URL + "/v1"
	}
	dep := func(name, model string, failing bool) *provider.Deployment {
		d := &provider.Deployment{Provider: name, Type: "openai", Model: model, BaseURL: url[name], Adapter: openai.Adapter{},
			Client: http.DefaultClient, Header: http.Header{}}
		if failing {
			d.Header.Set("X-Mock-Error-Status", "503")
		}
		return d
	}
	pool := route.NewPool(route.PoolOptions{})
	group := func(name string, fallbacks []string, ds ...*provider.Deployment) *route.Group {
		return pool.Group(route.Spec{Name: name, Strategy: route.Failover, Targets: ds, Fallbacks: fallbacks,
			Retry: route.Retry{MaxAttempts: 3}})
	}
	table := route.NewTable([]*route.Group{
		group("ab", nil, dep("alpha", "gpt-4o-mini", false), dep("beta", "gpt-4o-mini", false)),
		group("a-fails", nil, dep("alpha", "gpt-4o", true), dep("beta", "gpt-4o", false)),
		group("a-then-b", []string{"b"}, dep("alpha", "gpt-4.1", true)),
		group("b", nil, dep("beta", "gpt-4.1-mini", false)),
		group("embed", nil, dep("alpha", "text-embedding-3-small", false)),
	})
	const keyAlpha, keyBeta, keyNone = "gh-alpha-only", "gh-beta-only", "gh-no-provider"
	key := func(id string, providers ...string) auth.Principal {
		p := auth.Principal{KeyID: id, Project: "qa", Providers: map[string]bool{}}
		for _, n := range providers {
			p.Providers[n] = true
		}
		return p
	}
	rt := &Runtime{
		Routes:       table,
		MaxBodyBytes: 1 << 20,
		ModelList:    ModelList(table),
		Auth: auth.NewStatic([]auth.StaticKey{
			{Secret: keyAlpha, Principal: key("key_alpha", "alpha")},
			{Secret: keyBeta, Principal: key("key_beta", "beta")},
			{Secret: keyNone, Principal: key("key_none", "gamma")},
		}),
	}
	srv := httptest.NewServer(New(rt, slog.New(slog.NewTextHandler(io.Discard, nil))).Handler())
	t.Cleanup(srv.Close)

	chat := func(model string) (string, string) {
		return "/v1/chat/completions", `{"model":"` + model + `","messages":[{"role":"user","content":"hi"}]}`
	}
	anthropic := func(model string) (string, string) {
		return "/v1/messages", `{"model":"` + model + `","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`
	}
	embed := func(model string) (string, string) {
		return "/v1/embeddings", `{"model":"` + model + `","input":"hi"}`
	}
	cases := []struct {
		name     string
		key      string
		req      func(string) (string, string)
		model    string
		status   int
		code     string // the OpenAI error code, when status is not 200
		provider string // who answered, when status is 200
		alpha    int64  // requests each upstream must see
		beta     int64
	}{
		{"no allowed provider, chat", keyNone, chat, "ab", 403, "provider_not_allowed", "", 0, 0},
		{"no allowed provider, messages", keyNone, anthropic, "ab", 403, "", "", 0, 0},
		{"no allowed provider, embeddings", keyNone, embed, "embed", 403, "provider_not_allowed", "", 0, 0},
		{"beta key on a model beta does not serve", keyBeta, chat, "embed", 403, "provider_not_allowed", "", 0, 0},
		{"first target refused is skipped", keyBeta, chat, "ab", 200, "", "beta", 0, 1},
		{"first target refused is skipped, messages", keyBeta, anthropic, "ab", 200, "", "beta", 0, 1},
		{"failover to a refused provider is not tried", keyAlpha, chat, "a-fails", 503, "", "", 3, 0},
		{"fallback to a refused provider is not tried", keyAlpha, chat, "a-then-b", 503, "", "", 3, 0},
		{"fallback reached past a refused target", keyBeta, chat, "a-then-b", 200, "", "beta", 0, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, n := range calls {
				n.Store(0)
			}
			path, body := c.req(c.model)
			req, _ := http.NewRequest(http.MethodPost, srv.URL+path, strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			if path == "/v1/messages" {
				req.Header.Set("X-Api-Key", c.key)
			} else {
				req.Header.Set("Authorization", "Bearer "+c.key)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			raw, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != c.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, c.status, raw)
			}
			if got := [2]int64{calls["alpha"].Load(), calls["beta"].Load()}; got != [2]int64{c.alpha, c.beta} {
				t.Fatalf("upstream requests alpha %d beta %d, want %d and %d", got[0], got[1], c.alpha, c.beta)
			}
			if c.status == 200 {
				if got := resp.Header.Get("X-Gatehouse-Provider"); got != c.provider {
					t.Fatalf("answered by %q, want %q", got, c.provider)
				}
				return
			}
			var e struct {
				Type  string `json:"type"`
				Error struct {
					Type    string `json:"type"`
					Code    string `json:"code"`
					Message string `json:"message"`
				} `json:"error"`
			}
			if err := json.Unmarshal(raw, &e); err != nil {
				t.Fatalf("not JSON: %s", raw)
			}
			if path == "/v1/messages" {
				if e.Type != "error" || e.Error.Type != "permission_error" || !strings.Contains(e.Error.Message, "provider") {
					t.Fatalf("not Anthropic's permission error naming providers: %s", raw)
				}
				return
			}
			if c.code != "" && (e.Error.Code != c.code || !strings.Contains(e.Error.Message, "'"+c.model+"'")) {
				t.Fatalf("code %q, want %q naming the model: %s", e.Error.Code, c.code, raw)
			}
		})
	}
}
