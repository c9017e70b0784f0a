package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"gatehouse/internal/account"
	"gatehouse/internal/limit"
	"gatehouse/internal/llm"
	"gatehouse/internal/mockllm"
)

// The upstream-fault matrix (issue 17): every provider type, every fault
// mockllm can stage, streamed and not. Whatever the upstream does, the
// client gets a clean answer in its dialect within the configured
// timeouts; a fault before any byte was relayed moves on to the backup
// target, one after does not and ends the stream with the dialect's error
// event; every request leaves exactly one usage record that counts what
// was relayed; the budget's spend is the records' sum; and the gateway is
// healthy, its goroutines back to where they were, afterwards.

// faultProviders are the provider types under test: the gateway model
// that reaches each through the faulty upstream alone ("<name>"), and
// with a healthy backup behind it ("<name>-fb").
var faultProviders = []struct{ name, entry, model string }{
	{"openai", "type: openai, base_url: %[2]s/v1, api_key: " + upstreamKey, "gpt-4o-mini"},
	{"compatible", "type: openai-compatible, base_url: %[2]s/v1, api_key: " + upstreamKey, "gpt-4o-mini"},
	{"azure", "type: azure, base_url: %[2]s, api_key: " + upstreamKey, "prod-4o"},
	{"anthropic", "type: anthropic, base_url: %[2]s, api_key: " + upstreamKey, "claude-sonnet-4-5"},
	{"gemini", "type: gemini, base_url: %[2]s/v1beta, api_key: " + upstreamKey, "gemini-2.5-flash"},
	{"ollama", "type: ollama, base_url: %[2]s/, api_key: " + upstreamKey + ", discover: false", "llama3.2"},
	{"bedrock", "type: bedrock, base_url: %[2]s, region: us-west-2", bedrockClaude},
}

// faultKey is the budgeted key every matrix request is sent with.
const faultKey = "gh-faults-budgeted"

// faultResponseLimit is the faulty providers' max_response_bytes: above
// every ordinary answer of the matrix, far below an enormous one. The
// gate of an enormous answer is a little above it, enough for the
// gateway to find the bound by reading.
const (
	faultResponseLimit = 4 << 10
	faultGateAt        = faultResponseLimit + 4<<10
)

// faultConfig routes every provider type to up, each model with and
// without a fallback target on backup. Breakers are off (TestFaultOpensBreaker
// covers them), so every row meets its fault; the timeouts are small so
// a hang costs seconds.
func faultConfig(up, backup *upstream, extra string) string {
	var b strings.Builder
	b.WriteString(`listen: 127.0.0.1:0
admin_key: ` + testAdminKey + `
timeouts: {connect: 2s, first_byte: 3s, idle: 2s, total: 30s}
retry: {backoff: 1ms, max_backoff: 5ms}
breaker: {failures: 0, error_rate: 0}
pricing: {unknown: default, default: {input: 1, output: 2}}
providers:
  - {name: backup, type: openai-compatible, base_url: ` + backup.URL + `/v1, api_key: ` + upstreamKey + `}
`)
	for _, p := range faultProviders {
		fmt.Fprintf(&b, "  - {name: %[1]s, max_response_bytes: %[3]d, "+p.entry+"}\n", p.name, up.URL, faultResponseLimit)
	}
	b.WriteString("keys:\n  - {key: " + faultKey + ", name: budgeted, project: qa, budget: {usd: 100, period: month}}\nmodels:\n")
	for _, p := range faultProviders {
		fmt.Fprintf(&b, "  - {name: %s, targets: [{provider: %s, model: %q}]}\n", p.name, p.name, p.model)
		fmt.Fprintf(&b, "  - {name: %s-fb, strategy: failover, targets: [{provider: %s, model: %q}, {provider: backup, model: gpt-4o-mini}]}\n",
			p.name, p.name, p.model)
		fmt.Fprintf(&b, "  - {name: %s-trickle, timeouts: {total: 2s}, targets: [{provider: %s, model: %q}]}\n", p.name, p.name, p.model)
	}
	b.WriteString(embedModels())
	return b.String() + extra
}

// startBackup is a healthy OpenAI-compatible upstream that ignores the
// faults meant for the first target: the directive travels in the prompt
// to every target, so the backup defuses it before its mock reads it.
func startBackup(t *testing.T) *upstream {
	t.Helper()
	m := mockllm.New(mockllm.Options{APIKey: upstreamKey})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		b = bytes.ReplaceAll(b, []byte("@mock("), []byte("(defused "))
		r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(b)), int64(len(b))
		m.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return &upstream{mock: m, URL: srv.URL}
}

// faultRow is one fault, streamed or not.
type faultRow struct {
	name      string
	directive string
	stream    bool
	// mid: the fault comes after content was relayed, so the client's
	// stream must have started and end with an error event; otherwise
	// nothing was relayed and the backup target must serve.
	mid bool
	// suffix picks the model variant: "-fb" (with the backup), "" or
	// "-trickle" (total timeout of 2s), both without.
	suffix string
}

var faultRows = []faultRow{
	{"truncate", "truncate", false, false, "-fb"},
	{"truncate stream", "truncate=5", true, true, "-fb"},
	{"malformed", "malformed", false, false, "-fb"},
	{"malformed stream", "malformed=5", true, true, "-fb"},
	{"error_in_200", "error_in_200", false, false, "-fb"},
	{"error_in_200 stream start", "error_in_200=0", true, false, "-fb"},
	{"error_in_200 stream", "error_in_200=5", true, true, "-fb"},
	{"reset", "reset_after=0", false, false, "-fb"},
	{"reset stream", "reset_after=4", true, true, "-fb"},
	{"cut stream", "fail_after=4", true, true, "-fb"},
	{"hang", "hang=true", false, false, "-fb"},
	{"hang after headers", "stall_after=4", true, true, "-fb"},
	{"slow trickle", "huge=800, chunks=40, tps=20", true, true, "-trickle"},
	{"error_in_200 alone", "error_in_200", false, false, ""},
	{"truncate alone", "truncate", false, false, ""},
	{"malformed alone", "malformed", false, false, ""},
	{"reset alone", "reset_after=0", false, false, ""},
	{"hang alone", "hang=true", false, false, ""},
	{"truncate stream start", "truncate=0", true, false, "-fb"},
	{"huge stream", "huge=4000000, chunks=200", true, false, ""},
	// Enormous non-streamed answers, over the provider's
	// max_response_bytes: announced by their Content-Length, or chunked.
	{"enormous", "huge=4000000", false, false, "-fb"},
	{"enormous alone", "huge=4000000", false, false, ""},
	{"enormous chunked", "huge=4000000", false, false, "-fb"},
	{"enormous chunked alone", "huge=4000000", false, false, ""},
}

// enormous reports whether the row's upstream answer is over the bound,
// held at the gate of a gatedUpstream.
func (r faultRow) enormous() bool { return strings.HasPrefix(r.name, "enormous") }

// faultyCalls is how many calls a row's fault before any byte costs the
// faulty upstream: one when the backup is behind it; two when it is the
// model's only deployment, retried once (route.Retry's default) as for
// any protocol failure, except an enormous answer, which the same call
// would bring again and is never retried on its deployment.
func (r faultRow) faultyCalls() int {
	if r.suffix == "-fb" || r.enormous() {
		return 1
	}
	return 2
}

// prompt is the row's user message: its directive, and the marks the
// gated upstream reads.
func (r faultRow) prompt() string {
	marks := ""
	if r.enormous() {
		marks = gateMark + " "
		if strings.Contains(r.name, "chunked") {
			marks += unsizedMark + " "
		}
	}
	return "tell me " + marks + "@mock(" + r.directive + ")"
}

// faultAnswer is what the client read.
type faultAnswer struct {
	status int
	header http.Header
	body   []byte
	err    error
}

func faultCall(client *http.Client, url string, hdr map[string]string, body string) faultAnswer {
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := client.Do(req)
	if err != nil {
		return faultAnswer{err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return faultAnswer{resp.StatusCode, resp.Header, b, err}
}

func TestUpstreamFaultMatrix(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", awsKeyID)
	t.Setenv("AWS_SECRET_ACCESS_KEY", awsSecret)
	t.Setenv("AWS_SESSION_TOKEN", awsToken)
	t.Setenv("AWS_BEARER_TOKEN_BEDROCK", "")
	t.Setenv("AWS_REGION", "eu-central-1")
	up := startGatedUpstream(t, mockllm.Options{AWSAccessKeyID: awsKeyID, AWSSecretKey: awsSecret, AWSSessionToken: awsToken,
		Models: []string{"gpt-4o-mini", "llama3.2:latest", "all-minilm:latest"}}, faultGateAt)
	backup := startBackup(t)
	dir := t.TempDir()
	db := filepath.Join(dir, "gatehouse.db")
	gw, stop := stoppableGateway(t, dir, faultConfig(up.upstream, backup,
		"storage: {sqlite: "+db+"}\nusage: {spill_dir: "+filepath.Join(dir, "spill")+"}\n"))
	// The client's own timeout only keeps a gateway bug from hanging the
	// test; the gateway's timeouts are what must end every row.
	client := &http.Client{Timeout: 2 * time.Minute}
	bearer := map[string]string{"Authorization": "Bearer " + faultKey}

	// Warm up every provider, then take the goroutine baseline.
	for _, p := range faultProviders {
		a := faultCall(client, gw.URL+"/v1/chat/completions", bearer, chatBody(p.name, 0))
		if a.err != nil || a.status != 200 {
			t.Fatalf("%s without a fault: %d %v %s", p.name, a.status, a.err, a.body)
		}
	}
	client.CloseIdleConnections()
	baseline := runtime.NumGoroutine()

	var ids []string
	for _, p := range faultProviders {
		for _, row := range faultRows {
			t.Run(p.name+"/"+row.name, func(t *testing.T) {
				backupBefore := backup.mock.Stats().Requests
				body := fmt.Sprintf(`{"model":%q,"stream":%v,"messages":[{"role":"user","content":%q}]}`,
					p.name+row.suffix, row.stream, row.prompt())
				a := faultCall(client, gw.URL+"/v1/chat/completions", bearer, body)
				if row.enormous() {
					up.check(t, faultResponseLimit, row.faultyCalls())
				}
				if a.err != nil {
					t.Fatalf("the client read an error from the gateway: %v (status %d, %d bytes)", a.err, a.status, len(a.body))
				}
				id := a.header.Get("X-Gatehouse-Request-Id")
				if id == "" {
					t.Fatalf("no request id: %d %s", a.status, a.body)
				}
				ids = append(ids, id)
				r := recordOf(t, gw.URL, id)
				backupCalls := backup.mock.Stats().Requests - backupBefore
				checkFaultAnswer(t, row, a, r, backupCalls)
			})
		}
	}

	// The Anthropic dialect meets the same faults on /v1/messages: errors
	// in its shape, its own error event in a broken stream.
	anthHdr := map[string]string{"X-Api-Key": faultKey, "Anthropic-Version": "2023-06-01"}
	for _, p := range []string{"compatible", "anthropic", "bedrock"} {
		for _, row := range []faultRow{
			{"error_in_200 alone", "error_in_200", false, false, ""},
			{"truncate stream", "truncate=5", true, true, "-fb"},
			{"reset stream", "reset_after=4", true, true, "-fb"},
			{"malformed", "malformed", false, false, "-fb"},
			{"enormous alone", "huge=4000000", false, false, ""},
			{"enormous chunked", "huge=4000000", false, false, "-fb"},
		} {
			t.Run("messages/"+p+"/"+row.name, func(t *testing.T) {
				body := fmt.Sprintf(`{"model":%q,"max_tokens":4000,"stream":%v,"messages":[{"role":"user","content":%q}]}`,
					p+row.suffix, row.stream, row.prompt())
				a := faultCall(client, gw.URL+"/v1/messages", anthHdr, body)
				if row.enormous() {
					up.check(t, faultResponseLimit, row.faultyCalls())
				}
				if a.err != nil {
					t.Fatalf("the client read an error from the gateway: %v", a.err)
				}
				id := a.header.Get("X-Gatehouse-Request-Id")
				ids = append(ids, id)
				r := recordOf(t, gw.URL, id)
				switch {
				case row.mid:
					if a.status != 200 || !bytes.Contains(a.body, []byte("event: error\ndata: {\"type\":\"error\"")) ||
						bytes.Contains(a.body, []byte("event: message_stop")) {
						t.Errorf("a stream broken after its start: %d %s; want Anthropic's error event and no message_stop", a.status, a.body)
					}
					if r.ErrorKind == "" || r.CompletionTokens == 0 || r.Status != 200 || r.Attempts != 1 {
						t.Errorf("record %+v: want the error and the tokens relayed, 1 attempt", r)
					}
				case row.suffix == "-fb":
					if a.status != 200 || a.header.Get("X-Gatehouse-Provider") != "backup" {
						t.Errorf("%d %s from %q: want the backup's answer", a.status, a.body, a.header.Get("X-Gatehouse-Provider"))
					}
					if r.Status != 200 || r.ErrorKind != "" || r.Provider != "backup" || r.Attempts != 2 || r.CompletionTokens == 0 || r.Cost == 0 {
						t.Errorf("record %+v: want the backup's success after 2 attempts, billed", r)
					}
				default:
					if a.status < 500 || strings.HasPrefix(anthropicErrorType(a.body), "not an") {
						t.Errorf("%d %s: want a 5xx in Anthropic's shape", a.status, a.body)
					}
					if r.Status != a.status || r.ErrorKind == "" || r.Cost != 0 || r.CompletionTokens != 0 || r.Attempts != row.faultyCalls() {
						t.Errorf("record status %d kind %q cost %s, the client got %d: want its status, a kind, nothing billed",
							r.Status, r.ErrorKind, r.Cost, a.status)
					}
					checkProviderMessage(t, row, a.body)
					if row.enormous() && (a.status != http.StatusBadGateway || !bytes.Contains(a.body, []byte("larger than the gateway's limit"))) {
						t.Errorf("%d %s: want a 502 saying the answer was over the bound", a.status, a.body)
					}
				}
			})
		}
	}

	ids = append(ids, endpointFaults(t, gw.URL, client, bearer, up, backup)...)

	// Healthy afterwards, and no goroutine left behind by a fault.
	mustCall(t, 200, "GET", gw.URL+"/healthz", "", "")
	client.CloseIdleConnections()
	var now int
	deadline := time.Now().Add(20 * time.Second)
	for {
		now = runtime.NumGoroutine()
		if now <= baseline+8 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if now > baseline+8 {
		buf := make([]byte, 1<<20)
		t.Errorf("%d goroutines after the matrix, %d before:\n%s", now, baseline, buf[:runtime.Stack(buf, true)])
	}

	// Exactly one record per request, and the spend is their sum.
	var sum limit.Micros
	seen := map[string]bool{}
	for _, id := range ids {
		if seen[id] {
			t.Fatalf("request id %s used twice", id)
		}
		seen[id] = true
		sum += recordOf(t, gw.URL, id).Cost
	}
	var page struct {
		Data []account.Record `json:"data"`
	}
	adminJSON(t, gw.URL, "/admin/logs?limit=500", &page)
	if len(page.Data) == 500 {
		t.Fatal("more records than one page of /admin/logs: page through them")
	}
	stored := map[string]int{}
	var all limit.Micros
	for _, r := range page.Data {
		stored[r.RequestID]++
		all += r.Cost
	}
	for _, id := range ids {
		if stored[id] != 1 {
			t.Errorf("request %s has %d records, want 1", id, stored[id])
		}
	}
	stop()
	if spend := keySpend(t, db, "static:budgeted"); spend != all || sum == 0 {
		t.Errorf("budget spend %s; the records sum to %s (the matrix rows to %s)", spend, all, sum)
	}
}

// checkFaultAnswer holds one OpenAI-dialect row to the contract.
func checkFaultAnswer(t *testing.T, row faultRow, a faultAnswer, r account.Record, backupCalls int64) {
	t.Helper()
	switch {
	case row.mid:
		if a.status != 200 {
			t.Fatalf("status %d %s: the fault comes after the stream started", a.status, a.body)
		}
		if !bytes.Contains(a.body, []byte("\ndata: {\"error\":{")) && !bytes.HasPrefix(a.body, []byte("data: {\"error\":{")) {
			t.Errorf("the broken stream does not end with an error event: %s", tail(a.body))
		}
		if bytes.Contains(a.body, []byte("data: [DONE]")) {
			t.Errorf("the broken stream ends with [DONE], as if complete: %s", tail(a.body))
		}
		if backupCalls != 0 {
			t.Errorf("the backup was called %d times after bytes were relayed", backupCalls)
		}
		if row.suffix == "-trickle" && !totalTimeoutMessage.Match(a.body) {
			t.Errorf("the total timeout's error does not say it in milliseconds at most: %s", tail(a.body))
		}
		if r.ErrorKind == "" || r.Status != 200 || r.Attempts != 1 {
			t.Errorf("record status %d kind %q attempts %d: want the stream's failure recorded, 1 attempt", r.Status, r.ErrorKind, r.Attempts)
		}
		if r.CompletionTokens == 0 || r.PromptTokens == 0 {
			t.Errorf("record %d+%d tokens: what was relayed is not counted", r.PromptTokens, r.CompletionTokens)
		}
		t.Logf("stream ended with %s (%s)", bytes.TrimSpace(tail(a.body)[bytes.LastIndex(tail(a.body), []byte("data: "))+6:]), r.ErrorKind)
	case row.suffix == "-fb":
		if a.status != 200 || a.header.Get("X-Gatehouse-Provider") != "backup" || backupCalls != 1 {
			t.Fatalf("%d from %q (backup called %d times): %s; want the backup's answer after a fault before any byte",
				a.status, a.header.Get("X-Gatehouse-Provider"), backupCalls, a.body)
		}
		if row.stream && !bytes.HasSuffix(a.body, []byte("data: [DONE]\n\n")) {
			t.Errorf("the backup's stream is not complete: %s", tail(a.body))
		}
		if r.Status != 200 || r.ErrorKind != "" || r.Provider != "backup" || r.Attempts != 2 || r.CompletionTokens == 0 || r.Cost == 0 {
			t.Errorf("record %+v: want the backup's success after 2 attempts, billed", r)
		}
	case row.name == "huge stream":
		// Providers that cap the output (max_tokens) send less than the
		// 4 MB asked for, but still far more than any one buffer.
		if a.status != 200 || len(a.body) < 20000 || !bytes.HasSuffix(a.body, []byte("data: [DONE]\n\n")) {
			t.Errorf("%d, %d bytes: want the whole huge stream: %s", a.status, len(a.body), tail(a.body))
		}
		if r.ErrorKind != "" || r.CompletionTokens < 2000 {
			t.Errorf("record %+v: want the huge stream's tokens", r)
		}
	default:
		want := http.StatusBadGateway
		if row.directive == "hang=true" {
			want = http.StatusGatewayTimeout // timeouts.first_byte
		}
		if a.status != want || !openAIErrorShape(a.body) {
			t.Fatalf("%d %s: want a %d in OpenAI's shape", a.status, a.body, want)
		}
		t.Logf("%d %s: %s", a.status, r.ErrorKind, a.body)
		if r.Status != a.status || r.ErrorKind == "" || r.CompletionTokens != 0 || r.Cost != 0 || r.Attempts != row.faultyCalls() {
			t.Errorf("record %+v: want the client's status, an error kind, nothing billed, %d attempts", r, row.faultyCalls())
		}
		if row.enormous() && (dialectCode(a.body) != "upstream_response_too_large" || r.ErrorKind != string(llm.KindUpstreamProtocol)) {
			t.Errorf("code %q, record kind %q: want upstream_response_too_large, upstream_protocol", dialectCode(a.body), r.ErrorKind)
		}
		checkProviderMessage(t, row, a.body)
	}
}

// checkProviderMessage: a 200 carrying the provider's error object
// reaches the client with the provider's message (every provider type),
// and never with the provider's key.
func checkProviderMessage(t *testing.T, row faultRow, body []byte) {
	t.Helper()
	if strings.HasPrefix(row.directive, "error_in_200") && !bytes.Contains(body, []byte("mockllm injected fault")) {
		t.Errorf("the provider's message is lost: %s", body)
	}
	if bytes.Contains(body, []byte(upstreamKey)) {
		t.Errorf("the provider's key reached the client: %s", body)
	}
}

// dialectCode is the code of an OpenAI-shaped error body.
func dialectCode(b []byte) string {
	var e struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	_ = json.Unmarshal(b, &e)
	return e.Error.Code
}

// openAIErrorShape reports whether b is an error in OpenAI's shape: a
// message and a type (the code may be null).
func openAIErrorShape(b []byte) bool {
	var e struct {
		Error *struct {
			Message string `json:"message"`
			Type    string `json:"type"`
		} `json:"error"`
	}
	return json.Unmarshal(b, &e) == nil && e.Error != nil && e.Error.Message != "" && e.Error.Type != ""
}

// totalTimeoutMessage is the total timeout's error, its time rounded.
var totalTimeoutMessage = regexp.MustCompile(`did not finish within \d+(\.\d{1,3})?s"`)

func tail(b []byte) []byte {
	if len(b) > 600 {
		return b[len(b)-600:]
	}
	return b
}

// TestUpstreamTLSFailureAndBreaker: a provider whose https base_url
// reaches a server with an untrusted certificate, or one that speaks
// plain HTTP, answers a clean 502 in the client's dialect (nothing about
// certificates leaks beyond the message), the usage record says why, the
// breaker counts the failures and opens, and a fallback target serves.
// Repeated 200s carrying an error object open a breaker the same way.
func TestUpstreamTLSFailureAndBreaker(t *testing.T) {
	m := mockllm.New(mockllm.Options{APIKey: upstreamKey})
	untrusted := httptest.NewUnstartedServer(m)
	untrusted.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes are the point
	untrusted.StartTLS()
	t.Cleanup(untrusted.Close)
	plain := httptest.NewServer(m)
	t.Cleanup(plain.Close)
	up := startUpstream(t, mockllm.Options{})
	backup := startBackup(t)
	https := "https://" + strings.TrimPrefix(plain.URL, "http://")
	gw := startGateway(t, `listen: 127.0.0.1:0
admin_key: `+testAdminKey+`
timeouts: {connect: 2s, first_byte: 3s, idle: 2s, total: 30s}
retry: {backoff: 1ms, max_backoff: 5ms}
breaker: {failures: 2, error_rate: 0, cooldown: 1h}
providers:
  - {name: backup, type: openai-compatible, base_url: `+backup.URL+`/v1, api_key: `+upstreamKey+`}
  - {name: untrusted, type: openai-compatible, base_url: `+untrusted.URL+`/v1, api_key: `+upstreamKey+`}
  - {name: plaintext, type: openai-compatible, base_url: `+https+`/v1, api_key: `+upstreamKey+`}
  - {name: erring, type: openai-compatible, base_url: `+up.URL+`/v1, api_key: `+upstreamKey+`}
  - {name: bloated, type: openai-compatible, base_url: `+up.URL+`/v1, api_key: `+upstreamKey+`, max_response_bytes: 4KiB}
keys:
  - {key: `+clientKey+`, name: tester, project: qa}
models:
  - {name: untrusted, targets: [{provider: untrusted, model: gpt-4o-mini}]}
  - {name: plaintext, targets: [{provider: plaintext, model: gpt-4o-mini}]}
  - {name: erring, targets: [{provider: erring, model: gpt-4o-mini}]}
  - {name: bloated, targets: [{provider: bloated, model: gpt-4o-mini}]}
  - {name: untrusted-fb, strategy: failover, targets: [{provider: untrusted, model: gpt-4o-mini}, {provider: backup, model: gpt-4o-mini}]}
`)
	client := &http.Client{Timeout: time.Minute}
	bearer := map[string]string{"Authorization": "Bearer " + clientKey}
	anth := map[string]string{"X-Api-Key": clientKey, "Anthropic-Version": "2023-06-01"}
	for _, model := range []string{"untrusted", "plaintext"} {
		for _, stream := range []bool{false, true} {
			a := faultCall(client, gw.URL+"/v1/chat/completions", bearer,
				fmt.Sprintf(`{"model":%q,"stream":%v,"messages":[{"role":"user","content":"hi"}]}`, model, stream))
			if a.err != nil || a.status != http.StatusBadGateway || !openAIErrorShape(a.body) || dialectCode(a.body) != "upstream_tls_error" {
				t.Errorf("%s stream=%v: %d %v %s; want a 502 upstream_tls_error in OpenAI's shape", model, stream, a.status, a.err, a.body)
			}
			r := recordOf(t, gw.URL, a.header.Get("X-Gatehouse-Request-Id"))
			if r.Status != a.status || r.ErrorKind != string(llm.KindUpstreamTLS) || r.Cost != 0 || r.Attempts != 2 {
				t.Errorf("%s: record status %d kind %q cost %s attempts %d; want upstream_tls, nothing billed, 2 attempts (one retry)",
					model, r.Status, r.ErrorKind, r.Cost, r.Attempts)
			}
		}
		a := faultCall(client, gw.URL+"/v1/messages", anth,
			fmt.Sprintf(`{"model":%q,"max_tokens":50,"messages":[{"role":"user","content":"hi"}]}`, model))
		if a.err != nil || a.status != http.StatusBadGateway || strings.HasPrefix(anthropicErrorType(a.body), "not an") {
			t.Errorf("%s on /v1/messages: %d %v %s; want a 502 in Anthropic's shape", model, a.status, a.err, a.body)
		}
	}
	for range 2 {
		a := faultCall(client, gw.URL+"/v1/chat/completions", bearer, `{"model":"erring","messages":[{"role":"user","content":"hi @mock(error_in_200)"}]}`)
		if a.status != http.StatusBadGateway {
			t.Errorf("a 200 carrying an error: %d %s; want 502", a.status, a.body)
		}
	}
	// An answer over max_response_bytes, too: the 502s count. It is not
	// retried on the deployment that sent it, so each request is one
	// failure, and the breaker opens at the second.
	for range 2 {
		a := faultCall(client, gw.URL+"/v1/chat/completions", bearer, `{"model":"bloated","messages":[{"role":"user","content":"hi @mock(huge=100000)"}]}`)
		if a.status != http.StatusBadGateway || dialectCode(a.body) != "upstream_response_too_large" {
			t.Errorf("an enormous answer: %d %s; want 502 upstream_response_too_large", a.status, a.body)
		}
		if r := recordOf(t, gw.URL, a.header.Get("X-Gatehouse-Request-Id")); r.Attempts != 1 {
			t.Errorf("an enormous answer took %d attempts; want 1 (never retried where it came from)", r.Attempts)
		}
	}
	metrics := scrape(t, gw)
	for _, p := range []string{"untrusted", "plaintext", "erring", "bloated"} {
		want := `gatehouse_breaker_state{model="gpt-4o-mini",provider="` + p + `"} 2`
		if !strings.Contains(metrics, want) {
			t.Errorf("no %s in the metrics: the breaker of %s did not open", want, p)
		}
	}
	// The open breaker sends the fallback model's requests straight to
	// the backup.
	a := faultCall(client, gw.URL+"/v1/chat/completions", bearer, `{"model":"untrusted-fb","messages":[{"role":"user","content":"hi"}]}`)
	if a.status != 200 || a.header.Get("X-Gatehouse-Provider") != "backup" {
		t.Errorf("untrusted-fb: %d from %q: %s", a.status, a.header.Get("X-Gatehouse-Provider"), a.body)
	}
	mustCall(t, 200, "GET", gw.URL+"/healthz", "", "")
}
