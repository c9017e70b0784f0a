package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"gatehouse/internal/mockllm"
	"gatehouse/internal/store/postgres/pgtest"
)

// semanticConfig serves chat from a mock upstream with the semantic
// cache on the reference embedder (contrib/embedder): on for every
// project when on is set, else opt-in per project.
func semanticConfig(t *testing.T, up *upstream, on bool, extra string) string {
	enabled := "false"
	if on {
		enabled = "true"
	}
	return `listen: 127.0.0.1:0
admin_key: ` + testAdminKey + `
providers:
` + upProvider(up) + `  - {name: local-embed, type: openai-compatible, base_url: ` + embedderURL(t) + `/v1, local: true}
keys:
  - {key: gh-sem-qa, name: qa, project: qa}
  - {key: gh-sem-other, name: other, project: other}
models:
  - name: chat
    targets: [{provider: up, model: gpt-4o-mini}]
cache:
  exact: {enabled: true}
  semantic:
    enabled: ` + enabled + `
    threshold: 0.88
    timeout: 5s
    embedder: {provider: local-embed, model: all-minilm-l6-v2}
` + extra
}

// TestSemanticCacheServesParaphrases, against the real MiniLM embedder:
// a paraphrase of an answered question gets its answer (x-gatehouse-cache:
// semantic) at zero cost, an unrelated question or another conversation
// or project does not, streams too; and after a restart the vectors and
// answers kept in SQLite still serve.
func TestSemanticCacheServesParaphrases(t *testing.T) {
	up := startUpstream(t, mockllm.Options{})
	dir := t.TempDir()
	cfg := semanticConfig(t, up, true, "storage: {sqlite: "+filepath.Join(dir, "gatehouse.db")+"}\nusage: {spill_dir: "+filepath.Join(dir, "spill")+"}\n")
	gw, stop := stoppableGateway(t, dir, cfg)
	ctx := context.Background()
	ask := func(base, key, system, prompt string) (string, *http.Response) {
		t.Helper()
		c := (&testGateway{URL: base}).client(option.WithAPIKey(key))
		msgs := []openai.ChatCompletionMessageParamUnion{openai.UserMessage(prompt)}
		if system != "" {
			msgs = append([]openai.ChatCompletionMessageParamUnion{openai.SystemMessage(system)}, msgs...)
		}
		var resp *http.Response
		out, err := c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "chat", Messages: msgs},
			option.WithResponseInto(&resp))
		if err != nil {
			t.Fatal(err)
		}
		return out.Choices[0].Message.Content, resp
	}
	expect := func(resp *http.Response, cache string, calls int) {
		t.Helper()
		if got := resp.Header.Get("X-Gatehouse-Cache"); got != cache || upstreamCalls(up) != calls {
			t.Fatalf("x-gatehouse-cache %q after %d upstream calls, want %q after %d", got, upstreamCalls(up), cache, calls)
		}
	}

	first, resp := ask(gw.URL, "gh-sem-qa", "", "what is the capital of france?")
	expect(resp, "miss", 1)
	waitFor(t, 30*time.Second, "the answer to be indexed", func() bool {
		_, resp := ask(gw.URL, "gh-sem-qa", "", "what is the capital of france?")
		return resp.Header.Get("X-Gatehouse-Cache") == "hit"
	})
	again, resp := ask(gw.URL, "gh-sem-qa", "", "tell me france's capital city")
	expect(resp, "semantic", 1)
	if again != first || resp.Header.Get("X-Gatehouse-Cost-Usd") != "0.000000" {
		t.Fatalf("the paraphrase got %q at %s, want %q free", again, resp.Header.Get("X-Gatehouse-Cost-Usd"), first)
	}
	r := recordOf(t, gw.URL, resp.Header.Get("X-Gatehouse-Request-Id"))
	if r.Cache != "semantic" || r.Cost != 0 || r.Saved == 0 {
		t.Fatalf("semantic hit recorded as %+v", r)
	}
	_, resp = ask(gw.URL, "gh-sem-qa", "", "how do I bake sourdough bread at home?")
	expect(resp, "miss", 2)
	_, resp = ask(gw.URL, "gh-sem-qa", "You answer in French.", "tell me france's capital city")
	expect(resp, "miss", 3) // another conversation: another scope
	_, resp = ask(gw.URL, "gh-sem-other", "", "tell me france's capital city")
	expect(resp, "miss", 4) // another project

	// A stream of a paraphrase replays the stored answer.
	c := gw.client(option.WithAPIKey("gh-sem-qa"))
	var sresp *http.Response
	st := c.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: "chat",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("which city is the capital of france?")}},
		option.WithResponseInto(&sresp))
	var acc openai.ChatCompletionAccumulator
	for st.Next() {
		acc.AddChunk(st.Current())
	}
	if err := st.Err(); err != nil {
		t.Fatal(err)
	}
	if sresp.Header.Get("X-Gatehouse-Cache") != "semantic" || acc.Choices[0].Message.Content != first {
		t.Fatalf("streamed paraphrase: cache %q, %q", sresp.Header.Get("X-Gatehouse-Cache"), acc.Choices[0].Message.Content)
	}

	// After a restart the index and the answers come back from SQLite.
	stop()
	gw, _ = stoppableGateway(t, dir, cfg)
	calls := upstreamCalls(up)
	got, resp := ask(gw.URL, "gh-sem-qa", "", "tell me the capital city of france")
	expect(resp, "semantic", calls)
	if got != first {
		t.Fatalf("after a restart: %q, want %q", got, first)
	}
}

// TestSemanticCacheOptInAndTimeout: with the semantic cache off by
// default, a project turns it on for itself through the admin API; and
// an embedder slower than the timeout leaves the request to go upstream
// at once, uncached.
func TestSemanticCacheOptInAndTimeout(t *testing.T) {
	up := startUpstream(t, mockllm.Options{})
	gw := startGateway(t, semanticConfig(t, up, false, ""))
	body := func(q string) string { return `{"model":"chat","messages":[{"role":"user","content":"` + q + `"}]}` }
	p := adminPost(t, gw.URL, "/admin/projects", `{"name":"opt"}`)
	key := adminPost(t, gw.URL, "/admin/keys", `{"project":"opt","name":"k"}`)["key"].(string)
	state := func(q string) string {
		t.Helper()
		resp, b := rawChat(t, gw.URL, key, body(q))
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%d %s", resp.StatusCode, b)
		}
		return resp.Header.Get("X-Gatehouse-Cache")
	}
	state("what is the capital of france?")
	waitFor(t, 30*time.Second, "the answer kept", func() bool { return state("what is the capital of france?") == "hit" })
	if s := state("tell me france's capital city"); s != "miss" {
		t.Fatalf("semantic off by default, yet %q", s)
	}
	adminDo(t, gw.URL, http.MethodPatch, "/admin/projects/"+p["id"].(string), `{"cache":{"semantic":{"enabled":true,"threshold":0.88}}}`, 200)
	// The override reaches the key cache within moments (KeyChanges), and
	// an answer is indexed once it is written: ask about one country after
	// another until a paraphrase of the last one is a semantic hit.
	countries := []string{"italy", "spain", "germany", "japan", "canada", "egypt", "peru", "kenya", "norway", "chile"}
	i := 0
	waitFor(t, 30*time.Second, "the opted-in project's semantic hit", func() bool {
		c := countries[i%len(countries)]
		i++
		state("what is the capital of " + c + "?")
		time.Sleep(20 * time.Millisecond) // the answer's vector is indexed just after the response
		resp, _ := rawChat(t, gw.URL, key, body("tell me "+c+"'s capital city"), "Cache-Control", "no-store")
		return resp.Header.Get("X-Gatehouse-Cache") == "semantic"
	})

	// A slow embedder (an upstream that answers embeddings after 2 s)
	// with a 100 ms timeout: the request goes on at once, a plain miss.
	slow := startUpstream(t, mockllm.Options{Latency: 2 * time.Second})
	gw2 := startGateway(t, `listen: 127.0.0.1:0
providers:
  - {name: up, type: openai-compatible, base_url: `+up.URL+`/v1, api_key: `+upstreamKey+`}
  - {name: slow, type: openai-compatible, base_url: `+slow.URL+`/v1, api_key: `+upstreamKey+`}
keys:
  - {key: gh-sem-slow, name: s, project: s}
models:
  - name: chat
    targets: [{provider: up, model: gpt-4o-mini}]
cache:
  exact: {enabled: true}
  semantic: {enabled: true, timeout: 100ms, embedder: {provider: slow, model: text-embedding-3-small}}
`)
	start := time.Now()
	resp, b := rawChat(t, gw2.URL, "gh-sem-slow", body("is it slow?"))
	if took := time.Since(start); resp.StatusCode != http.StatusOK || took > time.Second || resp.Header.Get("X-Gatehouse-Cache") != "miss" {
		t.Fatalf("with a slow embedder: %d in %v, cache %q: %s", resp.StatusCode, took, resp.Header.Get("X-Gatehouse-Cache"), b)
	}
}

// TestSemanticCacheSharedThroughPgvector: in cluster mode on PostgreSQL
// with pgvector, what one replica stored is found by another: the vector
// in pgvector, the answer in Redis.
func TestSemanticCacheSharedThroughPgvector(t *testing.T) {
	up := startUpstream(t, mockllm.Options{})
	storage := fmt.Sprintf("storage: {redis: '%s', postgres: '%s'}\nlimits: {redis_prefix: '%s'}\n",
		os.Getenv("GATEHOUSE_TEST_REDIS"), pgtest.DSNFrom(t, "GATEHOUSE_TEST_PGVECTOR", "gh_semvec_"), uniquePrefix())
	cfg := semanticConfig(t, up, true, storage)
	a, _ := startProcess(t, cfg)
	b, _ := startProcess(t, cfg)
	body := func(q string) string { return `{"model":"chat","messages":[{"role":"user","content":"` + q + `"}]}` }
	resp, first := rawChat(t, "http://"+a.addr, "gh-sem-qa", body("what is the capital of france?"))
	if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Gatehouse-Cache") != "miss" {
		t.Fatalf("first: %d %s", resp.StatusCode, resp.Header.Get("X-Gatehouse-Cache"))
	}
	var again []byte
	waitFor(t, 30*time.Second, "the other replica to find the answer", func() bool {
		resp, again = rawChat(t, "http://"+b.addr, "gh-sem-qa", body("tell me france's capital city"), "Cache-Control", "no-store")
		return resp.Header.Get("X-Gatehouse-Cache") == "semantic"
	})
	var x, y struct {
		Choices []struct{ Message struct{ Content string } }
	}
	if json.Unmarshal(first, &x) != nil || json.Unmarshal(again, &y) != nil || len(x.Choices) == 0 ||
		len(y.Choices) == 0 || x.Choices[0].Message.Content != y.Choices[0].Message.Content {
		t.Fatalf("the other replica answered %s, the first %s", again, first)
	}
}

// TestSemanticCachePerKey: with per_key, a key gets only its own
// answers, even within one project.
func TestSemanticCachePerKey(t *testing.T) {
	up := startUpstream(t, mockllm.Options{})
	cfg := strings.Replace(semanticConfig(t, up, true, ""), "    timeout: 5s\n", "    timeout: 5s\n    per_key: true\n", 1)
	cfg = strings.Replace(cfg, "  - {key: gh-sem-other, name: other, project: other}\n",
		"  - {key: gh-sem-other, name: other, project: other}\n  - {key: gh-sem-qa2, name: qa2, project: qa}\n", 1)
	gw := startGateway(t, cfg)
	body := func(q string) string { return `{"model":"chat","messages":[{"role":"user","content":"` + q + `"}]}` }
	rawChat(t, gw.URL, "gh-sem-qa", body("what is the capital of france?"))
	waitFor(t, 30*time.Second, "the owner's semantic hit", func() bool {
		resp, _ := rawChat(t, gw.URL, "gh-sem-qa", body("tell me france's capital city"), "Cache-Control", "no-store")
		return resp.Header.Get("X-Gatehouse-Cache") == "semantic"
	})
	if resp, _ := rawChat(t, gw.URL, "gh-sem-qa2", body("tell me france's capital city"), "Cache-Control", "no-store"); resp.Header.Get("X-Gatehouse-Cache") != "miss" {
		t.Fatalf("another key of the project got %q", resp.Header.Get("X-Gatehouse-Cache"))
	}
}
