package server

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"gatehouse/internal/auth"
	"gatehouse/internal/limit"
	"gatehouse/internal/llm"
	"gatehouse/internal/mockllm"
	"gatehouse/internal/provider"
	"gatehouse/internal/provider/openai"
	"gatehouse/internal/route"
	"gatehouse/internal/tokens"
)

// TestSettlePriceReusesAdmissions: the answer's cost takes the price
// admission found when the deployment it was found for answers under the
// same prices, and looks it up for any other deployment, or after the
// prices changed.
func TestSettlePriceReusesAdmissions(t *testing.T) {
	store := &tokens.Overlay{}
	store.Set(map[string]tokens.Price{"m": tokens.PerMillion(1, 0, 1), "m2": tokens.PerMillion(2, 0, 2)})
	prices, err := tokens.NewCatalog(tokens.CatalogOptions{Store: store})
	if err != nil {
		t.Fatal(err)
	}
	x := &exchange{rt: &Runtime{Limits: &Limits{Prices: prices}}}
	d := &provider.Deployment{Provider: "a", Model: "m"}
	other := &provider.Deployment{Provider: "b", Model: "m2"}
	kept := tokens.PerMillion(7, 0, 7) // not m's price: told apart from a look-up
	x.adm.price, x.adm.priced, x.adm.priceAt, x.adm.priceGen = kept, true, d, prices.Generation()

	if p, ok := x.settlePrice(d); !ok || p != kept {
		t.Errorf("the deployment admission priced at: %+v %v, want admission's %+v", p, ok, kept)
	}
	if p, ok := x.settlePrice(other); !ok || p != tokens.PerMillion(2, 0, 2) {
		t.Errorf("another deployment: %+v %v, want its own price", p, ok)
	}
	if p, ok := x.settlePrice(&provider.Deployment{Provider: "a", Model: "unpriced"}); ok {
		t.Errorf("a deployment of a model with no price: %+v, want none", p)
	}
	store.Set(map[string]tokens.Price{"m": tokens.PerMillion(3, 0, 3)})
	if p, ok := x.settlePrice(d); !ok || p != tokens.PerMillion(3, 0, 3) {
		t.Errorf("after a price change: %+v %v, want the new price", p, ok)
	}
	x.adm.priced = false // admission found none: with unchanged prices, still none
	x.adm.priceGen = prices.Generation()
	if p, ok := x.settlePrice(d); ok {
		t.Errorf("admission found no price: %+v, want none", p)
	}
}

// TestAnswerCostPrice: through the server, an answer costs its usage at
// the price of the deployment that answered (a failover's own, not the
// primary's the reservation was priced at), and at the price in force
// when it ends (one the admin API set while it ran).
func TestAnswerCostPrice(t *testing.T) {
	store := &tokens.Overlay{}
	initial := map[string]tokens.Price{"gpt-4o": tokens.PerMillion(1, 0, 1), "gpt-4.1": tokens.PerMillion(5, 0, 5)}
	store.Set(initial)
	prices, err := tokens.NewCatalog(tokens.CatalogOptions{Store: store})
	if err != nil {
		t.Fatal(err)
	}
	mock := mockllm.New(mockllm.Options{})
	raise := false // the upstream changes gpt-4o's price while it answers
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if raise {
			store.Set(map[string]tokens.Price{"gpt-4o": tokens.PerMillion(3, 0, 3), "gpt-4.1": tokens.PerMillion(5, 0, 5)})
		}
		mock.ServeHTTP(w, r)
	}))
	t.Cleanup(up.Close)
	dep := func(name, model string, failing bool) *provider.Deployment {
		d := &provider.Deployment{Provider: name, Type: "openai", Model: model, BaseURL: up.URL + "/v1", Adapter: openai.Adapter{},
			Client: http.DefaultClient, Header: http.Header{}}
		if failing {
			d.Header.Set("X-Mock-Error-Status", "503")
		}
		return d
	}
	pool := route.NewPool(route.PoolOptions{})
	table := route.NewTable([]*route.Group{
		pool.Group(route.Spec{Name: "one", Strategy: route.Failover, Targets: []*provider.Deployment{dep("alpha", "gpt-4o", false)}}),
		pool.Group(route.Spec{Name: "failover", Strategy: route.Failover, Retry: route.Retry{MaxAttempts: 2},
			Targets: []*provider.Deployment{dep("down", "gpt-4o", true), dep("beta", "gpt-4.1", false)}}),
	})
	e, _ := embeddedLimits(t)
	rt := &Runtime{Routes: table, MaxBodyBytes: 1 << 20, ModelList: ModelList(table),
		Limits: &Limits{Admitter: e, Prices: prices},
		Auth: auth.NewStatic([]auth.StaticKey{{Secret: "k", Principal: auth.Principal{KeyID: "key1", Project: "p", RPM: 100,
			Budget: &auth.Budget{USD: 10, Period: "total"}}}})}
	srv := httptest.NewServer(New(rt, slog.New(slog.NewTextHandler(io.Discard, nil))).Handler())
	t.Cleanup(srv.Close)

	for _, tc := range []struct {
		name, model string
		raise       bool
		want        tokens.Price
	}{
		{"same deployment, same prices", "one", false, tokens.PerMillion(1, 0, 1)},
		{"failover to another deployment", "failover", false, tokens.PerMillion(5, 0, 5)},
		{"price changed while it ran", "one", true, tokens.PerMillion(3, 0, 3)},
	} {
		store.Set(initial)
		raise = tc.raise
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/chat/completions",
			strings.NewReader(`{"model":"`+tc.model+`","max_tokens":50,"messages":[{"role":"user","content":"hello there"}]}`))
		req.Header.Set("Authorization", "Bearer k")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Fatalf("%s: status %d: %s", tc.name, res.StatusCode, body)
		}
		var answer struct {
			Usage struct {
				Prompt     int `json:"prompt_tokens"`
				Completion int `json:"completion_tokens"`
			}
		}
		if err := json.Unmarshal(body, &answer); err != nil || answer.Usage.Prompt == 0 {
			t.Fatalf("%s: no usage in %s (%v)", tc.name, body, err)
		}
		u := llm.Usage{PromptTokens: answer.Usage.Prompt, CompletionTokens: answer.Usage.Completion}
		want := limit.Micros(tc.want.Cost(u)).String()
		if got := res.Header.Get(hdrCost); got != want {
			t.Errorf("%s: cost %s, want %s (usage %+v)", tc.name, got, want, u)
		}
	}
}
