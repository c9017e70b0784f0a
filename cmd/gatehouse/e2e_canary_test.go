package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/rueidis"
	"google.golang.org/protobuf/proto"

	"gatehouse/internal/mockllm"
)

// canaryValue is a secret no run could produce by chance.
func canaryValue(t *testing.T, what string) string {
	t.Helper()
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return "CANARY-" + what + "-" + hex.EncodeToString(b)
}

// observed collects everything an outsider of some kind could read, by
// where it came from.
type observed map[string][]byte

func (o observed) add(where string, b []byte) { o[where] = append(o[where], b...) }

// get reads a URL with headers (name, value pairs) into o, headers and
// body, and returns the body.
func (o observed) get(t *testing.T, method, url, body string, hdr ...string) []byte {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var h bytes.Buffer
	_ = resp.Header.Write(&h)
	o.add(method+" "+req.URL.Path, append(h.Bytes(), b...))
	return b
}

// TestProviderSecretsNeverLeak configures providers whose API keys and
// header values are canaries, runs a workload through every feature
// (chat, streams, Messages, Responses, embeddings, the cache, an upstream
// 401 and 500, usage records, metrics, traces, the admin API, the
// dashboard), then looks for the canaries in everything observable: the
// gateway's log, every answer to clients, admin and dashboard, /metrics,
// the exported spans and the SQLite files. They must be nowhere.
func TestProviderSecretsNeverLeak(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "gatehouse.db")
	canaryRun(t, dir, "{sqlite: "+db+"}", func(t *testing.T, o observed) {
		files, _ := filepath.Glob(db + "*")
		spilled, _ := filepath.Glob(filepath.Join(dir, "spill", "*"))
		for _, f := range append(files, spilled...) {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			o.add(filepath.Base(f), b)
		}
		if len(files) == 0 {
			t.Fatal("no SQLite file to search")
		}
	})
}

// TestProviderSecretsNeverLeakCluster is the same run in cluster mode:
// the stores searched are every row of every table of the PostgreSQL
// schema and every key of the Redis database.
func TestProviderSecretsNeverLeakCluster(t *testing.T) {
	pg, redis := clusterDSN(t)
	dir := t.TempDir()
	canaryRun(t, dir, `{postgres: "`+pg+`", redis: "`+redis+`"}`, func(t *testing.T, o observed) {
		ctx := context.Background()
		c, err := pgx.Connect(ctx, pg)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close(ctx)
		rows, err := c.Query(ctx, `SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'`)
		if err != nil {
			t.Fatal(err)
		}
		tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil || len(tables) < 5 {
			t.Fatalf("tables of the schema: %v %v", tables, err)
		}
		for _, table := range tables {
			rows, err := c.Query(ctx, `SELECT row_to_json(t)::text FROM `+pgx.Identifier{table}.Sanitize()+` t`)
			if err != nil {
				t.Fatal(err)
			}
			all, err := pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil {
				t.Fatal(err)
			}
			o.add("postgres table "+table, []byte(strings.Join(all, "\n")))
		}
		rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{strings.TrimSuffix(strings.TrimPrefix(redis, "redis://"), "/0")}, DisableCache: true})
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		keys, err := rc.Do(ctx, rc.B().Keys().Pattern("*").Build()).AsStrSlice()
		if err != nil || len(keys) == 0 {
			t.Fatalf("redis keys: %d, %v", len(keys), err)
		}
		var dump bytes.Buffer
		for _, k := range keys {
			v, _ := rc.Do(ctx, rc.B().Dump().Key(k).Build()).ToString()
			dump.WriteString(k + "=" + v + "\n")
		}
		o.add("redis", dump.Bytes())
	})
}

// canaryRun runs the workload against a gateway on storage (the YAML of
// its storage section) and searches what it observed, and what stored
// adds once the gateway has stopped, for the canaries.
func canaryRun(t *testing.T, dir, storage string, stored func(t *testing.T, o observed)) {
	goodKey, headerValue := canaryValue(t, "key"), canaryValue(t, "header")
	badKey, failingKey := canaryValue(t, "badkey"), canaryValue(t, "failkey")
	canaries := []string{goodKey, headerValue, badKey, failingKey}

	good := mockllm.New(mockllm.Options{APIKey: goodKey, Reply: longReply})
	refusing := mockllm.New(mockllm.Options{APIKey: "the-right-key-is-not-the-configured-one"})
	failing := mockllm.New(mockllm.Options{APIKey: failingKey, ErrorStatus: 500})
	urls := map[string]string{}
	for name, m := range map[string]*mockllm.Server{"good": good, "refusing": refusing, "failing": failing} {
		srv := newLoopbackServer(t, m)
		urls[name] = srv
	}
	recv := startOTLPReceiver(t)
	const viewerKey = "gh-canary-viewer"
	yaml := `listen: 127.0.0.1:0
admin_key: ` + testAdminKey + `
admin_keys:
  - {name: dash, key: ` + viewerKey + `, role: viewer}
storage: ` + storage + `
usage: {spill_dir: ` + filepath.Join(dir, "spill") + `}
log: {level: debug, requests: true}
providers:
  - name: up
    type: openai-compatible
    base_url: ` + urls["good"] + `/v1
    api_key: ` + goodKey + `
    headers: {X-Tenant-Secret: "` + headerValue + `"}
  - {name: refusing, type: openai-compatible, base_url: ` + urls["refusing"] + `/v1, api_key: ` + badKey + `}
  - {name: failing, type: openai-compatible, base_url: ` + urls["failing"] + `/v1, api_key: ` + failingKey + `}
keys:
  - {key: ` + clientKey + `, name: tester, project: qa, budget: {usd: 100, period: month}}
models:
  - name: chat
    targets: [{provider: up, model: gpt-4o-mini}]
  - name: embed
    targets: [{provider: up, model: text-embedding-3-small}]
  - name: refused
    targets: [{provider: refusing, model: gpt-4o-mini}]
  - name: broken
    targets: [{provider: failing, model: gpt-4o-mini}]
cache:
  exact: {enabled: true, ttl: 1h}
telemetry:
  traces: {endpoint: '` + recv.srv.URL + `', sample_ratio: 1}
`
	gw, stop := stoppableGateway(t, dir, yaml)
	o := observed{}
	bearer := "Bearer " + clientKey
	chat := func(model string, stream bool) string {
		return fmt.Sprintf(`{"model":%q,"stream":%t,"messages":[{"role":"user","content":"canary run"}]}`, model, stream)
	}
	v1 := gw.URL + "/v1/"
	o.get(t, "POST", v1+"chat/completions", chat("chat", false), "Authorization", bearer)
	o.get(t, "POST", v1+"chat/completions", chat("chat", false), "Authorization", bearer) // a cache hit
	o.get(t, "POST", v1+"chat/completions", chat("chat", true), "Authorization", bearer)
	if b := o.get(t, "POST", v1+"chat/completions", chat("refused", false), "Authorization", bearer); !bytes.Contains(b, []byte(`"error"`)) {
		t.Fatalf("a provider's 401 reached the client as %s, not as an error", b)
	}
	o.get(t, "POST", v1+"chat/completions", chat("refused", true), "Authorization", bearer)
	o.get(t, "POST", v1+"chat/completions", chat("broken", false), "Authorization", bearer)
	o.get(t, "POST", v1+"messages", `{"model":"chat","max_tokens":50,"messages":[{"role":"user","content":"hi"}]}`, "x-api-key", clientKey, "anthropic-version", "2023-06-01")
	o.get(t, "POST", v1+"messages", `{"model":"refused","max_tokens":50,"stream":true,"messages":[{"role":"user","content":"hi"}]}`, "x-api-key", clientKey, "anthropic-version", "2023-06-01")
	o.get(t, "POST", v1+"responses", `{"model":"chat","input":"hello"}`, "Authorization", bearer)
	o.get(t, "POST", v1+"responses", `{"model":"refused","input":"hello","stream":true}`, "Authorization", bearer)
	o.get(t, "POST", v1+"embeddings", `{"model":"embed","input":"canary"}`, "Authorization", bearer)
	o.get(t, "POST", v1+"embeddings", `{"model":"refused","input":"canary"}`, "Authorization", bearer)
	o.get(t, "GET", v1+"models", "", "Authorization", bearer)
	if n := len(refusing.Requests()); n == 0 {
		t.Fatal("the refusing upstream was never called: the 401 path went untested")
	}

	// The admin API, as the admin and as a viewer.
	admin := "Bearer " + testAdminKey
	waitFor(t, 30*time.Second, "the usage records", func() bool {
		return bytes.Count(o.get(t, "GET", gw.URL+"/admin/logs?limit=500", "", "Authorization", admin), []byte(`"request_id"`)) >= 12
	})
	o.get(t, "POST", gw.URL+"/admin/keys", `{"project":"qa","name":"made"}`, "Authorization", admin)
	o.get(t, "PUT", gw.URL+"/admin/prices/gpt-4o-mini", `{"input":1,"output":2}`, "Authorization", admin)
	o.get(t, "DELETE", gw.URL+"/admin/cache", "", "Authorization", admin)
	for _, p := range []string{"projects", "keys", "customers", "prices", "usage", "usage/export", "logs", "models", "models/chat", "models/refused", "audit"} {
		o.get(t, "GET", gw.URL+"/admin/"+p, "", "Authorization", admin)
		o.get(t, "GET", gw.URL+"/admin/"+p, "", "Authorization", "Bearer "+viewerKey)
	}
	o.get(t, "POST", gw.URL+"/admin/projects", `{"name":"viewer-made"}`, "Authorization", "Bearer "+viewerKey)
	o.get(t, "GET", gw.URL+"/metrics", "")
	o.get(t, "GET", gw.URL+"/healthz", "")
	o.get(t, "GET", gw.URL+"/readyz", "")
	// The dashboard: its pages and its session.
	login := o.get(t, "POST", gw.URL+"/ui/api/login", `{"admin_key":"`+testAdminKey+`"}`, "Origin", gw.URL, "Sec-Fetch-Site", "same-origin")
	if !bytes.Contains(login, []byte(`"logged_in":true`)) {
		t.Fatalf("dashboard login: %s", login)
	}
	for _, p := range []string{"/ui/", "/ui/keys", "/ui/api/session", "/ui/api/openapi.json"} {
		o.get(t, "GET", gw.URL+p, "")
	}

	waitFor(t, 30*time.Second, "exported spans", func() bool {
		recv.mu.Lock()
		defer recv.mu.Unlock()
		return len(recv.spans) >= 10
	})
	stop() // flush usage records, spend and logs; close the database
	recv.mu.Lock()
	for _, s := range recv.spans {
		b, _ := proto.Marshal(s)
		o.add("exported spans", b)
	}
	recv.mu.Unlock()
	o.add("gateway log", []byte(gw.Logs.String()))
	stored(t, o)

	for where, b := range o {
		for _, c := range canaries {
			if i := bytes.Index(b, []byte(c)); i >= 0 {
				lo, hi := max(i-200, 0), min(i+len(c)+100, len(b))
				t.Errorf("%s holds a provider secret:\n…%q…", where, b[lo:hi])
			}
		}
	}
	// The search must be able to fail: the upstream saw the key, and the
	// gateway's log and answers are really there.
	var sawKey bool
	for _, r := range good.Requests() {
		sawKey = sawKey || strings.Contains(r.Header.Get("Authorization"), goodKey) && r.Header.Get("X-Tenant-Secret") == headerValue
	}
	if !sawKey {
		t.Error("the upstream never received the configured key and header: the canaries were not in play")
	}
	if len(o["gateway log"]) < 1000 || len(o["GET /metrics"]) < 1000 || len(o["exported spans"]) == 0 {
		t.Errorf("too little observed to mean anything: log %d bytes, metrics %d, spans %d",
			len(o["gateway log"]), len(o["GET /metrics"]), len(o["exported spans"]))
	}
}

// newLoopbackServer serves h on loopback until the test ends.
func newLoopbackServer(t *testing.T, h http.Handler) string {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}
