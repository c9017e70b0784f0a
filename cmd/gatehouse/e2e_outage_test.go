package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gatehouse/internal/mockllm"
	"gatehouse/internal/testservers"
)

// The failure tests: cluster mode with its PostgreSQL or its Redis
// stopped or crashed under load, and started again. Each runs on servers
// of its own (internal/testservers), never on the shared test services.

// answer is one HTTP exchange of a failure test, read whole.
type answer struct {
	status int
	header http.Header
	body   []byte
}

// call sends one request and reads the whole answer; safe from any
// goroutine (it reports instead of failing the test).
func call(method, url, bearer, body string) (answer, error) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		return answer{}, err
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return answer{status: resp.StatusCode, header: resp.Header, body: b}, err
}

// mustCall is call from the test's goroutine, failing the test on a
// transport error or a status other than want.
func mustCall(t *testing.T, want int, method, url, bearer, body string) answer {
	t.Helper()
	a, err := call(method, url, bearer, body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	if a.status != want {
		t.Fatalf("%s %s: %d %s; want %d", method, url, a.status, a.body, want)
	}
	return a
}

// openAIErrorCode is the code of an error in OpenAI's shape, or a
// description of why the body is not one.
func openAIErrorCode(b []byte) string {
	var e struct {
		Error *struct {
			Message string  `json:"message"`
			Type    string  `json:"type"`
			Code    *string `json:"code"`
		} `json:"error"`
	}
	if json.Unmarshal(b, &e) != nil || e.Error == nil || e.Error.Message == "" || e.Error.Type == "" || e.Error.Code == nil {
		return "not an OpenAI error: " + string(b)
	}
	return *e.Error.Code
}

// anthropicErrorType is the error type of an error in Anthropic's shape.
func anthropicErrorType(b []byte) string {
	var e struct {
		Type  string `json:"type"`
		Error *struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(b, &e) != nil || e.Type != "error" || e.Error == nil || e.Error.Message == "" {
		return "not an Anthropic error: " + string(b)
	}
	return e.Error.Type
}

// chatBody is a small chat request on model.
func chatBody(model string, i int) string {
	return fmt.Sprintf(`{"model":%q,"max_tokens":10,"messages":[{"role":"user","content":"n%d"}]}`, model, i)
}

// loadTally is a load of chat requests from a few goroutines until stop:
// the request ids of the answered requests, and the count of each status.
type loadTally struct {
	mu       sync.Mutex
	ids      []string
	statuses map[int]int
	answered atomic.Int64
	done     chan struct{}
}

// startLoad sends chat requests on model with key from workers
// goroutines until stop is closed.
func startLoad(base, key, model string, workers int, stop <-chan struct{}) *loadTally {
	l := &loadTally{statuses: map[int]int{}, done: make(chan struct{})}
	var wg sync.WaitGroup
	var n atomic.Int64
	for range workers {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				a, err := call(http.MethodPost, base+"/v1/chat/completions", key, chatBody(model, int(n.Add(1))))
				if err != nil {
					continue // no answer, no claim
				}
				if a.status != http.StatusOK {
					time.Sleep(2 * time.Millisecond) // a refusal is instant: do not spin
				}
				l.mu.Lock()
				l.statuses[a.status]++
				if a.status == http.StatusOK {
					l.ids = append(l.ids, a.header.Get("X-Gatehouse-Request-Id"))
				}
				l.mu.Unlock()
				l.answered.Add(1)
			}
		})
	}
	go func() { wg.Wait(); close(l.done) }()
	return l
}

// waitAnswered waits until the load has answered n more requests.
func (l *loadTally) waitAnswered(t *testing.T, n int64, what string) {
	t.Helper()
	target := l.answered.Load() + n
	waitFor(t, 20*time.Second, what, func() bool { return l.answered.Load() >= target })
}

// TestPostgresOutage crashes PostgreSQL in the middle of a load on a
// cluster-mode gateway and starts it again. Meanwhile a virtual key made
// through the admin API before the crash keeps working from the
// in-process cache, as does the config's key; admin writes answer 503
// store_unavailable in the OpenAI shape while what the process holds
// (the model list, the routing state) still answers; and usage records
// spill to disk and arrive exactly once after the server returns: every
// answered request has its record, and the hourly rollup counts each
// record once.
func TestPostgresOutage(t *testing.T) {
	pg := testservers.StartPostgres(t)
	rd := testservers.StartRedis(t, testservers.RedisOptions{})
	up := startUpstream(t, mockllm.Options{})
	dir := t.TempDir()
	spill := filepath.Join(dir, "spill")
	cfg := baseConfig(up, fmt.Sprintf("admin_key: %s\nstorage: {redis: '%s', postgres: '%s'}\nlimits: {redis_timeout: 10s}\nusage: {spill_dir: %s}\n",
		testAdminKey, rd.URL(), pg.DSN(), spill))
	gw, stop := stoppableGateway(t, dir, cfg)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("gateway warnings: %s", warnLines(gw.Logs.String()))
		}
	})
	adminPost(t, gw.URL, "/admin/projects", `{"name":"virt"}`)
	virt := adminPost(t, gw.URL, "/admin/keys", `{"project":"virt","name":"v","rpm":100000}`)
	virtKey, virtID := virt["key"].(string), virt["id"].(string)
	mustCall(t, 200, "POST", gw.URL+"/v1/chat/completions", virtKey, chatBody("chat", 0)) // now cached

	halt := make(chan struct{})
	static := startLoad(gw.URL, clientKey, "chat", 3, halt)
	virtual := startLoad(gw.URL, virtKey, "chat", 1, halt)
	static.waitAnswered(t, 100, "load before the crash")
	if err := pg.Kill(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "records spilled to disk", func() bool {
		files, _ := filepath.Glob(filepath.Join(spill, "spill-*.jsonl"))
		return len(files) > 0
	})
	static.waitAnswered(t, 100, "the config's key served while PostgreSQL is down")
	virtual.waitAnswered(t, 30, "the virtual key served from the cache while PostgreSQL is down")

	a := mustCall(t, 503, "POST", gw.URL+"/admin/keys", testAdminKey, `{"project":"virt","name":"during"}`)
	if code := openAIErrorCode(a.body); code != "store_unavailable" || a.header.Get("Retry-After") == "" {
		t.Errorf("admin write while PostgreSQL is down: %s, Retry-After %q; want store_unavailable with a Retry-After", code, a.header.Get("Retry-After"))
	}
	a = mustCall(t, 503, "PATCH", gw.URL+"/admin/keys/"+virtID, testAdminKey, `{"rpm":5}`)
	if code := openAIErrorCode(a.body); code != "store_unavailable" {
		t.Errorf("admin patch while PostgreSQL is down: %s", code)
	}
	mustCall(t, 200, "GET", gw.URL+"/v1/models", virtKey, "")
	mustCall(t, 200, "GET", gw.URL+"/admin/models", testAdminKey, "")

	if err := pg.Start(); err != nil {
		t.Fatal(err)
	}
	static.waitAnswered(t, 50, "load after the restart")
	close(halt)
	<-static.done
	<-virtual.done
	mustCall(t, 201, "POST", gw.URL+"/admin/keys", testAdminKey, `{"project":"virt","name":"after"}`)

	for name, l := range map[string]*loadTally{"config key": static, "virtual key": virtual} {
		if len(l.statuses) != 1 || l.statuses[200] == 0 {
			t.Errorf("%s: statuses %v; want only 200s through the outage", name, l.statuses)
		}
	}
	want := append(append([]string(nil), static.ids...), virtual.ids...)
	conn := connectPG(t, pg.DSN())
	ctx := context.Background()
	waitFor(t, 20*time.Second, "every record in PostgreSQL", func() bool {
		var n int
		_ = conn.QueryRow(ctx, `SELECT count(*) FROM usage_records`).Scan(&n)
		return n >= len(want)+1
	})
	stop()
	stored := map[string]int{}
	rows, err := conn.Query(ctx, `SELECT request_id, count(*) FROM usage_records GROUP BY request_id`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		var n int
		if err := rows.Scan(&id, &n); err != nil {
			t.Fatal(err)
		}
		stored[id] = n
	}
	for _, id := range want {
		if stored[id] != 1 {
			t.Fatalf("answered request %s has %d records, want exactly 1", id, stored[id])
		}
	}
	if len(stored) != len(want)+1 { // and the warm-up request
		t.Errorf("%d records stored for %d answered requests", len(stored), len(want)+1)
	}
	var records, rolled int
	if err := conn.QueryRow(ctx, `SELECT (SELECT count(*) FROM usage_records), (SELECT coalesce(sum(requests), 0) FROM usage_hourly)`).Scan(&records, &rolled); err != nil {
		t.Fatal(err)
	}
	if records != rolled {
		t.Errorf("the hourly rollup counts %d requests for %d records: a replayed batch counted twice or not at all", rolled, records)
	}
	t.Logf("%d requests answered through the outage (%d on the virtual key)", len(want), len(virtual.ids))
}
