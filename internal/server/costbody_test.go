package server

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"gatehouse/internal/auth"
	"gatehouse/internal/limit"
	"gatehouse/internal/provider"
	"gatehouse/internal/provider/openai"
	"gatehouse/internal/route"
	"gatehouse/internal/tokens"
)

// TestCostWrittenIntoUsage: a limited key's non-streamed answer is the
// upstream's body with the cost (the x-gatehouse-cost-usd header's value) in
// its usage object, byte for byte, however the usage object looks and
// whether or not the answer is over the size net/http frames itself; a
// body over it carries its Content-Length, the spliced body's.
func TestCostWrittenIntoUsage(t *testing.T) {
	long := strings.Repeat("All work and no play. ", 150) // the answer over autoContentLength
	for _, tc := range []struct{ name, answer, want string }{
		{"members", `{"choices":[{"message":{"role":"assistant","content":"hi"}}],"usage":{"prompt_tokens":75,"completion_tokens":20}}`,
			`{"choices":[{"message":{"role":"assistant","content":"hi"}}],"usage":{"prompt_tokens":75,"completion_tokens":20,"cost":COST}}`},
		{"cost replaced", `{"choices":[{"message":{"role":"assistant","content":"hi"}}],"usage":{"prompt_tokens":75,"cost":9.5,"completion_tokens":20},"x":1}`,
			`{"choices":[{"message":{"role":"assistant","content":"hi"}}],"usage":{"prompt_tokens":75,"cost":COST,"completion_tokens":20},"x":1}`},
		{"long", `{"choices":[{"message":{"role":"assistant","content":"` + long + `"}}],"usage":{"prompt_tokens":75,"completion_tokens":20},"z":{}}`,
			`{"choices":[{"message":{"role":"assistant","content":"` + long + `"}}],"usage":{"prompt_tokens":75,"completion_tokens":20,"cost":COST},"z":{}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := &provider.Deployment{Provider: "up", Type: "openai", Model: "m", BaseURL: "http://upstream.invalid/v1",
				Adapter: openai.Adapter{}, Client: &http.Client{Transport: cannedUpstream{tc.answer}}}
			table := route.NewTable([]*route.Group{route.NewGroup("chat", route.Failover, []*provider.Deployment{d}, nil, provider.Timeouts{})})
			rt := &Runtime{Routes: table, MaxBodyBytes: 1 << 20, ModelList: ModelList(table)}
			s := New(rt, slog.New(slog.DiscardHandler))
			e, err := limit.NewEmbedded(context.Background(), limit.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = e.Close(context.Background()) })
			prices, err := tokens.NewCatalog(tokens.CatalogOptions{Overrides: map[string]tokens.Price{"m": tokens.PerMillion(1000, 2000, 1000)}})
			if err != nil {
				t.Fatal(err)
			}
			rt.Auth = auth.NewStatic([]auth.StaticKey{{Secret: "gh-test", Principal: auth.Principal{KeyID: "key1", Project: "p",
				RPM: 1000, Budget: &auth.Budget{USD: 1000, Period: "total"}}}})
			rt.Limits = &Limits{Admitter: e, Prices: prices}
			req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(`{"model":"chat","messages":[{"role":"user","content":"hello"}]}`))
			req.Header.Set("Authorization", "Bearer gh-test")
			w := httptest.NewRecorder()
			s.Handler().ServeHTTP(w, req)
			if w.Code != http.StatusOK {
				t.Fatalf("status %d: %s", w.Code, w.Body)
			}
			cost := w.Header().Get(hdrCost)
			if cost == "" || cost == "0" {
				t.Fatalf("%s %q, want the answer's cost", hdrCost, cost)
			}
			want := strings.Replace(tc.want, "COST", cost, 1)
			if got := w.Body.String(); got != want {
				t.Fatalf("body\n%s\nwant\n%s", got, want)
			}
			cl := w.Header().Get("Content-Length")
			if len(want) > autoContentLength && cl != strconv.Itoa(len(want)) {
				t.Fatalf("Content-Length %q for a body of %d bytes", cl, len(want))
			}
			if len(want) <= autoContentLength && cl != "" {
				t.Fatalf("Content-Length %q set for a body of %d bytes, which net/http frames itself", cl, len(want))
			}
		})
	}
}
