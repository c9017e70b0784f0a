package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"gatehouse/internal/limit"
	"gatehouse/internal/mockllm"
	"gatehouse/internal/store/redis"
	"gatehouse/internal/store/redis/redistest"
	"gatehouse/internal/store/sqlite"
)

// longReply has far more than the 10 tokens the limit tests allow, so
// every answer is cut at max_tokens and costs exactly the same.
var longReply = strings.Repeat("word ", 60)

// pricedModels are the models of the limit tests: "chat" costs $0.001 an
// output token and nothing for input (so a request with max_tokens 10
// costs exactly $0.01, estimate and actual alike), "cheap" a thousandth
// of that.
const pricedModels = `models:
  - name: chat
    targets: [{provider: up, model: priced-model}]
  - name: cheap
    targets: [{provider: up, model: cheap-model}]
pricing:
  overrides:
    priced-model: {input: 0, output: 1000}
    cheap-model: {input: 0, output: 1}
`

// limitsConfig is a config with the mock upstream, the priced models and
// the given keys (YAML list items) and extra top-level sections.
func limitsConfig(up *upstream, keys, extra string) string {
	return `listen: 127.0.0.1:0
providers:
  - name: up
    type: openai-compatible
    base_url: ` + up.URL + `/v1
    api_key: ` + upstreamKey + `
keys:
` + keys + pricedModels + extra
}

// clusterStorage is the storage section for cluster mode on the test
// services, with a Redis prefix of its own so runs never share counters.
func clusterStorage(t testing.TB) string {
	t.Helper()
	return clusterStorageOn(t, os.Getenv("GATEHOUSE_TEST_REDIS"))
}

// clusterStorageOn is clusterStorage with the Redis server given.
func clusterStorageOn(t testing.TB, r string) string {
	t.Helper()
	p := os.Getenv("GATEHOUSE_TEST_POSTGRES")
	if r == "" || p == "" {
		t.Fatal(`cluster-mode tests need Redis and PostgreSQL: run eval "$(scripts/test-services start)" first (GATEHOUSE_TEST_REDIS / GATEHOUSE_TEST_POSTGRES are unset)`)
	}
	// A generous timeout: these tests measure exactness, and under -race
	// 500 concurrent requests on two cores can outwait the default 250ms,
	// which (failing closed) would answer 503.
	return fmt.Sprintf("storage: {redis: '%s', postgres: '%s'}\nlimits: {redis_prefix: '%s', redis_timeout: 10s}\n", r, p, uniquePrefix())
}

func uniquePrefix() string {
	var b [6]byte
	rand.Read(b[:])
	return "ght" + hex.EncodeToString(b[:]) + ":"
}

// burstClient is an openai-go client on a transport that keeps a
// connection per concurrent request.
func burstClient(base, key string) openai.Client {
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1000, MaxConnsPerHost: 0}}
	return openai.NewClient(option.WithBaseURL(base+"/v1/"), option.WithAPIKey(key), option.WithMaxRetries(0), option.WithHTTPClient(hc))
}

// outcome is one request of a burst.
type outcome struct {
	status int
	header http.Header
	code   string
	msg    string
}

func chatOnce(ctx context.Context, c openai.Client, model string, extra ...option.RequestOption) outcome {
	var resp *http.Response
	p := userMessage("hello there")
	p.Model = model
	p.MaxTokens = openai.Int(10)
	_, err := c.Chat.Completions.New(ctx, p, append(extra, option.WithResponseInto(&resp))...)
	if err == nil {
		return outcome{status: 200, header: resp.Header}
	}
	var apiErr *openai.Error
	if errors.As(err, &apiErr) {
		return outcome{status: apiErr.StatusCode, header: apiErr.Response.Header, code: apiErr.Code, msg: apiErr.Message}
	}
	return outcome{status: -1, msg: err.Error()}
}

// burst sends n concurrent chat requests, spread over the clients, and
// returns their outcomes and how long the burst took.
func burst(t *testing.T, n int, clients []openai.Client, model string) ([]outcome, time.Duration) {
	t.Helper()
	out := make([]outcome, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			out[i] = chatOnce(context.Background(), clients[i%len(clients)], model)
		}()
	}
	t0 := time.Now()
	close(start)
	wg.Wait()
	return out, time.Since(t0)
}

// checkExactRPM asserts that a burst against a key with rpm=100 admitted
// exactly 100 requests (plus what the bucket refilled if the burst
// outlasted a refill interval), and that every answer carries the
// headers the issue promises.
func checkExactRPM(t *testing.T, out []outcome, took time.Duration) {
	t.Helper()
	ok, limited := 0, 0
	for _, o := range out {
		switch o.status {
		case 200:
			ok++
			if o.header.Get("X-Ratelimit-Limit-Requests") != "100" || o.header.Get("X-Gatehouse-Cost-Usd") == "" {
				t.Fatalf("200 without limit or cost headers: %v", o.header)
			}
		case 429:
			limited++
			if o.code != "rate_limit_exceeded" || o.header.Get("Retry-After") == "" ||
				o.header.Get("X-Ratelimit-Remaining-Requests") != "0" || o.header.Get("X-Ratelimit-Reset-Requests") == "" {
				t.Fatalf("429 without Retry-After / x-ratelimit headers: code %q %v", o.code, o.header)
			}
		default:
			t.Fatalf("status %d: %s", o.status, o.msg)
		}
	}
	// rpm=100 refills one request every 600ms: a burst slower than that
	// may rightly admit one more per interval.
	refill := int(took / (600 * time.Millisecond))
	t.Logf("%d admitted, %d refused in %v", ok, limited, took.Round(time.Millisecond))
	if ok < 100 || ok > 100+refill {
		t.Fatalf("%d of %d admitted in %v, want exactly 100 (+%d refilled)", ok, len(out), took, refill)
	}
}

const rpmKey = "gh-rpm-100-key"

func TestLimitsExactRPMEmbedded(t *testing.T) {
	up := startUpstream(t, mockllm.Options{Reply: longReply})
	gw := startGateway(t, limitsConfig(up, "  - {key: "+rpmKey+", name: burst, project: qa, rpm: 100}\n", ""))
	out, took := burst(t, 500, []openai.Client{burstClient(gw.URL, rpmKey)}, "chat")
	checkExactRPM(t, out, took)
}

func TestLimitsExactRPMRedis(t *testing.T) {
	up := startUpstream(t, mockllm.Options{Reply: longReply})
	gw := startGateway(t, limitsConfig(up, "  - {key: "+rpmKey+", name: burst, project: qa, rpm: 100}\n", clusterStorage(t)))
	out, took := burst(t, 500, []openai.Client{burstClient(gw.URL, rpmKey)}, "chat")
	checkExactRPM(t, out, took)
}

func TestLimitsExactRPMThreeProcessesOneRedis(t *testing.T) {
	up := startUpstream(t, mockllm.Options{Reply: longReply})
	cfg := limitsConfig(up, "  - {key: "+rpmKey+", name: burst, project: qa, rpm: 100}\n", clusterStorage(t))
	var clients []openai.Client
	for range 3 {
		p, _ := startProcess(t, cfg)
		clients = append(clients, burstClient("http://"+p.addr, rpmKey))
	}
	out, took := burst(t, 500, clients, "chat")
	checkExactRPM(t, out, took)
}

// stoppableGateway is startGateway with an explicit stop, for restarts.
func stoppableGateway(t *testing.T, dir, yaml string) (*testGateway, func()) {
	t.Helper()
	path := filepath.Join(dir, "gatehouse.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return launchGateway(t, path, false)
}

// keySpend reads a key's recorded spend from the SQLite file.
func keySpend(t *testing.T, dbPath, keyID string) limit.Micros {
	t.Helper()
	st, err := sqlite.Open(context.Background(), dbPath)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	m, err := st.LoadSpend(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	var sum int64
	for k, v := range m {
		if k.Scope == limit.ScopeKey && k.ID == keyID {
			sum += v
		}
	}
	return limit.Micros(sum)
}

// TestLimitsBudgetUnderConcurrencyAndRestart: a $1.00 budget and requests
// that cost exactly $0.01 each. Reservations hold the worst case (the
// estimate equals the actual here, since input is free and every answer
// is cut at max_tokens), so 200 concurrent requests get exactly 100
// admitted and the settled spend is exactly $1.00: the documented bound
// above the budget is zero when the actual cost never exceeds the
// reservation. The spend survives a restart.
func TestLimitsBudgetUnderConcurrencyAndRestart(t *testing.T) {
	up := startUpstream(t, mockllm.Options{Reply: longReply})
	dir := t.TempDir()
	db := filepath.Join(dir, "spend.db")
	const key = "gh-budget-key"
	cfg := limitsConfig(up, "  - {key: "+key+", name: budgeted, project: qa, budget: {usd: 1, period: total}}\n",
		"storage: {sqlite: "+db+"}\nlimits: {flush_every: 100ms}\n")
	gw, stop := stoppableGateway(t, dir, cfg)

	out, _ := burst(t, 200, []openai.Client{burstClient(gw.URL, key)}, "chat")
	ok := 0
	var refused outcome
	for _, o := range out {
		switch o.status {
		case 200:
			ok++
			if c := o.header.Get("X-Gatehouse-Cost-Usd"); c != "0.010000" {
				t.Fatalf("cost header %q, want 0.010000", c)
			}
		case 429:
			refused = o
		default:
			t.Fatalf("status %d: %s", o.status, o.msg)
		}
	}
	if ok != 100 {
		t.Fatalf("%d requests admitted under a $1.00 budget at $0.01 each, want 100", ok)
	}
	if refused.code != "budget_exceeded" || !strings.Contains(refused.msg, "budgeted") || !strings.Contains(refused.msg, "total") {
		t.Fatalf("refusal: code %q message %q; want budget_exceeded naming the key's total budget", refused.code, refused.msg)
	}
	stop() // drains, settles, flushes the spend
	if got := keySpend(t, db, "static:budgeted"); got != limit.USD(1) {
		t.Fatalf("settled spend %s, want exactly 1.000000", got)
	}

	// The same file after a restart: the budget is still spent.
	gw2, _ := stoppableGateway(t, t.TempDir(), cfg)
	o := chatOnce(context.Background(), burstClient(gw2.URL, key), "chat")
	if o.status != 429 || o.code != "budget_exceeded" {
		t.Fatalf("after restart: status %d code %q, want 429 budget_exceeded", o.status, o.code)
	}
}

// TestLimitsCostHeaderAndStreamTrailer: the real cost as a header of a
// whole answer, as a trailer of a stream, and in the stream's log line.
func TestLimitsCostHeaderAndStreamTrailer(t *testing.T) {
	up := startUpstream(t, mockllm.Options{Reply: longReply})
	gw := startGateway(t, limitsConfig(up, "  - {key: "+clientKey+", name: tester, project: qa, rpm: 1000, tpm: 1000000}\n", ""))

	o := chatOnce(context.Background(), gw.client(), "chat")
	if o.status != 200 || o.header.Get("X-Gatehouse-Cost-Usd") != "0.010000" {
		t.Fatalf("status %d cost %q", o.status, o.header.Get("X-Gatehouse-Cost-Usd"))
	}
	if o.header.Get("X-Ratelimit-Limit-Tokens") != "1000000" || o.header.Get("X-Ratelimit-Reset-Tokens") == "" {
		t.Fatalf("token headers: %v", o.header)
	}

	req, _ := http.NewRequest(http.MethodPost, gw.URL+"/v1/chat/completions", strings.NewReader(
		`{"model":"chat","stream":true,"max_tokens":10,"messages":[{"role":"user","content":"stream please"}]}`))
	req.Header.Set("Authorization", "Bearer "+clientKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if _, declared := resp.Trailer["X-Gatehouse-Cost-Usd"]; resp.StatusCode != 200 || !declared {
		t.Fatalf("status %d, trailers declared %v", resp.StatusCode, resp.Trailer)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil || !bytes.HasSuffix(body, []byte("data: [DONE]\n\n")) {
		t.Fatalf("stream: %v %q", err, body)
	}
	if c := resp.Trailer.Get("X-Gatehouse-Cost-Usd"); c != "0.010000" {
		t.Fatalf("stream cost trailer %q, want 0.010000", c)
	}
	line := gw.logLine(t, resp.Header.Get("X-Gatehouse-Request-Id"))
	if !strings.Contains(line, `"cost_usd":"0.010000"`) {
		t.Fatalf("log line without the cost: %s", line)
	}
}

// TestLimitsAnthropicRefusalShape: /v1/messages refuses in Anthropic's
// error shape, with Retry-After.
func TestLimitsAnthropicRefusalShape(t *testing.T) {
	up := startUpstream(t, mockllm.Options{Reply: longReply})
	gw := startGateway(t, limitsConfig(up, "  - {key: "+clientKey+", name: tester, project: qa, rpm: 1}\n", ""))
	send := func() (*http.Response, []byte) {
		req, _ := http.NewRequest(http.MethodPost, gw.URL+"/v1/messages", strings.NewReader(
			`{"model":"chat","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`))
		req.Header.Set("x-api-key", clientKey)
		req.Header.Set("anthropic-version", "2023-06-01")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, b
	}
	if resp, b := send(); resp.StatusCode != 200 || resp.Header.Get("X-Gatehouse-Cost-Usd") != "0.010000" {
		t.Fatalf("first: %d %s %v", resp.StatusCode, b, resp.Header)
	}
	resp, b := send()
	var e struct {
		Type  string `json:"type"`
		Error struct{ Type, Message string }
	}
	if err := json.Unmarshal(b, &e); err != nil || resp.StatusCode != 429 || e.Type != "error" ||
		e.Error.Type != "rate_limit_error" || !strings.Contains(e.Error.Message, "tester") {
		t.Fatalf("second: %d %s", resp.StatusCode, b)
	}
	if ra, _ := strconv.Atoi(resp.Header.Get("Retry-After")); ra < 1 || resp.Header.Get("X-Ratelimit-Remaining-Requests") != "0" {
		t.Fatalf("Retry-After %q, headers %v", resp.Header.Get("Retry-After"), resp.Header)
	}
}

// adminPost calls the admin API and decodes the answer.
func adminPost(t *testing.T, base, path, body string) map[string]any {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, base+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+testAdminKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusCreated || json.Unmarshal(b, &out) != nil {
		t.Fatalf("POST %s: %d %s", path, resp.StatusCode, b)
	}
	return out
}

// TestLimitsCustomerDowngradeAndBlock: a customer over budget is served
// by its downgrade model (and told so), or refused when it blocks.
func TestLimitsCustomerDowngradeAndBlock(t *testing.T) {
	up := startUpstream(t, mockllm.Options{Reply: longReply})
	gw := startGateway(t, limitsConfig(up, "  - {key: "+clientKey+", name: tester, project: qa}\n", "admin_key: "+testAdminKey+"\n"))
	adminPost(t, gw.URL, "/admin/projects", `{"name":"shop"}`)
	key := adminPost(t, gw.URL, "/admin/keys", `{"project":"shop","name":"app"}`)["key"].(string)
	adminPost(t, gw.URL, "/admin/customers", `{"project":"shop","external_id":"alice","daily_usd":0.001,"on_exceed":"downgrade","downgrade_model":"cheap"}`)
	adminPost(t, gw.URL, "/admin/customers", `{"project":"shop","external_id":"bob","daily_usd":0.001,"on_exceed":"block"}`)
	c := gw.client(option.WithAPIKey(key))

	o := chatOnce(context.Background(), c, "chat", option.WithHeader("X-Gatehouse-Customer", "alice"))
	if o.status != 200 || o.header.Get("X-Gatehouse-Downgraded-From") != "chat" || o.header.Get("X-Gatehouse-Model") != "cheap-model" {
		t.Fatalf("alice: status %d, headers %v (%s)", o.status, o.header, o.msg)
	}
	if got := o.header.Get("X-Gatehouse-Cost-Usd"); got != "0.000010" {
		t.Fatalf("downgraded cost %q, want the cheap model's 0.000010", got)
	}

	// The user field names the customer too.
	var resp *http.Response
	p := userMessage("hi")
	p.MaxTokens = openai.Int(10)
	p.User = openai.String("bob")
	_, err := c.Chat.Completions.New(context.Background(), p, option.WithResponseInto(&resp))
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 429 || apiErr.Code != "budget_exceeded" || !strings.Contains(apiErr.Message, "customer bob") {
		t.Fatalf("bob: %v", err)
	}

	// A customer nobody configured has no budget of its own.
	if o := chatOnce(context.Background(), c, "chat", option.WithHeader("X-Gatehouse-Customer", "carol")); o.status != 200 ||
		o.header.Get("X-Gatehouse-Downgraded-From") != "" {
		t.Fatalf("carol: %d %v", o.status, o.header)
	}
}

// redisCommands reads INFO commandstats: calls per command.
func redisCommands(t *testing.T, url string) map[string]int64 {
	t.Helper()
	c, err := redis.NewClient(url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	info, err := c.Do(context.Background(), c.B().Info().Section("commandstats").Build()).ToString()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		name, rest, ok := strings.Cut(strings.TrimPrefix(sc.Text(), "cmdstat_"), ":calls=")
		if !ok {
			continue
		}
		n, _ := strconv.ParseInt(strings.SplitN(rest, ",", 2)[0], 10, 64)
		out[name] = n
	}
	return out
}

// TestLimitsOneRedisCommandPerRequest measures, from Redis's own
// statistics, the commands the admission path sends: exactly one EVALSHA
// per admitted request. The key has only a request rate, so settlement
// has nothing to correct and sends nothing. Commands a script runs are
// counted by Redis too and are left out. The Redis server is this test's
// own: the shared one counts other packages' commands too.
func TestLimitsOneRedisCommandPerRequest(t *testing.T) {
	up := startUpstream(t, mockllm.Options{Reply: longReply})
	redisURL := redistest.Start(t)
	gw := startGateway(t, limitsConfig(up, "  - {key: "+clientKey+", name: tester, project: qa, rpm: 10000}\n", clusterStorageOn(t, redisURL)))
	c := gw.client()
	if o := chatOnce(context.Background(), c, "chat"); o.status != 200 { // scripts loaded, connections up
		t.Fatalf("warm-up: %d %s", o.status, o.msg)
	}
	before := redisCommands(t, redisURL)
	const n = 50
	for range n {
		if o := chatOnce(context.Background(), c, "chat"); o.status != 200 {
			t.Fatalf("status %d %s", o.status, o.msg)
		}
	}
	after := redisCommands(t, redisURL)
	var admission atomic.Int64
	for cmd, calls := range after {
		d := calls - before[cmd]
		switch cmd {
		case "info", "ping", "hello", "client|setinfo", "client|setname", "client", "cluster|slots":
			continue // this test's own probe and the client library's connection upkeep
		case "get", "mget", "set", "incrby", "pexpireat", "exists", "del":
			continue // run inside the scripts: Redis counts them too, but they cost no round trip
		case "evalsha":
			admission.Store(d)
		case "eval":
			if d != 0 {
				t.Errorf("%d EVAL (script sent again) during %d requests", d, n)
			}
		default:
			if d != 0 {
				t.Errorf("%d %s commands during %d requests", d, cmd, n)
			}
		}
	}
	if got := admission.Load(); got != n {
		t.Fatalf("%d EVALSHA for %d requests, want exactly one each", got, n)
	}
}

// TestLimitsKeyModelRate: model_limits {chat: {rpm: 3}} admits exactly 3
// of a burst on "chat", while the key's other model stays open — for a
// static key of the config and for a virtual key made through the API.
func TestLimitsKeyModelRate(t *testing.T) {
	up := startUpstream(t, mockllm.Options{Reply: longReply})
	gw := startGateway(t, limitsConfig(up,
		"  - {key: "+clientKey+", name: tester, project: qa, model_limits: {chat: {rpm: 3}}}\n",
		"admin_key: "+testAdminKey+"\n"))
	adminPost(t, gw.URL, "/admin/projects", `{"name":"virt"}`)
	virt := adminPost(t, gw.URL, "/admin/keys", `{"project":"virt","name":"v","model_limits":{"chat":{"rpm":3}}}`)

	for name, key := range map[string]string{"static": clientKey, "virtual": virt["key"].(string)} {
		t.Run(name, func(t *testing.T) {
			c := burstClient(gw.URL, key)
			out, _ := burst(t, 12, []openai.Client{c}, "chat")
			ok, refused := 0, 0
			for _, o := range out {
				switch o.status {
				case 200:
					ok++
				case 429:
					refused++
					if !strings.Contains(o.msg, "key and model") || !strings.Contains(o.msg, "/chat") {
						t.Errorf("refusal does not name the key and model: %q", o.msg)
					}
				default:
					t.Errorf("status %d: %s", o.status, o.msg)
				}
			}
			if ok != 3 || refused != 9 {
				t.Fatalf("chat: %d admitted, %d refused; want 3 and 9", ok, refused)
			}
			for i := 0; i < 5; i++ {
				if o := chatOnce(context.Background(), c, "cheap"); o.status != 200 {
					t.Fatalf("cheap request %d: %d %s", i+1, o.status, o.msg)
				}
			}
		})
	}
}

// TestLimitsPriceSetThroughAdmin: a price set with PUT /admin/prices is
// what the very next request costs; deleting it brings back the config's.
func TestLimitsPriceSetThroughAdmin(t *testing.T) {
	up := startUpstream(t, mockllm.Options{Reply: longReply})
	gw := startGateway(t, limitsConfig(up, "  - {key: "+clientKey+", name: tester, project: qa, rpm: 1000}\n",
		"admin_key: "+testAdminKey+"\n"))
	cost := func() string {
		t.Helper()
		o := chatOnce(context.Background(), gw.client(), "chat")
		if o.status != 200 {
			t.Fatalf("status %d: %s", o.status, o.msg)
		}
		return o.header.Get("X-Gatehouse-Cost-Usd")
	}
	if c := cost(); c != "0.010000" {
		t.Fatalf("config price: cost %q, want 0.010000", c)
	}
	adminDo(t, gw.URL, http.MethodPut, "/admin/prices/priced-model", `{"input":0,"output":2000}`, 200)
	if c := cost(); c != "0.020000" {
		t.Fatalf("after PUT: cost %q, want 0.020000", c)
	}
	adminDo(t, gw.URL, http.MethodDelete, "/admin/prices/priced-model", "", 200)
	if c := cost(); c != "0.010000" {
		t.Fatalf("after DELETE: cost %q, want the config's 0.010000", c)
	}
}

func adminDo(t *testing.T, base, method, path, body string, want int) {
	t.Helper()
	req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+testAdminKey)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, b)
	}
}

// TestClusterPriceRefresh: a price set through one replica's admin API is
// used by that replica's next request and by another replica's within the
// documented refresh period (priceRefresh, 5 s), with no restart or reload.
func TestClusterPriceRefresh(t *testing.T) {
	up := startUpstream(t, mockllm.Options{Reply: longReply})
	cfg := limitsConfig(up, "  - {key: "+clientKey+", name: tester, project: qa, rpm: 100000}\n",
		"admin_key: "+testAdminKey+"\n"+clusterStorage(t))
	a, _ := startProcess(t, cfg)
	b, _ := startProcess(t, cfg)
	aURL, bURL := "http://"+a.addr, "http://"+b.addr
	cost := func(base string) string {
		t.Helper()
		o := chatOnce(context.Background(), burstClient(base, clientKey), "chat")
		if o.status != 200 {
			t.Fatalf("%s: status %d: %s", base, o.status, o.msg)
		}
		return o.header.Get("X-Gatehouse-Cost-Usd")
	}
	for _, base := range []string{aURL, bURL} {
		if c := cost(base); c != "0.010000" {
			t.Fatalf("%s before: cost %q, want the config's 0.010000", base, c)
		}
	}
	adminDo(t, aURL, http.MethodPut, "/admin/prices/priced-model", `{"input":0,"output":3000}`, 200)
	set := time.Now()
	if c := cost(aURL); c != "0.030000" {
		t.Fatalf("the replica that took the write: cost %q, want 0.030000 at once", c)
	}
	for cost(bURL) != "0.030000" {
		if time.Since(set) > priceRefresh+2*time.Second {
			t.Fatalf("the other replica still charges the old price %s after the write (refresh period %s)", time.Since(set).Round(time.Millisecond), priceRefresh)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("the other replica used the new price %s after the write", time.Since(set).Round(time.Millisecond))
	adminDo(t, bURL, http.MethodDelete, "/admin/prices/priced-model", "", 200)
	del := time.Now()
	for cost(aURL) != "0.010000" {
		if time.Since(del) > priceRefresh+2*time.Second {
			t.Fatalf("a deleted price still used by the other replica after %s", time.Since(del).Round(time.Millisecond))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestLimitsHeadersOnRefusalsOnly: with limits.headers: refusals an
// admitted response carries no x-ratelimit-* headers (its cost header
// stays) and a refused one carries them all.
func TestLimitsHeadersOnRefusalsOnly(t *testing.T) {
	up := startUpstream(t, mockllm.Options{Reply: longReply})
	keys := "  - {key: " + clientKey + ", name: tester, project: qa, rpm: 2, tpm: 100000}\n"
	gw := startGateway(t, limitsConfig(up, keys, "limits: {headers: refusals}\n"))
	client := burstClient(gw.URL, clientKey)
	rateHeaders := func(h http.Header) []string {
		var names []string
		for k := range h {
			if strings.HasPrefix(k, "X-Ratelimit-") {
				names = append(names, k)
			}
		}
		return names
	}
	ok := chatOnce(context.Background(), client, "chat")
	if ok.status != 200 || ok.header.Get("X-Gatehouse-Cost-Usd") == "" {
		t.Fatalf("first: status %d, headers %v", ok.status, ok.header)
	}
	if names := rateHeaders(ok.header); len(names) != 0 {
		t.Fatalf("admitted response carries %v with headers: refusals", names)
	}
	chatOnce(context.Background(), client, "chat")
	refused := chatOnce(context.Background(), client, "chat")
	if refused.status != 429 {
		t.Fatalf("third request: status %d, want 429", refused.status)
	}
	if names := rateHeaders(refused.header); len(names) != 6 || refused.header.Get("X-Ratelimit-Remaining-Requests") != "0" {
		t.Fatalf("refusal carries %v, want all six with remaining-requests 0", names)
	}
}

// TestLimitsEstimateOnlyWhenNeeded: the prompt is estimated (and its
// estimate logged) for a key with a token rate or a budget, not for one
// whose limits count only requests; the cost header is there either way.
func TestLimitsEstimateOnlyWhenNeeded(t *testing.T) {
	up := startUpstream(t, mockllm.Options{Reply: longReply})
	keys := "  - {key: " + clientKey + ", name: tester, project: qa, rpm: 1000}\n" +
		"  - {key: gh-test-tpm-key, name: counted, project: qa, tpm: 1000000}\n"
	gw := startGateway(t, limitsConfig(up, keys, ""))
	for _, c := range []struct {
		key      string
		estimate bool
	}{{clientKey, false}, {"gh-test-tpm-key", true}} {
		o := chatOnce(context.Background(), burstClient(gw.URL, c.key), "chat")
		if o.status != 200 || o.header.Get("X-Gatehouse-Cost-Usd") == "" {
			t.Fatalf("%s: status %d, headers %v", c.key, o.status, o.header)
		}
		line := gw.logLine(t, o.header.Get("X-Gatehouse-Request-Id"))
		if got := strings.Contains(line, `"estimated_prompt_tokens":`); got != c.estimate {
			t.Errorf("%s: estimate logged %v, want %v: %s", c.key, got, c.estimate, line)
		}
	}
}
