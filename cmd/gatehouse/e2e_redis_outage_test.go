package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"gatehouse/internal/limit"
	"gatehouse/internal/mockllm"
	"gatehouse/internal/testservers"
)

// outageCluster is two gateway replicas sharing a Redis and a PostgreSQL
// of the test's own, serving the limit tests' priced models ("chat"
// costs exactly $0.01 a request of max_tokens 10).
type outageCluster struct {
	rd   *testservers.Redis
	pg   *testservers.Postgres
	urls []string
	gws  []*testGateway
	up   *upstream
	conn *pgx.Conn // to the PostgreSQL, made by the first recorded
}

// startOutageCluster starts the servers and two replicas with the given
// limits section. Redis persists its data: stopping it is an outage, not
// a loss of its counters (which is another test's subject).
func startOutageCluster(t *testing.T, limits string) *outageCluster {
	t.Helper()
	c := &outageCluster{rd: testservers.StartRedis(t, testservers.RedisOptions{Persist: true}), pg: testservers.StartPostgres(t)}
	up := startUpstream(t, mockllm.Options{Reply: longReply})
	c.up = up
	cfg := limitsConfig(up, "  - {key: "+clientKey+", name: tester, project: qa}\n",
		fmt.Sprintf("admin_key: %s\nstorage: {redis: '%s', postgres: '%s'}\n%s", testAdminKey, c.rd.URL(), c.pg.DSN(), limits))
	for range 2 {
		gw := startGateway(t, cfg)
		c.urls = append(c.urls, gw.URL)
		c.gws = append(c.gws, gw)
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("replica %s warnings: %s", gw.URL, warnLines(gw.Logs.String()))
			}
		})
	}
	return c
}

// newKey makes a virtual key (in a new project) with the given settings
// and returns its secret and ID.
func (c *outageCluster) newKey(t *testing.T, project, settings string) (secret, id string) {
	t.Helper()
	adminPost(t, c.urls[0], "/admin/projects", `{"name":"`+project+`"}`)
	k := adminPost(t, c.urls[0], "/admin/keys", `{"project":"`+project+`","name":"k"`+settings+`}`)
	return k["key"].(string), k["id"].(string)
}

// counted is the key's spend as the limiter counts it (the admin API
// reads Redis's counter), in micro-dollars; -1 while the API cannot read
// it.
func (c *outageCluster) counted(t *testing.T, keyID string) limit.Micros {
	t.Helper()
	var b budgeted
	adminJSON(t, c.urls[0], "/admin/keys/"+keyID, &b)
	if b.Spend == nil {
		return -1
	}
	return mustUSD(t, b.Spend.USD)
}

// recorded is the sum of the cost of the key's usage records.
func (c *outageCluster) recorded(t *testing.T, keyID string) limit.Micros {
	t.Helper()
	if c.conn == nil {
		c.conn = connectPG(t, c.pg.DSN())
	}
	var sum int64
	if err := c.conn.QueryRow(context.Background(), `SELECT coalesce(sum(cost_micros), 0)::bigint FROM usage_records WHERE key_id = $1`, keyID).Scan(&sum); err != nil {
		t.Fatal(err)
	}
	return limit.Micros(sum)
}

// wantCountedIsRecorded waits until the limiter's counter of the key
// equals the cost of its usage records: every reservation settled, none
// leaked, none counted twice.
func (c *outageCluster) wantCountedIsRecorded(t *testing.T, keyID string) limit.Micros {
	t.Helper()
	var counted, recorded limit.Micros
	deadline := time.Now().Add(15 * time.Second)
	for {
		counted, recorded = c.counted(t, keyID), c.recorded(t, keyID)
		if counted == recorded && recorded > 0 {
			return recorded
		}
		if time.Now().After(deadline) {
			t.Fatalf("the limiter counts %s spent, the usage records add up to %s: a reservation leaked or a cost was lost", counted, recorded)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// messagesCall sends one Anthropic Messages request.
func messagesCall(base, key string) (answer, error) {
	req, err := http.NewRequest(http.MethodPost, base+"/v1/messages",
		strings.NewReader(`{"model":"chat","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		return answer{}, err
	}
	req.Header.Set("x-api-key", key)
	req.Header.Set("anthropic-version", "2023-06-01")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	var raw json.RawMessage
	err = json.NewDecoder(resp.Body).Decode(&raw)
	return answer{status: resp.StatusCode, header: resp.Header, body: raw}, err
}

// sentAndLost counts the admissions the replicas logged as failed after
// their script was sent to Redis (the connection broke while waiting for
// the reply, rather than refusing to open): Redis may have run those
// scripts and reserved, and the gateway cannot know.
func (c *outageCluster) sentAndLost() int {
	n := 0
	for _, gw := range c.gws {
		for _, l := range strings.Split(gw.Logs.String(), "\n") {
			if strings.Contains(l, `"msg":"rate limits: Redis unavailable"`) && strings.Contains(l, "redis: admit:") && !strings.Contains(l, "dial tcp") {
				n++
			}
		}
	}
	return n
}

// TestRedisOutageFailClosed stops Redis under load on two replicas with
// limits.failure_policy: closed and starts it again. While it is down
// every request of a limited key answers 503 in the caller's dialect
// (OpenAI's on /v1/chat/completions, Anthropic's on /v1/messages) with a
// Retry-After; once it is back requests are admitted again.
//
// No reservation leaks: the requests admitted before the outage and
// answered during it (their settlements held back by the Fallback, or
// retried by the limiter, until Redis is back) leave the key's budget
// counter equal to the sum of its usage records' cost. Under the load,
// the counter may exceed the records only by the admissions whose reply
// the outage cut off (the script may have run; see README: Redis fails).
func TestRedisOutageFailClosed(t *testing.T) {
	c := startOutageCluster(t, "limits: {failure_policy: closed, redis_timeout: 2s, cooldown: 2s}\n")
	slowKey, slowID := c.newKey(t, "inflight", `,"budget":{"usd":1000,"period":"month"}`)
	loadKey, loadID := c.newKey(t, "loaded", `,"rpm":100000,"budget":{"usd":1000,"period":"month"}`)

	// Requests admitted now and answered during the outage, each
	// reserving its worst case ($1.00, for 1,000 tokens) and costing less
	// (the reply's 60 tokens): a settlement lost would leave $0.94 counted
	// that was never spent.
	slow := make(chan answer, 6)
	for i := range cap(slow) {
		go func() {
			a, err := call("POST", c.urls[i%2]+"/v1/chat/completions", slowKey,
				`{"model":"chat","max_tokens":1000,"messages":[{"role":"user","content":"slow @mock(latency=3s)"}]}`)
			if err != nil {
				a.status, a.body = -1, []byte(err.Error())
			}
			slow <- a
		}()
	}
	waitFor(t, 30*time.Second, "the slow requests admitted", func() bool { return c.up.mock.Stats().InFlight == int64(cap(slow)) })
	halt := make(chan struct{})
	var loads []*loadTally
	for _, u := range c.urls {
		loads = append(loads, startLoad(u, loadKey, "chat", 2, halt))
	}
	loads[0].waitAnswered(t, 50, "load before the outage")
	if err := c.rd.Stop(); err != nil {
		t.Fatal(err)
	}
	for _, u := range c.urls {
		a := mustCall(t, 503, "POST", u+"/v1/chat/completions", loadKey, chatBody("chat", 0))
		if code := openAIErrorCode(a.body); code != "limits_unavailable" || a.header.Get("Retry-After") == "" {
			t.Errorf("%s chat while Redis is down: %s, Retry-After %q; want limits_unavailable and a Retry-After", u, code, a.header.Get("Retry-After"))
		}
		m, err := messagesCall(u, loadKey)
		if err != nil {
			t.Fatal(err)
		}
		if typ := anthropicErrorType(m.body); m.status != 503 || typ != "overloaded_error" || m.header.Get("Retry-After") == "" {
			t.Errorf("%s messages while Redis is down: %d %s, Retry-After %q; want 503 overloaded_error and a Retry-After", u, m.status, typ, m.header.Get("Retry-After"))
		}
	}
	for range cap(slow) {
		if a := <-slow; a.status != 200 {
			t.Fatalf("a request admitted before the outage: %d %s", a.status, a.body)
		}
	}
	loads[1].waitAnswered(t, 50, "load while Redis is down")
	// Longer than a settlement used to be retried (5 attempts over under
	// a second to a few seconds), which dropped it and left its worst
	// case reserved.
	time.Sleep(6 * time.Second)
	if err := c.rd.Start(); err != nil {
		t.Fatal(err)
	}
	for _, l := range loads {
		ok := func() int { l.mu.Lock(); defer l.mu.Unlock(); return l.statuses[200] }
		before := ok()
		waitFor(t, 30*time.Second, "requests admitted again after Redis is back", func() bool { return ok() > before+20 })
	}
	close(halt)
	for _, l := range loads {
		<-l.done
		for status := range l.statuses {
			if status != 200 && status != 503 {
				t.Errorf("load answered %v; want only 200 and 503", l.statuses)
			}
		}
		if l.statuses[503] == 0 {
			t.Errorf("no 503 during the outage: %v", l.statuses)
		}
	}
	if spent := c.wantCountedIsRecorded(t, slowID); spent >= limit.USD(6) {
		t.Errorf("the requests in flight spent %s: their worst case, not their cost", spent)
	}
	var counted, recorded limit.Micros
	lost := c.sentAndLost()
	deadline := time.Now().Add(10 * time.Second)
	for {
		counted, recorded = c.counted(t, loadID), c.recorded(t, loadID)
		if counted >= recorded && counted-recorded <= limit.Micros(lost)*limit.USD(0.01) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("under load: %s counted, %s recorded, %d admissions cut off: more than they can explain", counted, recorded, lost)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("load statuses %v and %v; %s recorded, %s counted, %d admissions cut off", loads[0].statuses, loads[1].statuses, recorded, counted, lost)
}

// TestRedisOutageFailOpen stops Redis on two replicas with
// limits.failure_policy: open and replicas: 2. While it is down each
// replica admits exactly its share of every limit (half of a key's rpm,
// half of a key's budget); once it is back, what the replicas spent
// locally is in Redis's counter, which again equals the usage records'
// sum, and the budget the shares used up refuses on every replica.
func TestRedisOutageFailOpen(t *testing.T) {
	c := startOutageCluster(t, "limits: {failure_policy: open, replicas: 2, redis_timeout: 2s, cooldown: 100ms}\n")
	// $0.20 a month: 20 requests; each replica's share is 10.
	budgetKey, budgetID := c.newKey(t, "budgeted", `,"budget":{"usd":0.2,"period":"month"}`)
	// 20 requests a minute: each replica's share is 10.
	rateKey, _ := c.newKey(t, "rated", `,"rpm":20`)

	if err := c.rd.Stop(); err != nil {
		t.Fatal(err)
	}
	for _, u := range c.urls {
		for name, k := range map[string]struct {
			key, code string
		}{"budget": {budgetKey, "budget_exceeded"}, "rpm": {rateKey, "rate_limit_exceeded"}} {
			admitted := 0
			for i := range 15 {
				a := mustCallAny(t, "POST", u+"/v1/chat/completions", k.key, chatBody("chat", i))
				switch {
				case a.status == 200:
					admitted++
				case a.status == 429 && openAIErrorCode(a.body) == k.code:
				default:
					t.Fatalf("%s %s request %d while Redis is down: %d %s", u, name, i, a.status, a.body)
				}
			}
			if admitted != 10 {
				t.Errorf("%s admitted %d of 15 on the %s key while Redis is down; want its share, 10", u, admitted, name)
			}
		}
	}
	if err := c.rd.Start(); err != nil {
		t.Fatal(err)
	}
	// Each replica carries what it spent locally to Redis within a
	// cooldown of Redis answering, with no request to prompt it.
	waitFor(t, 30*time.Second, "the replicas' local spend carried to Redis", func() bool {
		return c.counted(t, budgetID) == limit.USD(0.2)
	})
	for _, u := range c.urls {
		a := mustCallAny(t, "POST", u+"/v1/chat/completions", budgetKey, chatBody("chat", 99))
		if a.status != 429 || openAIErrorCode(a.body) != "budget_exceeded" {
			t.Errorf("%s after Redis is back: %d %s; want 429 budget_exceeded (20 × $0.01 spent of $0.20)", u, a.status, a.body)
		}
	}
	if spent := c.wantCountedIsRecorded(t, budgetID); spent != limit.USD(0.2) {
		t.Errorf("spent %s, want the whole budget, 0.200000, in the shares", spent)
	}
}

// mustCallAny is call from the test's goroutine, any status accepted.
func mustCallAny(t *testing.T, method, url, bearer, body string) answer {
	t.Helper()
	a, err := call(method, url, bearer, body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	return a
}
