package server

import (
	"bufio"
	"context"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"gatehouse/internal/account"
	"gatehouse/internal/auth"
	"gatehouse/internal/h1"
	"gatehouse/internal/llm"
	"gatehouse/internal/provider"
	"gatehouse/internal/route"
)

// sinkRecorder keeps the records a server hands over.
type sinkRecorder struct {
	mu   sync.Mutex
	recs []account.Record
}

func (s *sinkRecorder) Add(r account.Record) { s.mu.Lock(); s.recs = append(s.recs, r); s.mu.Unlock() }

type fixedAuth struct{ p *auth.Principal }

func (a fixedAuth) Authenticate(*http.Request) (*auth.Principal, error) { return a.p, nil }

func TestLabelsAreValidatedAndRecorded(t *testing.T) {
	s, _ := newTestServer(t)
	sink := &sinkRecorder{}
	rt := *s.Runtime()
	rt.Auth = fixedAuth{&auth.Principal{KeyID: "key_1", Project: "qa", ProjectID: "proj_1"}}
	rt.Usage = sink
	s.Swap(&rt)
	h := s.Handler()
	tooMany := http.Header{}
	for i := range 9 {
		tooMany.Set("X-Gatehouse-Label-L"+string(rune('a'+i)), "v")
	}
	for _, tc := range []struct {
		name   string
		header http.Header
		status int
		labels map[string]string
	}{
		{"valid, names lower-cased", http.Header{"X-Gatehouse-Label-Team": {"blue"}, "X-Gatehouse-Label-Cost_center-2": {"42"}}, 500,
			map[string]string{"team": "blue", "cost_center-2": "42"}},
		{"bad character", http.Header{"X-Gatehouse-Label-Te.am": {"x"}}, 400, nil},
		{"name too long", http.Header{"X-Gatehouse-Label-" + strings.Repeat("a", 33): {"x"}}, 400, nil},
		{"value too long", http.Header{"X-Gatehouse-Label-Team": {strings.Repeat("v", 129)}}, 400, nil},
		{"repeated", http.Header{"X-Gatehouse-Label-Team": {"a", "b"}}, 400, nil},
		{"more than eight", tooMany, 400, nil},
		{"value of 128 bytes", http.Header{"X-Gatehouse-Label-Team": {strings.Repeat("v", 128)}}, 500, map[string]string{"team": strings.Repeat("v", 128)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sink.recs = nil
			rec := httptest.NewRecorder()
			req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(`{"model":"chat","messages":[{"role":"user","content":"hi"}]}`))
			for k, vs := range tc.header {
				req.Header[k] = vs
			}
			h.ServeHTTP(rec, req) // the test adapter panics: a 500, which must still be recorded
			if rec.Code != tc.status {
				t.Fatalf("status %d, want %d: %s", rec.Code, tc.status, rec.Body)
			}
			if tc.status == 400 && !strings.Contains(rec.Body.String(), `"code":"invalid_label"`) {
				t.Fatalf("body %s: want code invalid_label", rec.Body)
			}
			if len(sink.recs) != 1 {
				t.Fatalf("%d records, want 1", len(sink.recs))
			}
			r := sink.recs[0]
			if r.Status != tc.status || r.RequestID != rec.Header().Get("X-Gatehouse-Request-Id") || r.KeyID != "key_1" || r.Project != "qa" {
				t.Fatalf("record %+v", r)
			}
			if len(r.Labels) != len(tc.labels) {
				t.Fatalf("labels %v, want %v", r.Labels, tc.labels)
			}
			for k, v := range tc.labels {
				if r.Labels[k] != v {
					t.Fatalf("labels %v, want %v", r.Labels, tc.labels)
				}
			}
		})
	}
}

func TestOverheadHeaderOnEveryResponse(t *testing.T) {
	s, _ := newTestServer(t)
	clock := time.Unix(1700000000, 0)
	s.now = func() time.Time { clock = clock.Add(250 * time.Microsecond); return clock }
	h := s.Handler()
	for _, tc := range []struct{ method, path, body string }{
		{http.MethodPost, "/v1/chat/completions", `{"model":"chat","messages":[{"role":"user","content":"hi"}]}`}, // 500 (panic)
		{http.MethodPost, "/v1/chat/completions", `{"model":"nope","messages":[{"role":"user","content":"hi"}]}`}, // 404 model
		{http.MethodPost, "/v1/chat/completions", `{`},                                                            // 400
		{http.MethodGet, "/v1/chat/completions", ""},                                                              // 405
		{http.MethodGet, "/v2/unknown", ""},                                                                       // 404 route
		{http.MethodPost, "/v1/messages/unknown", ""},                                                             // 404, Anthropic dialect
		{http.MethodPost, "/v1/embeddings", `{"model":"chat"}`},                                                   // 400
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(tc.method, tc.path, strings.NewReader(tc.body)))
		got := rec.Header().Get("X-Gatehouse-Overhead-Ms")
		if got == "" || !strings.Contains(got, ".") || rec.Header().Get("X-Gatehouse-Request-Id") == "" {
			t.Errorf("%s %s (%d): overhead %q", tc.method, tc.path, rec.Code, got)
		}
	}
}

func TestAppendMillis(t *testing.T) {
	for d, want := range map[time.Duration]string{0: "0.000", 153 * time.Microsecond: "0.153", 12*time.Millisecond + 5*time.Microsecond: "12.005", 2 * time.Second: "2000.000"} {
		if got := string(appendMillis(nil, d)); got != want {
			t.Errorf("appendMillis(%v) = %q, want %q", d, got, want)
		}
	}
}

// TestUsageRecordFields: every field the exchange knows reaches the
// record handed to the sink, and nothing else: a downgraded request, an
// estimated usage, labels, a priced answer, an error kind.
func TestUsageRecordFields(t *testing.T) {
	s, _ := newTestServer(t)
	sink := &sinkRecorder{}
	rt := *s.Runtime()
	rt.Usage = sink
	s.Swap(&rt)
	start := time.Date(2026, 11, 28, 3, 0, 0, 0, time.FixedZone("X", 3600))
	up := &provider.Deployment{Provider: "up", Model: "m-mini"}
	x := &exchange{s: s, rt: s.rt.Load(), r: httptest.NewRequest(http.MethodPost, "/v1/chat/completions", nil),
		id: "gh-1", start: start, status: http.StatusTooManyRequests, customer: "cust", model: "cheap", attempts: 2, stream: true,
		labels: map[string]string{"team": "blue"}, ttft: 1500 * time.Microsecond, overhead: 250 * time.Microsecond, took: 2500 * time.Microsecond,
		principal:  &auth.Principal{KeyID: "key_1", ProjectID: "proj_1", Project: "qa"},
		deployment: up, deploymentNames: &route.NewPool(route.PoolOptions{}).Backend(up).Names,
		err: &llm.Error{Kind: llm.KindRateLimit}, hasUsage: true, usageEstimated: true,
		usage: llm.Usage{PromptTokens: 75, CompletionTokens: 20, CachedTokens: 3, ReasoningTokens: 4}}
	x.cache.result = account.CacheMiss
	x.adm.downgraded, x.adm.costed, x.adm.cost = "big", true, 1250
	x.keepRecord()
	want := account.Record{RequestID: "gh-1", Time: start.UTC(), Endpoint: "/v1/chat/completions", KeyID: "key_1", ProjectID: "proj_1",
		Project: "qa", Customer: "cust", Model: "big", ServedModel: "m-mini", Provider: "up", Deployment: "up/m-mini",
		Status: http.StatusTooManyRequests, ErrorKind: string(llm.KindRateLimit), PromptTokens: 75, CompletionTokens: 20,
		CachedTokens: 3, ReasoningTokens: 4, Cost: 1250, UsageSource: account.SourceEstimated, LatencyMS: 2.5, TTFTMS: 1.5,
		OverheadMS: 0.25, Cache: account.CacheMiss, Attempts: 2, Stream: true, Labels: map[string]string{"team": "blue"}}
	if len(sink.recs) != 1 {
		t.Fatalf("%d records, want 1", len(sink.recs))
	}
	if d := cmp.Diff(want, sink.recs[0]); d != "" {
		t.Errorf("record (-want +got):\n%s", d)
	}
}

// TestLabelsOnTheEngine: on gatehouse's engine, told to note the label
// prefix (as gatehouse serve tells it) or not, labels are kept and
// refused as on any server; a request without them is not searched (the
// engine saw none) and keeps none.
func TestLabelsOnTheEngine(t *testing.T) {
	s, _ := newTestServer(t)
	sink := chanSink(make(chan account.Record, 1))
	rt := *s.Runtime()
	rt.Auth = fixedAuth{&auth.Principal{KeyID: "key_1", Project: "qa", ProjectID: "proj_1"}}
	rt.Usage = sink
	s.Swap(&rt)
	for _, prefix := range []string{FieldPrefix, LabelPrefix, ""} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		engine := &h1.Server{Handler: s.Handler(), NotePrefix: prefix, ErrorLog: log.New(io.Discard, "", 0)}
		go func() { _ = engine.Serve(ln) }()
		t.Cleanup(func() { _ = engine.Close() })
		for _, tc := range []struct {
			fields string
			status int
			labels map[string]string
		}{
			{"", 500, nil},
			{"x-gatehouse-label-team: blue\r\nX-GATEHOUSE-LABEL-Cost_center-2: 42\r\n", 500, map[string]string{"team": "blue", "cost_center-2": "42"}},
			{"X-Gatehouse-Label-Team: a\r\nX-Gatehouse-Label-Team: b\r\n", 400, nil},
			{"X-Gatehouse-Label-" + strings.Repeat("a", 33) + ": x\r\n", 400, nil},
		} {
			body := `{"model":"chat","messages":[{"role":"user","content":"hi"}]}`
			c, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			_, err = io.WriteString(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"+
				tc.fields+"Content-Length: "+strconv.Itoa(len(body))+"\r\n\r\n"+body)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatal(err)
			}
			answer, _ := io.ReadAll(resp.Body)
			_ = c.Close()
			if resp.StatusCode != tc.status {
				t.Fatalf("prefix %q, %q: status %d, want %d: %s", prefix, tc.fields, resp.StatusCode, tc.status, answer)
			}
			if tc.status == 400 && !strings.Contains(string(answer), `"code":"invalid_label"`) {
				t.Fatalf("prefix %q, %q: body %s, want code invalid_label", prefix, tc.fields, answer)
			}
			rec := <-sink // the record may be handed over after the answer went out
			if diff := cmp.Diff(tc.labels, rec.Labels, cmpopts.EquateEmpty()); diff != "" {
				t.Fatalf("prefix %q, %q: labels (-want +got):\n%s", prefix, tc.fields, diff)
			}
		}
	}
}

// chanSink hands each record over on its channel.
type chanSink chan account.Record

func (s chanSink) Add(r account.Record) { s <- r }

// storeRecorder is a RecordStore that keeps what an account.Sink writes.
type storeRecorder struct{ sinkRecorder }

func (s *storeRecorder) WriteRecords(_ context.Context, rs []account.Record) error {
	for _, r := range rs {
		s.Add(r)
	}
	return nil
}

func (s *storeRecorder) PruneRecords(context.Context, time.Time, int) (int, error) { return 0, nil }

// TestRecordThroughAccountSink: gatehouse's own sink, which keepRecord
// hands the record by its address (account.Sink.Keep), gets the record
// any other sink gets through Add, field for field.
func TestRecordThroughAccountSink(t *testing.T) {
	serve := func(sink UsageSink) {
		s, _ := newTestServer(t)
		clock := time.Date(2026, 11, 28, 3, 0, 0, 0, time.UTC)
		s.now = func() time.Time { clock = clock.Add(250 * time.Microsecond); return clock }
		rt := *s.Runtime()
		rt.Auth = fixedAuth{&auth.Principal{KeyID: "key_1", Project: "qa", ProjectID: "proj_1"}}
		rt.Usage = sink
		s.Swap(&rt)
		req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(`{"model":"nope","messages":[]}`))
		req.Header.Set("X-Gatehouse-Label-Team", "blue")
		s.Handler().ServeHTTP(httptest.NewRecorder(), req)
	}
	direct := &sinkRecorder{}
	serve(direct)
	stored := &storeRecorder{}
	sink, err := account.NewSink(stored, account.SinkOptions{SpillDir: t.TempDir(), Interval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	serve(sink)
	if err := sink.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(direct.recs) != 1 || direct.recs[0].KeyID != "key_1" || direct.recs[0].Labels["team"] != "blue" {
		t.Fatalf("the recording sink got %+v", direct.recs)
	}
	// Each request has an id of its own.
	if diff := cmp.Diff(direct.recs, stored.recs, cmpopts.IgnoreFields(account.Record{}, "RequestID")); diff != "" {
		t.Errorf("records (-through Add +through account.Sink):\n%s", diff)
	}
	if len(stored.recs) == 1 && stored.recs[0].RequestID == "" {
		t.Error("the record through account.Sink has no request id")
	}
}
