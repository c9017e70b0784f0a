package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"gatehouse/internal/account"
	"gatehouse/internal/limit"
	"gatehouse/internal/mockllm"
)

// cacheConfig serves chat with the exact cache on, for a budgeted key of
// project qa, a key of project other, and a key of project nocache whose
// project turns caching off.
func cacheConfig(up *upstream, extra string) string {
	return `listen: 127.0.0.1:0
admin_key: ` + testAdminKey + `
providers:
` + upProvider(up) + `keys:
  - {key: gh-cache-qa, name: qa, project: qa, budget: {usd: 100, period: month}}
  - {key: gh-cache-other, name: other, project: other}
  - {key: gh-cache-barred, name: barred, project: qa, no_cache: true}
models:
  - name: chat
    targets: [{provider: up, model: gpt-4o-mini}]
  - name: alias
    targets: [{provider: up, model: gpt-4o-mini}]
cache:
  exact: {enabled: true, ttl: 10m}
` + extra
}

// rawChat posts body to /v1/chat/completions with key and extra headers
// and returns the response with its whole body.
func rawChat(t *testing.T, base, key, body string, headers ...string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, base+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Add(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

func upstreamCalls(up *upstream) int { return len(up.mock.Requests()) }

// TestExactCacheServesRepeatsFree: the second identical request is
// answered from the cache, through the official SDK, without an upstream
// call, at zero cost to the caller and its budget, and recorded with the
// cost it saved; the key ignores field order and whitespace but not
// temperature, is never shared between projects, and the request's
// cache controls are obeyed.
func TestExactCacheServesRepeatsFree(t *testing.T) {
	up := startUpstream(t, mockllm.Options{Reply: longReply})
	dir := t.TempDir()
	db := filepath.Join(dir, "gatehouse.db")
	gw, stop := stoppableGateway(t, dir, cacheConfig(up, "storage: {sqlite: "+db+"}\nusage: {spill_dir: "+filepath.Join(dir, "spill")+"}\n"))
	c := gw.client(option.WithAPIKey("gh-cache-qa"))
	ctx := context.Background()
	ask := func(c openai.Client, prompt string, opts ...option.RequestOption) (*openai.ChatCompletion, *http.Response) {
		t.Helper()
		var resp *http.Response
		out, err := c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
			Model: "chat", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(prompt)},
		}, append(opts, option.WithResponseInto(&resp))...)
		if err != nil {
			t.Fatal(err)
		}
		return out, resp
	}
	expect := func(resp *http.Response, cache string, calls int) {
		t.Helper()
		if got := resp.Header.Get("X-Gatehouse-Cache"); got != cache {
			t.Fatalf("x-gatehouse-cache %q, want %q", got, cache)
		}
		if n := upstreamCalls(up); n != calls {
			t.Fatalf("%d upstream calls, want %d", n, calls)
		}
	}

	first, resp := ask(c, "what is the capital of france?")
	expect(resp, "miss", 1)
	paid := resp.Header.Get("X-Gatehouse-Cost-Usd")
	// The upstream's answer gets its cost written into it in place
	// (llm.SetUsageCostOwned): the body must say what the header says.
	if got := first.Usage.JSON.ExtraFields["cost"].Raw(); paid == "" || got != paid {
		t.Fatalf("the answer's usage.cost is %s, its header %q", got, paid)
	}
	missID := resp.Header.Get("X-Gatehouse-Request-Id")
	again, resp := ask(c, "what is the capital of france?")
	expect(resp, "hit", 1)
	if again.Choices[0].Message.Content != first.Choices[0].Message.Content || again.Usage.TotalTokens != first.Usage.TotalTokens {
		t.Fatalf("hit answered %+v, first answer %+v", again, first)
	}
	if got := resp.Header.Get("X-Gatehouse-Cost-Usd"); got != "0.000000" || again.Usage.JSON.ExtraFields["cost"].Raw() != "0.000000" {
		t.Fatalf("a hit costs %q (usage.cost %s), want 0.000000", got, again.Usage.JSON.ExtraFields["cost"].Raw())
	}
	hit := recordOf(t, gw.URL, resp.Header.Get("X-Gatehouse-Request-Id"))
	if hit.Cache != "hit" || hit.Cost != 0 || hit.Saved.String() != paid || hit.Saved == 0 || hit.Attempts != 0 ||
		hit.PromptTokens != int(first.Usage.PromptTokens) {
		t.Fatalf("hit recorded as %+v; the miss paid %s", hit, paid)
	}
	if miss := recordOf(t, gw.URL, missID); miss.Cache != "miss" || miss.Cost.String() != paid {
		t.Fatalf("miss recorded as %+v", miss)
	}

	// The same request spelt differently (field order, whitespace, an
	// alias of the model, stream_options) is the same entry; a different
	// temperature is not.
	body, _ := json.Marshal(map[string]any{"model": "chat", "messages": []map[string]string{{"role": "user", "content": "what is the capital of france?"}}})
	resp, _ = rawChat(t, gw.URL, "gh-cache-qa", `{
		"messages" : [ {"content":"what is the capital of france?", "role":"user"} ],
		"model": "alias" }`)
	expect(resp, "miss", 2) // alias resolves to a different model group: its own entry
	resp, _ = rawChat(t, gw.URL, "gh-cache-qa", "  "+string(body)+"\n")
	expect(resp, "hit", 2)
	resp, _ = rawChat(t, gw.URL, "gh-cache-qa", `{"messages":[{"role":"user","content":"what is the capital of france?"}],"model":"chat","temperature":0.2}`)
	expect(resp, "miss", 3)
	resp, _ = rawChat(t, gw.URL, "gh-cache-qa", `{"temperature":0.20,"model":"chat","messages":[{"role":"user","content":"what is the capital of france?"}]}`)
	expect(resp, "hit", 3)

	// Another project never sees qa's entries.
	_, resp = ask(gw.client(option.WithAPIKey("gh-cache-other")), "what is the capital of france?")
	expect(resp, "miss", 4)

	// Cache-Control: no-cache reads nothing (bypass) but stores; no-store
	// reads but keeps nothing.
	_, resp = ask(c, "what is the capital of france?", option.WithHeader("Cache-Control", "no-cache"))
	expect(resp, "bypass", 5)
	_, resp = ask(c, "a question asked with no-store", option.WithHeader("Cache-Control", "no-store"))
	expect(resp, "miss", 6)
	_, resp = ask(c, "a question asked with no-store")
	expect(resp, "miss", 7)
	_, resp = ask(c, "a question kept for no time", option.WithHeader("X-Gatehouse-Cache-Ttl", "0"))
	expect(resp, "miss", 8)
	_, resp = ask(c, "a question kept for no time")
	expect(resp, "miss", 9)
	resp, b := rawChat(t, gw.URL, "gh-cache-qa", string(body), "X-Gatehouse-Cache-Ttl", "soon")
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), "invalid_cache_ttl") {
		t.Fatalf("a bad ttl header: %d %s", resp.StatusCode, b)
	}

	// Purging qa's entries (the CLI's gatehouse cache purge) makes the
	// next request a miss.
	var out bytes.Buffer
	if err := (&cachePurgeCmd{adminFlags: adminFlags{Addr: gw.URL, AdminKey: testAdminKey}, Project: "qa"}).run(ctx, &out); err != nil {
		t.Fatal(err)
	}
	var n int
	if _, err := fmt.Sscanf(out.String(), "Purged %d cache entries of project qa.", &n); err != nil || n < 3 {
		t.Fatalf("gatehouse cache purge --project qa: %q, want at least 3 entries purged", out.String())
	}
	_, resp = ask(c, "what is the capital of france?")
	expect(resp, "miss", 10)
	recordOf(t, gw.URL, resp.Header.Get("X-Gatehouse-Request-Id")) // the records are all in

	// The budget paid for the misses only: the key's spend equals the sum
	// of its records, hits included at zero.
	var logs struct {
		Data []struct {
			CostUSD string `json:"cost_usd"`
			Cache   string
		}
	}
	adminJSON(t, gw.URL, "/admin/logs?key=static:qa&limit=100", &logs)
	var sum limit.Micros
	hits := 0
	for _, r := range logs.Data {
		m, _ := account.ParseUSD(r.CostUSD)
		sum += m
		if r.Cache == "hit" {
			hits++
		}
	}
	stop()
	if spend := keySpend(t, db, "static:qa"); spend != sum || hits != 3 {
		t.Fatalf("budget spend %s, records %s over %d hits", spend, sum, hits)
	}
}

// TestExactCacheReplaysStreams: a stream is stored as its events and a
// hit replays them with the same boundaries and bytes (the cost inside
// the usage chunk aside, which is the hit's); a whole answer is served
// from a stored stream and a stream from a stored whole answer, in the
// OpenAI and the Anthropic dialects.
func TestExactCacheReplaysStreams(t *testing.T) {
	up := startUpstream(t, mockllm.Options{Reply: longReply, Chunks: 6})
	gw := startGateway(t, cacheConfig(up, ""))
	streamBody := `{"model":"chat","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"stream it"}]}`
	resp, original := rawChat(t, gw.URL, "gh-cache-qa", streamBody)
	if resp.Header.Get("X-Gatehouse-Cache") != "miss" {
		t.Fatalf("first stream: %s", resp.Header.Get("X-Gatehouse-Cache"))
	}
	resp, replayed := rawChat(t, gw.URL, "gh-cache-qa", streamBody)
	if resp.Header.Get("X-Gatehouse-Cache") != "hit" || upstreamCalls(up) != 1 {
		t.Fatalf("second stream: cache %q after %d upstream calls", resp.Header.Get("X-Gatehouse-Cache"), upstreamCalls(up))
	}
	costField := regexp.MustCompile(`"cost":[0-9.]+`)
	if !bytes.Equal(costField.ReplaceAll(original, nil), costField.ReplaceAll(replayed, nil)) {
		t.Fatalf("replay differs from the original stream:\n%s\n---\n%s", original, replayed)
	}
	if n := bytes.Count(replayed, []byte("\n\n")); n != bytes.Count(original, []byte("\n\n")) || n < 6 {
		t.Fatalf("replay has %d events", n)
	}
	if !bytes.Contains(replayed, []byte(`"cost":0.000000`)) {
		t.Fatalf("the replay's usage chunk does not say it cost nothing:\n%s", replayed)
	}

	// Through the official SDK, with the bytes it read recorded: the
	// replayed stream is the original one, event for event.
	sdkStream := func(prompt string) (string, []byte, string) {
		t.Helper()
		var raw bytes.Buffer
		var resp *http.Response
		tee := option.WithMiddleware(func(r *http.Request, next option.MiddlewareNext) (*http.Response, error) {
			res, err := next(r)
			if err == nil {
				res.Body = struct {
					io.Reader
					io.Closer
				}{io.TeeReader(res.Body, &raw), res.Body}
			}
			return res, err
		})
		c := gw.client(option.WithAPIKey("gh-cache-qa"), tee)
		st := c.Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{Model: "chat",
			Messages:      []openai.ChatCompletionMessageParamUnion{openai.UserMessage(prompt)},
			StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}},
			option.WithResponseInto(&resp))
		var acc openai.ChatCompletionAccumulator
		for st.Next() {
			acc.AddChunk(st.Current())
		}
		if err := st.Err(); err != nil {
			t.Fatal(err)
		}
		st.Close()
		return acc.Choices[0].Message.Content, raw.Bytes(), resp.Header.Get("X-Gatehouse-Cache")
	}
	text1, raw1, c1 := sdkStream("replay me through the SDK")
	// The SDK stops reading at [DONE], a moment before the handler has
	// stored the stream: wait for it (the probe keeps nothing: no-store).
	waitFor(t, 30*time.Second, "the SDK's stream stored", func() bool {
		resp, _ := rawChat(t, gw.URL, "gh-cache-qa", `{"model":"chat","messages":[{"role":"user","content":"replay me through the SDK"}]}`,
			"Cache-Control", "no-store")
		return resp.Header.Get("X-Gatehouse-Cache") == "hit"
	})
	text2, raw2, c2 := sdkStream("replay me through the SDK")
	if c1 != "miss" || c2 != "hit" || text1 != text2 || text1 == "" ||
		!bytes.Equal(costField.ReplaceAll(raw1, nil), costField.ReplaceAll(raw2, nil)) {
		t.Fatalf("SDK stream: %s then %s; the replay's bytes differ from the original's:\n%s\n---\n%s", c1, c2, raw1, raw2)
	}

	// Through the SDK: the whole answer from the stored stream, and the
	// stream again, hold the same text.
	before := upstreamCalls(up)
	c := gw.client(option.WithAPIKey("gh-cache-qa"))
	ctx := context.Background()
	params := openai.ChatCompletionNewParams{Model: "chat",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("stream it")}}
	var hresp *http.Response
	whole, err := c.Chat.Completions.New(ctx, params, option.WithResponseInto(&hresp))
	if err != nil {
		t.Fatal(err)
	}
	st := c.Chat.Completions.NewStreaming(ctx, params)
	var acc openai.ChatCompletionAccumulator
	for st.Next() {
		acc.AddChunk(st.Current())
	}
	if err := st.Err(); err != nil {
		t.Fatal(err)
	}
	if hresp.Header.Get("X-Gatehouse-Cache") != "hit" || upstreamCalls(up) != before ||
		whole.Choices[0].Message.Content == "" || acc.Choices[0].Message.Content != whole.Choices[0].Message.Content {
		t.Fatalf("from the stored stream: cache %q, %d upstream calls, whole %q, streamed %q",
			hresp.Header.Get("X-Gatehouse-Cache"), upstreamCalls(up), whole.Choices[0].Message.Content, acc.Choices[0].Message.Content)
	}

	// A stored whole answer, streamed to the Anthropic SDK.
	a := gw.messagesClient(aoption.WithAPIKey("gh-cache-qa"))
	msg, err := a.Messages.New(ctx, msgsUserTurn("first whole, then streamed"))
	if err != nil {
		t.Fatal(err)
	}
	calls := upstreamCalls(up)
	var aresp *http.Response
	as := a.Messages.NewStreaming(ctx, msgsUserTurn("first whole, then streamed"), aoption.WithResponseInto(&aresp))
	var streamed anthropic.Message
	for as.Next() {
		if err := streamed.Accumulate(as.Current()); err != nil {
			t.Fatal(err)
		}
	}
	if err := as.Err(); err != nil {
		t.Fatal(err)
	}
	if aresp.Header.Get("X-Gatehouse-Cache") != "hit" || upstreamCalls(up) != calls ||
		len(streamed.Content) != 1 || streamed.Content[0].Text != msg.Content[0].Text ||
		streamed.Usage.OutputTokens != msg.Usage.OutputTokens {
		t.Fatalf("Anthropic stream from a stored answer: cache %q, %d→%d upstream calls, %+v vs %+v",
			aresp.Header.Get("X-Gatehouse-Cache"), calls, upstreamCalls(up), streamed.Content, msg.Content)
	}
	// The metrics count the hits by kind and the in-process tier's size.
	m := scrape(t, gw)
	// (The probes that waited for stored entries add to the counts: at
	// least.)
	for series, least := range map[string]float64{
		`gatehouse_cache_requests_total{model="chat",project="qa",result="hit"}`:  5,
		`gatehouse_cache_requests_total{model="chat",project="qa",result="miss"}`: 3,
		`gatehouse_cache_entries`: 3,
	} {
		var v float64
		if _, err := fmt.Sscan(strings.TrimPrefix(grepLines(m, series+" "), series+" "), &v); err != nil || v < least {
			t.Errorf("metrics: %s = %v (%v), want at least %v:\n%s", series, v, err, least, grepLines(m, "gatehouse_cache"))
		}
	}
	// Hits used no model's tokens: only the misses count them.
	for _, series := range strings.Split(grepLines(m, "gatehouse_tokens_total{"), "\n") {
		if strings.Contains(series, `provider=""`) && !strings.HasSuffix(series, " 0") {
			t.Errorf("a hit counted tokens: %s", series)
		}
	}
}

// TestExactCacheSurvivesRestart: in embedded mode the entries are in the
// SQLite file too, so a restarted gateway answers from them.
func TestExactCacheSurvivesRestart(t *testing.T) {
	up := startUpstream(t, mockllm.Options{Reply: longReply})
	dir := t.TempDir()
	cfg := cacheConfig(up, "storage: {sqlite: "+filepath.Join(dir, "gatehouse.db")+"}\nusage: {spill_dir: "+filepath.Join(dir, "spill")+"}\n")
	body := `{"model":"chat","messages":[{"role":"user","content":"remember me"}]}`
	gw, stop := stoppableGateway(t, dir, cfg)
	resp, first := rawChat(t, gw.URL, "gh-cache-qa", body)
	if resp.Header.Get("X-Gatehouse-Cache") != "miss" {
		t.Fatalf("first: %s", resp.Header.Get("X-Gatehouse-Cache"))
	}
	stop() // waits for the background write
	gw, _ = stoppableGateway(t, dir, cfg)
	resp, again := rawChat(t, gw.URL, "gh-cache-qa", body)
	if resp.Header.Get("X-Gatehouse-Cache") != "hit" || upstreamCalls(up) != 1 {
		t.Fatalf("after a restart: cache %q, %d upstream calls", resp.Header.Get("X-Gatehouse-Cache"), upstreamCalls(up))
	}
	costField := regexp.MustCompile(`"cost":[0-9.]+`)
	if !bytes.Equal(costField.ReplaceAll(first, nil), costField.ReplaceAll(again, nil)) {
		t.Fatalf("after a restart the answer differs:\n%s\n%s", first, again)
	}
}

// TestExactCacheSharedByReplicas: three gatehouse processes on one Redis
// (cluster mode) share entries — what one stored, the others serve — and
// a purge through one replica's admin API empties the cache for all,
// their memory included.
func TestExactCacheSharedByReplicas(t *testing.T) {
	up := startUpstream(t, mockllm.Options{Reply: longReply})
	cfg := cacheConfig(up, clusterStorage(t))
	var urls []string
	for range 3 {
		p, _ := startProcess(t, cfg)
		urls = append(urls, "http://"+p.addr)
	}
	body := `{"model":"chat","messages":[{"role":"user","content":"shared between replicas"}]}`
	resp, first := rawChat(t, urls[0], "gh-cache-qa", body)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Gatehouse-Cache") != "miss" {
		t.Fatalf("first: %d %s %s", resp.StatusCode, resp.Header.Get("X-Gatehouse-Cache"), first)
	}
	// The write to Redis is in the background: wait until the second
	// replica finds it (its own misses keep nothing: no-store).
	waitFor(t, 30*time.Second, "the entry in Redis", func() bool {
		resp, _ := rawChat(t, urls[1], "gh-cache-qa", body, "Cache-Control", "no-store")
		return resp.Header.Get("X-Gatehouse-Cache") == "hit"
	})
	calls := upstreamCalls(up)
	resp, third := rawChat(t, urls[2], "gh-cache-qa", body)
	if resp.Header.Get("X-Gatehouse-Cache") != "hit" || upstreamCalls(up) != calls {
		t.Fatalf("third replica: cache %q, upstream calls %d→%d", resp.Header.Get("X-Gatehouse-Cache"), calls, upstreamCalls(up))
	}
	costField := regexp.MustCompile(`"cost":[0-9.]+`)
	if !bytes.Equal(costField.ReplaceAll(first, nil), costField.ReplaceAll(third, nil)) {
		t.Fatalf("another replica's answer differs:\n%s\n%s", first, third)
	}
	var purged struct{ Deleted int }
	adminCall(t, urls[1], http.MethodDelete, "/admin/cache?project=qa", &purged)
	if purged.Deleted < 2 { // the second replica's memory and Redis
		t.Fatalf("purged %d entries, want the memory copy and Redis's", purged.Deleted)
	}
	// The third replica's promoted copy in its memory goes too: the purge
	// is published to every replica.
	waitFor(t, 30*time.Second, "the purge on the third replica", func() bool {
		resp, _ := rawChat(t, urls[2], "gh-cache-qa", body, "Cache-Control", "no-store")
		return resp.Header.Get("X-Gatehouse-Cache") == "miss"
	})
}

// TestExactCacheProjectAndKeySettings: a project's cache override (on,
// off, its own TTL) and a key barred from the cache, set through the
// admin API, apply to the next request.
func TestExactCacheProjectAndKeySettings(t *testing.T) {
	up := startUpstream(t, mockllm.Options{Reply: longReply})
	dir := t.TempDir()
	db := filepath.Join(dir, "gatehouse.db")
	gw, _ := stoppableGateway(t, dir, cacheConfig(up, "storage: {sqlite: "+db+"}\nusage: {spill_dir: "+filepath.Join(dir, "spill")+"}\n"))
	body := `{"model":"chat","messages":[{"role":"user","content":"settings"}]}`
	state := func(key string) string {
		t.Helper()
		resp, b := rawChat(t, gw.URL, key, body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%d %s", resp.StatusCode, b)
		}
		return resp.Header.Get("X-Gatehouse-Cache")
	}

	p := adminPost(t, gw.URL, "/admin/projects", `{"name":"off","cache":false}`)
	off := adminPost(t, gw.URL, "/admin/keys", `{"project":"off","name":"k"}`)["key"].(string)
	if s1, s2 := state(off), state(off); s1 != "bypass" || s2 != "bypass" {
		t.Fatalf("a project with the cache off: %s, %s", s1, s2)
	}
	adminDo(t, gw.URL, http.MethodPatch, "/admin/projects/"+p["id"].(string), `{"cache":{"exact":{"enabled":true,"ttl_seconds":7}}}`, 200)
	// The change reaches the key cache within moments (KeyChanges): until
	// then the project's requests still bypass.
	waitFor(t, 30*time.Second, "the project's cache turned on", func() bool { return state(off) != "bypass" })
	if s := state(off); s != "hit" {
		t.Fatalf("the project turned on: %s", s)
	}
	// Its own TTL: the entry stored in SQLite expires 7 s after it was kept.
	kept := time.Now()
	sq, err := sql.Open("sqlite", db)
	if err != nil {
		t.Fatal(err)
	}
	defer sq.Close()
	var expires int64
	waitFor(t, 30*time.Second, "the entry in SQLite", func() bool {
		return sq.QueryRow(`SELECT expires FROM cache_entries WHERE project = 'off'`).Scan(&expires) == nil
	})
	if d := time.UnixMicro(expires).Sub(kept); d < 5*time.Second || d > 7*time.Second {
		t.Fatalf("the project's entry expires %v after it was stored, want its ttl_seconds, 7 s", d)
	}

	// A key barred from the cache bypasses it in a project that uses it.
	adminPost(t, gw.URL, "/admin/projects", `{"name":"on"}`)
	barred := adminPost(t, gw.URL, "/admin/keys", `{"project":"on","name":"barred","no_cache":true}`)
	free := adminPost(t, gw.URL, "/admin/keys", `{"project":"on","name":"free"}`)["key"].(string)
	if s := state(barred["key"].(string)); s != "bypass" {
		t.Fatalf("a barred key: %s", s)
	}
	if s := state("gh-cache-barred"); s != "bypass" {
		t.Fatalf("a config key with no_cache: %s", s)
	}
	if s1, s2 := state(free), state(free); s1 != "miss" || s2 != "hit" {
		t.Fatalf("the project's other key: %s, %s", s1, s2)
	}
	if s := state(barred["key"].(string)); s != "bypass" {
		t.Fatalf("a barred key after the entry was stored: %s", s)
	}
	adminDo(t, gw.URL, http.MethodPatch, "/admin/keys/"+barred["id"].(string), `{"no_cache":false}`, 200)
	waitFor(t, 30*time.Second, "the key let back in", func() bool { return state(barred["key"].(string)) != "bypass" })
	if s := state(barred["key"].(string)); s != "hit" {
		t.Fatalf("the key let back in: %s", s)
	}
}
