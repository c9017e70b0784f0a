package main

import (
	"context"
	"encoding/json"
	"math"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/tiktoken-go/tokenizer/codec"

	"gatehouse/internal/account"
	"gatehouse/internal/limit"
	"gatehouse/internal/mockllm"
	"gatehouse/internal/tokens"
)

// recordOf waits for a request's usage record and returns it.
func recordOf(t *testing.T, base, id string) account.Record {
	t.Helper()
	var r account.Record
	waitFor(t, 30*time.Second, "the record of "+id, func() bool {
		req, _ := http.NewRequest(http.MethodGet, base+"/admin/logs/"+id, nil)
		req.Header.Set("Authorization", "Bearer "+testAdminKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		return resp.StatusCode == 200 && jsonDecode(resp, &r) == nil
	})
	return r
}

// TestCancelledStreamBilledForWhatWasRelayed: a client stops a budgeted
// stream after a few chunks. The request is billed the prompt plus the
// completion tokens of the text relayed (o200k for gpt-4o-mini, within
// 15% of the exact count of what the client read), far below the
// reservation of the prompt plus 4,096 output tokens, and the budget's
// spend equals the record's cost.
func TestCancelledStreamBilledForWhatWasRelayed(t *testing.T) {
	up := startUpstream(t, mockllm.Options{Reply: longReply})
	dir := t.TempDir()
	db := filepath.Join(dir, "gatehouse.db")
	gw, stop := stoppableGateway(t, dir, usageConfig(up, "storage: {sqlite: "+db+"}\nusage: {spill_dir: "+filepath.Join(dir, "spill")+"}\n"))
	c := gw.client(option.WithAPIKey("gh-usage-budgeted"))

	ctx, cancel := context.WithCancel(context.Background())
	var resp *http.Response
	st := c.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
		Model:    "chat",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("tell me a long story @mock(chunks=60, tps=15)")},
	}, option.WithResponseInto(&resp))
	var seen strings.Builder
	for i := 0; i < 6 && st.Next(); i++ {
		if ch := st.Current(); len(ch.Choices) > 0 {
			seen.WriteString(ch.Choices[0].Delta.Content)
		}
	}
	cancel()
	st.Close()
	id := resp.Header.Get("X-Gatehouse-Request-Id")
	r := recordOf(t, gw.URL, id)

	exact, _ := codec.NewO200kBase().Count(seen.String())
	if exact == 0 {
		t.Fatal("the client read no text")
	}
	if r.UsageSource != account.SourceEstimated || math.Abs(float64(r.CompletionTokens-exact)) > 0.15*float64(exact) {
		t.Fatalf("record: %d completion tokens (%s); the client read %d tokens", r.CompletionTokens, r.UsageSource, exact)
	}
	price := tokens.PerMillion(0.15, 0.075, 0.60) // gpt-4o-mini in the catalog
	want := limit.Micros((int64(r.PromptTokens)*price.Input + int64(r.CompletionTokens)*price.Output + 500_000) / 1e6)
	reserved := limit.Micros(price.Estimate(r.PromptTokens, 4096))
	if r.Cost != want || r.Cost*10 > reserved {
		t.Fatalf("cost %s, want %s (prompt %d + completion %d), far below the reservation %s", r.Cost, want, r.PromptTokens, r.CompletionTokens, reserved)
	}
	stop()
	if spend := keySpend(t, db, "static:budgeted"); spend != r.Cost {
		t.Fatalf("budget spend %s, record %s", spend, r.Cost)
	}
}

// TestStreamWithoutUsageIsCounted: an upstream asked for no usage (a
// server that rejects stream_options) ends its stream without any; the
// request is billed from the text relayed, marked estimated.
func TestStreamWithoutUsageIsCounted(t *testing.T) {
	up := startUpstream(t, mockllm.Options{})
	cfg := strings.Replace(usageConfig(up, ""), "api_key: "+upstreamKey+"}", "api_key: "+upstreamKey+", stream_usage: false}", 1)
	if !strings.Contains(cfg, "stream_usage: false") {
		t.Fatal("the config has no provider entry to turn stream_usage off in")
	}
	gw := startGateway(t, cfg)
	c := gw.client(option.WithAPIKey("gh-usage-budgeted"))
	var resp *http.Response
	st := c.Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{
		Model: "chat", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello there")},
	}, option.WithResponseInto(&resp))
	var seen strings.Builder
	for st.Next() {
		if ch := st.Current(); len(ch.Choices) > 0 {
			seen.WriteString(ch.Choices[0].Delta.Content)
		}
	}
	if err := st.Err(); err != nil {
		t.Fatal(err)
	}
	r := recordOf(t, gw.URL, resp.Header.Get("X-Gatehouse-Request-Id"))
	exact, _ := codec.NewO200kBase().Count(seen.String())
	if r.UsageSource != account.SourceEstimated || r.CompletionTokens != exact || r.PromptTokens == 0 || r.Cost == 0 {
		t.Fatalf("record %+v; the client read %d tokens", r, exact)
	}
}

func jsonDecode(resp *http.Response, v any) error { return json.NewDecoder(resp.Body).Decode(v) }

// TestCostInTheUsageObject: the SDK reads the request's cost inside
// usage ("cost", as OpenRouter sends it), equal to the cost header of a
// whole answer and to the recorded cost of a stream (the trailer's
// figure, which TestLimitsCostHeaderAndStreamTrailer reads over plain
// HTTP); a budgeted key sees what
// its budget has left on every response, refusals included.
func TestCostInTheUsageObject(t *testing.T) {
	up := startUpstream(t, mockllm.Options{Reply: longReply})
	gw := startGateway(t, usageConfig(up, ""))
	c := gw.client(option.WithAPIKey("gh-usage-budgeted"))
	ctx := context.Background()

	var resp *http.Response
	out, err := c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model: "chat", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello")},
	}, option.WithResponseInto(&resp))
	if err != nil {
		t.Fatal(err)
	}
	header := resp.Header.Get("X-Gatehouse-Cost-Usd")
	if got := out.Usage.JSON.ExtraFields["cost"].Raw(); got != header || header == "" || header == "0.000000" {
		t.Fatalf("usage.cost %q, header %q", got, header)
	}
	left := resp.Header.Get("X-Gatehouse-Budget-Remaining-Usd")
	if m, err := account.ParseUSD(left); err != nil || m <= 0 || m >= limit.USD(100) {
		t.Fatalf("budget remaining %q: want a figure below the $100 budget", left)
	}

	st := c.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
		Model: "chat", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello")},
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	}, option.WithResponseInto(&resp))
	var cost string
	for st.Next() {
		if ch := st.Current(); ch.Usage.TotalTokens > 0 {
			cost = ch.Usage.JSON.ExtraFields["cost"].Raw()
		}
	}
	if err := st.Err(); err != nil {
		t.Fatal(err)
	}
	st.Close()
	// The SDK stops reading at [DONE], before the trailer; the record
	// holds the same figure.
	if r := recordOf(t, gw.URL, resp.Header.Get("X-Gatehouse-Request-Id")); cost != r.Cost.String() || cost == "" {
		t.Fatalf("stream usage.cost %q, record %s", cost, r.Cost)
	}
	if resp.Header.Get("X-Gatehouse-Budget-Remaining-Usd") == "" {
		t.Fatal("no budget remaining header on a stream")
	}

	// A key without a budget gets no such header.
	limited := gw.client(option.WithAPIKey("gh-usage-limited"))
	_, err = limited.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model: "chat", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello")},
	}, option.WithResponseInto(&resp))
	if err != nil {
		t.Fatal(err)
	}
	if v := resp.Header.Get("X-Gatehouse-Budget-Remaining-Usd"); v != "" {
		t.Fatalf("budget remaining %q for a key with no budget", v)
	}
}

// TestCostInTheAnthropicUsage: through the Anthropic SDK the cost sits
// in the usage object too — the message's, and message_delta's in a
// stream — equal to the cost header and to the stream's record.
func TestCostInTheAnthropicUsage(t *testing.T) {
	up := startUpstream(t, mockllm.Options{Reply: longReply})
	gw := startGateway(t, usageConfig(up, ""))
	c := gw.messagesClient(aoption.WithAPIKey("gh-usage-budgeted"))
	ctx := context.Background()

	var resp *http.Response
	msg, err := c.Messages.New(ctx, msgsUserTurn("hello"), aoption.WithResponseInto(&resp))
	if err != nil {
		t.Fatal(err)
	}
	header := resp.Header.Get("X-Gatehouse-Cost-Usd")
	if got := msg.Usage.JSON.ExtraFields["cost"].Raw(); got != header || header == "" || header == "0.000000" {
		t.Fatalf("usage.cost %q, header %q", got, header)
	}

	st := c.Messages.NewStreaming(ctx, msgsUserTurn("hello"), aoption.WithResponseInto(&resp))
	var cost string
	for st.Next() {
		if ev := st.Current(); ev.Type == "message_delta" {
			cost = ev.Usage.JSON.ExtraFields["cost"].Raw()
		}
	}
	if err := st.Err(); err != nil {
		t.Fatal(err)
	}
	st.Close()
	if r := recordOf(t, gw.URL, resp.Header.Get("X-Gatehouse-Request-Id")); cost != r.Cost.String() || r.Cost == 0 {
		t.Fatalf("message_delta usage.cost %q, record %s", cost, r.Cost)
	}
}

// TestLocalDeploymentsCostNothingUnlessPriced: a budgeted key may use a
// model of a local provider without a price being entered (the catalog's
// price of the same id does not apply either); a configured price is
// charged.
func TestLocalDeploymentsCostNothingUnlessPriced(t *testing.T) {
	up := startUpstream(t, mockllm.Options{Reply: longReply})
	cfg := `listen: 127.0.0.1:0
providers:
  - {name: box, type: openai-compatible, base_url: ` + up.URL + `/v1, api_key: ` + upstreamKey + `, local: true}
  - {name: vllm, type: openai-compatible, preset: vllm, base_url: ` + up.URL + `/v1, api_key: ` + upstreamKey + `}
keys:
  - {key: gh-local, name: local, project: qa, budget: {usd: 1, period: month}}
models:
  - {name: unknown-local, targets: [{provider: box, model: my-own-finetune}]}
  - {name: catalogued-local, targets: [{provider: box, model: gpt-4o-mini}]}
  - {name: priced-local, targets: [{provider: vllm, model: priced-finetune}]}
pricing:
  overrides: {priced-finetune: {input: 10, output: 20}}
`
	gw := startGateway(t, cfg)
	c := gw.client(option.WithAPIKey("gh-local"))
	for model, want := range map[string]string{"unknown-local": "0.000000", "catalogued-local": "0.000000"} {
		var resp *http.Response
		if _, err := c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
			Model: model, Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
		}, option.WithResponseInto(&resp)); err != nil {
			t.Fatalf("%s: %v", model, err)
		}
		if got := resp.Header.Get("X-Gatehouse-Cost-Usd"); got != want {
			t.Fatalf("%s: cost %s, want %s", model, got, want)
		}
	}
	var resp *http.Response
	if _, err := c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model: "priced-local", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
	}, option.WithResponseInto(&resp)); err != nil {
		t.Fatal(err)
	}
	if got := resp.Header.Get("X-Gatehouse-Cost-Usd"); got == "0.000000" || got == "" {
		t.Fatalf("priced local model: cost %q, want the configured price", got)
	}
}
