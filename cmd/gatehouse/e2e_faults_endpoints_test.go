package main

import (
	"bytes"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"gatehouse/internal/account"
	"gatehouse/internal/llm"
)

// The fault matrix on /v1/responses and /v1/embeddings: the same
// upstream faults, on every provider type that serves the endpoint
// (Responses: all of them, natively for openai and translated from chat
// for the others; embeddings: openai, openai-compatible, azure, gemini
// and ollama).

// embedProviders are the provider types with embeddings, and the model
// each is asked for.
var embedProviders = []struct{ name, model string }{
	{"openai", "text-embedding-3-small"},
	{"compatible", "text-embedding-3-small"},
	{"azure", "text-embedding-3-small"},
	{"gemini", "gemini-embedding-001"},
	{"ollama", "all-minilm"},
}

// embedModels are the gateway models of embedProviders: "<name>-embed"
// on the faulty upstream alone, "<name>-embed-fb" with the backup behind.
func embedModels() string {
	var b strings.Builder
	for _, p := range embedProviders {
		fmt.Fprintf(&b, "  - {name: %s-embed, targets: [{provider: %s, model: %s}]}\n", p.name, p.name, p.model)
		fmt.Fprintf(&b, "  - {name: %s-embed-fb, strategy: failover, targets: [{provider: %s, model: %s}, {provider: backup, model: text-embedding-3-small}]}\n",
			p.name, p.name, p.model)
	}
	return b.String()
}

// responsesRows are the faults of the Responses API. Its streams end
// with a failure event rather than response.completed.
var responsesRows = []faultRow{
	{"truncate", "truncate", false, false, "-fb"},
	{"malformed", "malformed", false, false, "-fb"},
	{"error_in_200", "error_in_200", false, false, "-fb"},
	{"reset", "reset_after=0", false, false, "-fb"},
	{"error_in_200 alone", "error_in_200", false, false, ""},
	{"enormous", "huge=4000000", false, false, "-fb"},
	{"enormous chunked alone", "huge=4000000", false, false, ""},
	{"error_in_200 stream start", "error_in_200=0", true, false, "-fb"},
	{"truncate stream", "truncate=5", true, true, "-fb"},
	{"malformed stream", "malformed=5", true, true, "-fb"},
	{"reset stream", "reset_after=4", true, true, "-fb"},
}

// embedRows are the faults that apply to embeddings: whole bodies only
// (a reset cuts one halfway; an enormous one is refused at the bound,
// unread past it).
var embedRows = []faultRow{
	{"truncate", "truncate", false, false, "-fb"},
	{"malformed", "malformed", false, false, "-fb"},
	{"error_in_200", "error_in_200", false, false, "-fb"},
	{"hang", "hang=true", false, false, "-fb"},
	{"reset", "reset_after=0", false, false, "-fb"},
	{"enormous", "huge=4000000", false, false, "-fb"},
	{"error_in_200 alone", "error_in_200", false, false, ""},
	{"truncate alone", "truncate", false, false, ""},
	{"malformed alone", "malformed", false, false, ""},
	{"reset alone", "reset_after=0", false, false, ""},
	{"enormous alone", "huge=4000000", false, false, ""},
	{"enormous chunked alone", "huge=4000000", false, false, ""},
}

// endpointFaults runs responsesRows and embedRows against gw and returns
// the request ids, for the matrix's record and spend checks.
func endpointFaults(t *testing.T, gw string, client *http.Client, hdr map[string]string, up *gatedUpstream, backup *upstream) []string {
	var ids []string
	run := func(name, path, body string, row faultRow, check func(t *testing.T, a faultAnswer, r account.Record, backupCalls int64)) {
		t.Run(name, func(t *testing.T) {
			before := backup.mock.Stats().Requests
			a := faultCall(client, gw+path, hdr, body)
			if row.enormous() {
				up.check(t, faultResponseLimit, row.faultyCalls())
			}
			if a.err != nil {
				t.Fatalf("the client read an error from the gateway: %v (status %d)", a.err, a.status)
			}
			id := a.header.Get("X-Gatehouse-Request-Id")
			if id == "" {
				t.Fatalf("no request id: %d %s", a.status, a.body)
			}
			ids = append(ids, id)
			check(t, a, recordOf(t, gw, id), backup.mock.Stats().Requests-before)
		})
	}
	for _, p := range faultProviders {
		for _, row := range responsesRows {
			body := fmt.Sprintf(`{"model":%q,"stream":%v,"input":%q}`, p.name+row.suffix, row.stream, row.prompt())
			run("responses/"+p.name+"/"+row.name, "/v1/responses", body, row, func(t *testing.T, a faultAnswer, r account.Record, backupCalls int64) {
				checkResponsesFault(t, row, a, r, backupCalls)
			})
		}
	}
	for _, p := range embedProviders {
		for _, row := range embedRows {
			// Few dimensions: a whole answer stays under the providers'
			// max_response_bytes, so only the enormous rows meet the bound.
			body := fmt.Sprintf(`{"model":%q,"input":["first words",%q],"dimensions":16}`, p.name+"-embed"+row.suffix, row.prompt())
			run("embeddings/"+p.name+"/"+row.name, "/v1/embeddings", body, row, func(t *testing.T, a faultAnswer, r account.Record, backupCalls int64) {
				checkWholeFault(t, row, a, r, backupCalls)
				if row.suffix == "-fb" && !bytes.Contains(a.body, []byte(`"object":"list"`)) {
					t.Errorf("the backup's answer is not an embedding list: %.300s", a.body)
				}
			})
		}
	}
	return ids
}

// checkResponsesFault holds a /v1/responses row to the contract: a
// broken stream ends with response.failed (translated) or the error
// event (native), never response.completed; the rest is as on chat.
func checkResponsesFault(t *testing.T, row faultRow, a faultAnswer, r account.Record, backupCalls int64) {
	t.Helper()
	if !row.mid {
		checkWholeFault(t, row, a, r, backupCalls)
		if row.stream && row.suffix == "-fb" && !bytes.Contains(a.body, []byte("event: response.completed")) {
			t.Errorf("the backup's stream is not complete: %s", tail(a.body))
		}
		return
	}
	if a.status != 200 {
		t.Fatalf("status %d %s: the fault comes after the stream started", a.status, a.body)
	}
	if !bytes.Contains(a.body, []byte("event: response.failed\n")) && !bytes.Contains(a.body, []byte("event: error\n")) {
		t.Errorf("the broken stream ends with neither response.failed nor error: %s", tail(a.body))
	}
	if bytes.Contains(a.body, []byte("event: response.completed")) {
		t.Errorf("the broken stream says response.completed: %s", tail(a.body))
	}
	if backupCalls != 0 {
		t.Errorf("the backup was called %d times after bytes were relayed", backupCalls)
	}
	if r.ErrorKind == "" || r.Status != 200 || r.Attempts != 1 {
		t.Errorf("record status %d kind %q attempts %d: want the stream's failure recorded after 1 attempt", r.Status, r.ErrorKind, r.Attempts)
	}
	if r.PromptTokens == 0 || r.CompletionTokens == 0 {
		t.Errorf("record %d+%d tokens: what was relayed is not counted", r.PromptTokens, r.CompletionTokens)
	}
}

// checkWholeFault holds a row whose fault came before any byte was
// relayed: the backup serves when there is one (2 attempts, billed as
// its answer: an embedding's few tokens may cost less than a
// micro-dollar, so the matrix's spend check covers the amount); otherwise a 5xx in OpenAI's shape, recorded with the
// status and the error kind, after the retry, billed nothing.
func checkWholeFault(t *testing.T, row faultRow, a faultAnswer, r account.Record, backupCalls int64) {
	t.Helper()
	if row.suffix == "-fb" {
		if a.status != 200 || a.header.Get("X-Gatehouse-Provider") != "backup" || backupCalls != 1 {
			t.Fatalf("%d from %q (backup called %d times): %.300s; want the backup's answer", a.status, a.header.Get("X-Gatehouse-Provider"), backupCalls, a.body)
		}
		if r.Status != 200 || r.ErrorKind != "" || r.Provider != "backup" || r.Attempts != 2 || r.PromptTokens == 0 {
			t.Errorf("record %+v: want the backup's success after 2 attempts, its tokens counted", r)
		}
		return
	}
	want := http.StatusBadGateway
	if row.directive == "hang=true" {
		want = http.StatusGatewayTimeout
	}
	if a.status != want || !openAIErrorShape(a.body) {
		t.Fatalf("%d %s: want a %d in OpenAI's shape", a.status, a.body, want)
	}
	if r.Status != a.status || r.ErrorKind == "" || r.CompletionTokens != 0 || r.Cost != 0 || r.Attempts != row.faultyCalls() {
		t.Errorf("record %+v: want the client's status, an error kind, nothing billed, %d attempts", r, row.faultyCalls())
	}
	if row.enormous() && (dialectCode(a.body) != "upstream_response_too_large" || r.ErrorKind != string(llm.KindUpstreamProtocol)) {
		t.Errorf("code %q, record kind %q: want upstream_response_too_large, upstream_protocol", dialectCode(a.body), r.ErrorKind)
	}
	if !row.enormous() && dialectCode(a.body) == "upstream_response_too_large" {
		t.Errorf("%s: the answer met the size bound, not the row's fault", a.body)
	}
	checkProviderMessage(t, row, a.body)
}
