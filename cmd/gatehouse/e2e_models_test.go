package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"gatehouse/internal/mockllm"
)

// GET /admin/models end to end: the routing state an operator sees while
// one deployment fails, a health check fails, a request is held
// upstream, and the config is reloaded.

// adminModels reads GET /admin/models as the admin, by model name, and
// returns the raw answer too.
func adminModels(t *testing.T, gw *testGateway) (map[string]routedModel, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, gw.URL+"/admin/models", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testAdminKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /admin/models: %d %s", resp.StatusCode, raw)
	}
	var body struct{ Data []routedModel }
	if err := json.Unmarshal(raw, &body); err != nil {
		t.Fatalf("GET /admin/models: %v: %s", err, raw)
	}
	out := map[string]routedModel{}
	for _, m := range body.Data {
		out[m.Model] = m
	}
	return out, string(raw)
}

// holdServer is a mockllm whose chat answers wait until release is
// closed, announcing each arrival on arrived.
func holdServer(t *testing.T) (url string, arrived, release chan struct{}) {
	t.Helper()
	mock := mockllm.New(mockllm.Options{APIKey: upstreamKey})
	arrived, release = make(chan struct{}, 8), make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/chat/completions" {
			arrived <- struct{}{}
			select {
			case <-release:
			case <-r.Context().Done():
				return
			}
		}
		mock.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, arrived, release
}

func TestAdminModelsShowsRouting(t *testing.T) {
	flaky := startBackend(t, mockllm.Options{})
	steady := startBackend(t, mockllm.Options{})
	sick := startBackend(t, mockllm.Options{})
	sick.broken.Store(true) // its health endpoint answers 503 too
	slowURL, arrived, release := holdServer(t)
	var released bool
	t.Cleanup(func() {
		if !released {
			close(release)
		}
	})
	cfg := `listen: 127.0.0.1:0
admin_key: ` + testAdminKey + `
providers:
  - {name: flaky, type: openai-compatible, base_url: ` + flaky.URL + `/v1, api_key: ` + upstreamKey + `}
  - name: steady
    type: openai-compatible
    base_url: ` + steady.URL + `/v1
    api_key: ` + upstreamKey + `
    health_check: {path: /metrics, interval: 100ms}   # mockllm answers it without a key
  - name: sick
    type: openai-compatible
    base_url: ` + sick.URL + `/v1
    api_key: ` + upstreamKey + `
    health_check: {path: /health, interval: 100ms}
  - {name: slow, type: openai-compatible, base_url: ` + slowURL + `/v1, api_key: ` + upstreamKey + `}
keys:
  - {key: ` + clientKey + `, name: tester, project: qa}
breaker: {failures: 2, cooldown: 1h}
models:
  - name: m
    strategy: failover
    targets: [{provider: flaky, model: gpt-4o-mini}, {provider: steady, model: gpt-4o-mini}]
  - name: side
    strategy: weighted
    targets: [{provider: steady, model: gpt-4o-mini, weight: 3}, {provider: sick, model: gpt-4o-mini, weight: 1}]
  - name: held
    targets: [{provider: slow, model: gpt-4o}]
`
	gw := startGateway(t, cfg)

	// The failing deployment: two failures open its breaker, for an hour.
	flaky.broken.Store(true)
	opened := time.Now()
	for range 2 {
		got, resp, err := chatWith(t, gw, "m", "x")
		wantAnswer(t, got, resp, err, "steady", "2")
	}
	models, raw := adminModels(t, gw)
	if strings.Contains(raw, upstreamKey) || strings.Contains(raw, flaky.URL) {
		t.Fatalf("/admin/models shows the upstream key or URL: %s", raw)
	}
	m := models["m"]
	if m.Strategy != "failover" || m.Discovered || len(m.Deployments) != 2 {
		t.Fatalf("model m: %s", raw)
	}
	f, s := m.Deployments[0], m.Deployments[1]
	if f.Provider != "flaky" || f.Model != "gpt-4o-mini" || f.Breaker.State != "open" || f.Breaker.Until == nil ||
		f.Attempts != 2 || f.Failures != 2 || f.ErrorRate == nil || *f.ErrorRate != 1 {
		t.Fatalf("the failing deployment's breaker is not shown open: %+v", f)
	}
	if until := f.Breaker.Until.Sub(opened); until < 59*time.Minute || until > time.Hour+time.Minute {
		t.Fatalf("open until %v, want an hour after %v", f.Breaker.Until, opened)
	}
	if s.Provider != "steady" || s.Breaker.State != "closed" || s.LatencyMS == nil || s.Attempts != 2 || s.Failures != 0 {
		t.Fatalf("the steady deployment: %+v", s)
	}

	// Health checks: steady's passes, sick's fails twice and takes it out.
	waitFor(t, 30*time.Second, "the health checks' verdicts", func() bool {
		models, _ = adminModels(t, gw)
		side := models["side"].Deployments
		return len(side) == 2 && side[0].HealthChecked && !side[0].Down && side[1].HealthChecked && side[1].Down
	})
	if f := models["m"].Deployments[0]; f.HealthChecked || f.Down {
		t.Fatalf("flaky has no health check, yet: %+v", f)
	}

	// A request held upstream is in flight until it ends.
	done := make(chan outcome, 1)
	go func() { done <- chatOnce(context.Background(), gw.client(), "held") }()
	<-arrived
	models, _ = adminModels(t, gw)
	if h := models["held"].Deployments[0]; h.InFlightRequests != 1 || h.InFlightTokens <= 0 {
		t.Fatalf("in flight while held: %+v", h)
	}
	close(release)
	released = true
	if o := <-done; o.status != 200 {
		t.Fatalf("held request: %d %s", o.status, o.msg)
	}
	waitFor(t, 30*time.Second, "the held request's release", func() bool {
		models, _ = adminModels(t, gw)
		h := models["held"].Deployments[0]
		return h.InFlightRequests == 0 && h.InFlightTokens == 0
	})

	// The CLI shows the same.
	out, stderr, err := cliRun(t, gw.URL, "models", "list")
	if err != nil {
		t.Fatalf("models list: %v\n%s", err, stderr)
	}
	var flakyRow, sickRow string
	for _, line := range strings.Split(out, "\n") {
		switch {
		case strings.HasPrefix(line, "m ") && strings.Contains(line, " flaky "):
			flakyRow = line
		case strings.HasPrefix(line, "side ") && strings.Contains(line, " sick "):
			sickRow = line
		}
	}
	if !strings.HasPrefix(out, "MODEL ") || !strings.Contains(flakyRow, "open until") || !strings.Contains(flakyRow, "2/2 (100%)") ||
		!strings.Contains(sickRow, " down ") {
		t.Fatalf("models list:\n%s", out)
	}
	out, stderr, err = cliRun(t, gw.URL, "models", "get", "side", "--json")
	if err != nil {
		t.Fatalf("models get: %v\n%s", err, stderr)
	}
	var side routedModel
	if err := json.Unmarshal([]byte(out), &side); err != nil || side.Model != "side" || len(side.Deployments) != 2 || !side.Deployments[1].Down {
		t.Fatalf("models get side --json: %v\n%s", err, out)
	}
	if _, stderr, err := cliRun(t, gw.URL, "models", "get", "nope"); err == nil || !strings.Contains(stderr, "404") {
		t.Fatalf("models get nope: err %v, stderr %q", err, stderr)
	}

	// A reload swaps the routing: the new model appears, and the
	// deployment it keeps is still open.
	replaceFile(t, gw.Path, cfg+"  - name: added-later\n    targets: [{provider: steady, model: gpt-4o}]\n")
	waitFor(t, 30*time.Second, "the reload", func() bool { return strings.Contains(gw.Logs.String(), "config reloaded") })
	models, raw = adminModels(t, gw)
	if _, ok := models["added-later"]; !ok {
		t.Fatalf("the reloaded config's model is missing: %s", raw)
	}
	if f := models["m"].Deployments[0]; f.Breaker.State != "open" {
		t.Fatalf("after the reload the failing deployment shows %+v", f)
	}
}
