package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"gatehouse/internal/account"
	"gatehouse/internal/limit"
	"gatehouse/internal/mockllm"
)

// seen is what a client saw of one request: what its usage record must
// say.
type seen struct {
	id     string
	status int
	cost   string // x-gatehouse-cost-usd (the trailer for streams)
	usage  *openai.CompletionUsage
	stream bool
	label  string
}

// adminJSON GETs an admin path and decodes the answer into v.
func adminJSON(t *testing.T, base, path string, v any) {
	t.Helper()
	adminCall(t, base, http.MethodGet, path, v)
}

// adminCall sends a bodiless admin request, wants 200 and decodes the
// answer into v.
func adminCall(t *testing.T, base, method, path string, v any) {
	t.Helper()
	req, _ := http.NewRequest(method, base+path, nil)
	req.Header.Set("Authorization", "Bearer "+testAdminKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, b)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s %s: %v: %s", method, path, err, b)
	}
}

// usageConfig serves chat (priced gpt-4o-mini) for two keys of project
// qa: a budgeted one, and one limited to one request a minute.
func usageConfig(up *upstream, extra string) string {
	return `listen: 127.0.0.1:0
admin_key: ` + testAdminKey + `
providers:
` + upProvider(up) + `keys:
  - {key: gh-usage-budgeted, name: budgeted, project: qa, budget: {usd: 100, period: month}}
  - {key: gh-usage-limited, name: limited, project: qa, rpm: 1}
models:
  - name: chat
    targets: [{provider: up, model: gpt-4o-mini}]
` + extra
}

// TestUsageRecordsMatchWhatClientsSaw drives streamed, non-streamed,
// failed, refused, invalid and cancelled requests through the official
// SDK and holds every usage record to what its client saw: status,
// tokens, cost; then the usage API's totals to the sum of the records,
// and the budget's spend to the records' cost.
func TestUsageRecordsMatchWhatClientsSaw(t *testing.T) {
	up := startUpstream(t, mockllm.Options{Reply: longReply})
	dir := t.TempDir()
	db := filepath.Join(dir, "gatehouse.db")
	gw, stop := stoppableGateway(t, dir, usageConfig(up, "storage: {sqlite: "+db+"}\nusage: {spill_dir: "+filepath.Join(dir, "spill")+"}\n"))
	budgeted := gw.client(option.WithAPIKey("gh-usage-budgeted"))
	limited := gw.client(option.WithAPIKey("gh-usage-limited"))
	ctx := context.Background()
	var all []seen

	chat := func(c openai.Client, prompt string, opts ...option.RequestOption) seen {
		var resp *http.Response
		out, err := c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
			Model:    "chat",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(prompt)},
		}, append(opts, option.WithResponseInto(&resp))...)
		s := seen{}
		var apiErr *openai.Error
		switch {
		case err == nil:
			s.usage = &out.Usage
		case errors.As(err, &apiErr):
			resp = apiErr.Response
		default:
			t.Fatal(err)
		}
		s.id, s.status, s.cost = resp.Header.Get("X-Gatehouse-Request-Id"), resp.StatusCode, resp.Header.Get("X-Gatehouse-Cost-Usd")
		return s
	}
	// Answered, with a label.
	s := chat(budgeted, "hello", option.WithHeader("X-Gatehouse-Label-Team", "blue"))
	s.label = "blue"
	all = append(all, s)
	// Streamed with usage.
	{
		var resp *http.Response
		st := budgeted.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
			Model:         "chat",
			Messages:      []openai.ChatCompletionMessageParamUnion{openai.UserMessage("stream please")},
			StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
		}, option.WithResponseInto(&resp))
		s := seen{stream: true, status: 200}
		for st.Next() {
			if c := st.Current(); c.Usage.TotalTokens > 0 {
				u := c.Usage
				s.usage = &u
			}
		}
		if err := st.Err(); err != nil {
			t.Fatal(err)
		}
		st.Close()
		// The cost in the usage chunk: the SDK stops reading at [DONE],
		// before the trailer with the same figure.
		s.id, s.cost = resp.Header.Get("X-Gatehouse-Request-Id"), s.usage.JSON.ExtraFields["cost"].Raw()
		all = append(all, s)
	}
	// Failed upstream: the client gets an error status and pays nothing.
	all = append(all, chat(budgeted, "fail @mock(error_status=500)"))
	// Refused: the second request of a one-a-minute key.
	all = append(all, chat(limited, "first"))
	all = append(all, chat(limited, "second"))
	// Invalid label.
	all = append(all, chat(budgeted, "bad label", option.WithHeader("X-Gatehouse-Label-Bad!", "x")))
	// Cancelled mid-stream.
	{
		cctx, cancel := context.WithCancel(ctx)
		var resp *http.Response
		st := budgeted.Chat.Completions.NewStreaming(cctx, openai.ChatCompletionNewParams{
			Model:    "chat",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("slowly @mock(chunks=40, tps=20)")},
		}, option.WithResponseInto(&resp))
		if !st.Next() {
			t.Fatalf("no first chunk: %v", st.Err())
		}
		cancel()
		for st.Next() {
		}
		st.Close()
		all = append(all, seen{id: resp.Header.Get("X-Gatehouse-Request-Id"), status: 200, stream: true})
	}
	wantStatus := []int{200, 200, 500, 200, 429, 400, 200}
	for i, s := range all {
		if s.id == "" {
			t.Fatalf("request %d: no x-gatehouse-request-id", i)
		}
		if s.status != wantStatus[i] && !(i == 2 && s.status >= 500) {
			t.Fatalf("request %d: status %d, want %d", i, s.status, wantStatus[i])
		}
	}

	// Every request leaves exactly one record; compare each.
	var logs struct {
		Data []account.Record `json:"data"`
	}
	waitFor(t, 30*time.Second, "the usage records", func() bool {
		adminJSON(t, gw.URL, "/admin/logs?project=qa&limit=100", &logs)
		return len(logs.Data) >= len(all)
	})
	byID := map[string]account.Record{}
	for _, r := range logs.Data {
		if _, dup := byID[r.RequestID]; dup {
			t.Fatalf("record %s listed twice", r.RequestID)
		}
		byID[r.RequestID] = r
	}
	if len(byID) != len(all) {
		t.Fatalf("%d records for %d requests", len(byID), len(all))
	}
	for i, s := range all {
		r, ok := byID[s.id]
		if !ok {
			t.Fatalf("request %d (%s): no record", i, s.id)
		}
		wantModel := "chat"
		if i == 5 {
			wantModel = "" // refused for its label before the body was read
		}
		if r.Status != s.status || r.Stream != s.stream || r.Model != wantModel || r.Project != "qa" {
			t.Errorf("request %d: record %+v, client saw status %d stream %v", i, r, s.status, s.stream)
		}
		if s.cost != "" && r.Cost.String() != s.cost {
			t.Errorf("request %d: record cost %s, client saw %s", i, r.Cost, s.cost)
		}
		if s.usage != nil && (int64(r.PromptTokens) != s.usage.PromptTokens || int64(r.CompletionTokens) != s.usage.CompletionTokens) {
			t.Errorf("request %d: record tokens %d/%d, client saw %d/%d", i, r.PromptTokens, r.CompletionTokens, s.usage.PromptTokens, s.usage.CompletionTokens)
		}
		if s.usage != nil && r.UsageSource != account.SourceReported {
			t.Errorf("request %d: usage_source %q, want reported", i, r.UsageSource)
		}
		if s.label != "" && r.Labels["team"] != s.label {
			t.Errorf("request %d: labels %v, want team=%s", i, r.Labels, s.label)
		}
		if r.Status >= 400 && (r.ErrorKind == "" || r.Cost != 0) {
			t.Errorf("request %d: failed request recorded with error_kind %q and cost %s", i, r.ErrorKind, r.Cost)
		}
		if r.Cache != account.CacheBypass || r.OverheadMS < 0 || r.LatencyMS <= 0 {
			t.Errorf("request %d: cache %q overhead %v latency %v", i, r.Cache, r.OverheadMS, r.LatencyMS)
		}
	}
	if r := byID[all[0].id]; r.Provider != "up" || r.ServedModel != "gpt-4o-mini" || r.Deployment != "up/gpt-4o-mini" || r.KeyID != "static:budgeted" {
		t.Errorf("routing fields of the answered request: %+v", r)
	}
	if r := byID[all[6].id]; r.UsageSource != account.SourceEstimated || r.Cost <= 0 {
		t.Errorf("cancelled stream: usage_source %q cost %s; want an estimated, non-zero cost", r.UsageSource, r.Cost)
	}

	// GET /admin/logs/{id} returns the same record.
	var one account.Record
	adminJSON(t, gw.URL, "/admin/logs/"+all[1].id, &one)
	if one.RequestID != all[1].id || one.Cost != byID[all[1].id].Cost {
		t.Errorf("GET /admin/logs/{id} = %+v", one)
	}

	// The usage API's totals are the records' sums, refusals counted.
	var usage struct {
		Data []struct {
			Key              string `json:"key"`
			Requests         int64  `json:"requests"`
			Errors           int64  `json:"errors"`
			PromptTokens     int64  `json:"prompt_tokens"`
			CompletionTokens int64  `json:"completion_tokens"`
			CostUSD          string `json:"cost_usd"`
		} `json:"data"`
	}
	adminJSON(t, gw.URL, "/admin/usage?group_by=key&project=qa", &usage)
	type sums struct {
		requests, errors, prompt, completion int64
		cost                                 limit.Micros
	}
	want := map[string]*sums{}
	for _, r := range byID {
		s := want[r.KeyID]
		if s == nil {
			s = &sums{}
			want[r.KeyID] = s
		}
		s.requests++
		if r.Status >= 400 {
			s.errors++
		}
		s.prompt += int64(r.PromptTokens)
		s.completion += int64(r.CompletionTokens)
		s.cost += r.Cost
	}
	if len(usage.Data) != len(want) {
		t.Fatalf("usage groups %+v, want %d keys", usage.Data, len(want))
	}
	for _, g := range usage.Data {
		w := want[g.Key]
		if w == nil {
			t.Fatalf("usage group for unknown key %q", g.Key)
		}
		got := sums{g.Requests, g.Errors, g.PromptTokens, g.CompletionTokens, mustUSD(t, g.CostUSD)}
		if got != *w {
			t.Errorf("usage of %s = %+v, records sum to %+v", g.Key, got, *w)
		}
	}

	// The budget's spend equals the records' cost for the key.
	stop()
	spend := keySpend(t, db, "static:budgeted")
	if w := want["static:budgeted"].cost; spend != w || w == 0 {
		t.Fatalf("budget spend %d micro-dollars, records of the key sum to %d", spend, w)
	}
}

func mustUSD(t *testing.T, s string) limit.Micros {
	t.Helper()
	m, err := account.ParseUSD(s)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestUsageRecordsKeepBodiesOnlyWhenTheProjectAsks: a project with
// log_bodies keeps redacted request and response bodies (a stream's
// events included); another project's records have none.
func TestUsageRecordsKeepBodiesOnlyWhenTheProjectAsks(t *testing.T) {
	up := startUpstream(t, mockllm.Options{})
	gw := startGateway(t, usageConfig(up, "usage:\n  bodies:\n    redact: [{pattern: 'acct-[0-9]+', replace: '[ACCOUNT]'}]\n"))
	adminPost(t, gw.URL, "/admin/projects", `{"name":"kept","log_bodies":true}`)
	adminPost(t, gw.URL, "/admin/projects", `{"name":"private"}`)
	kept := adminPost(t, gw.URL, "/admin/keys", `{"project":"kept","name":"k"}`)["key"].(string)
	private := adminPost(t, gw.URL, "/admin/keys", `{"project":"private","name":"p"}`)["key"].(string)
	ctx := context.Background()
	prompt := "my key is sk-live-0123456789abcdefghij and my account acct-778899"
	ids := map[string]string{}
	for name, key := range map[string]string{"kept": kept, "private": private} {
		var resp *http.Response
		c := gw.client(option.WithAPIKey(key))
		if _, err := c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
			Model: "chat", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(prompt)},
		}, option.WithResponseInto(&resp)); err != nil {
			t.Fatal(err)
		}
		ids[name] = resp.Header.Get("X-Gatehouse-Request-Id")
		st := c.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
			Model: "chat", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(prompt)},
		}, option.WithResponseInto(&resp))
		for st.Next() {
		}
		if err := st.Err(); err != nil {
			t.Fatal(err)
		}
		ids[name+"-stream"] = resp.Header.Get("X-Gatehouse-Request-Id")
	}
	get := func(id string) account.Record {
		var r account.Record
		waitFor(t, 30*time.Second, "record "+id, func() bool {
			req, _ := http.NewRequest(http.MethodGet, gw.URL+"/admin/logs/"+id, nil)
			req.Header.Set("Authorization", "Bearer "+testAdminKey)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return false
			}
			defer resp.Body.Close()
			return resp.StatusCode == 200 && json.NewDecoder(resp.Body).Decode(&r) == nil
		})
		return r
	}
	for _, name := range []string{"kept", "kept-stream"} {
		r := get(ids[name])
		if !strings.Contains(r.RequestBody, `"model":"chat"`) || !strings.Contains(r.RequestBody, "[REDACTED_KEY]") || !strings.Contains(r.RequestBody, "[ACCOUNT]") {
			t.Errorf("%s: request body %q: want it kept with the key and account redacted", name, r.RequestBody)
		}
		if strings.Contains(r.RequestBody, "sk-live") || strings.Contains(r.RequestBody, "acct-778899") {
			t.Errorf("%s: secret kept: %q", name, r.RequestBody)
		}
		if r.ResponseBody == "" || (name == "kept-stream") != strings.Contains(r.ResponseBody, "data: [DONE]") {
			t.Errorf("%s: response body %q", name, r.ResponseBody)
		}
	}
	for _, name := range []string{"private", "private-stream"} {
		if r := get(ids[name]); r.RequestBody != "" || r.ResponseBody != "" {
			t.Errorf("%s: bodies kept for a project that did not ask: %+v", name, r)
		}
	}
}
