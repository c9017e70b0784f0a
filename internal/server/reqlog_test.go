package server

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"gatehouse/internal/auth"
	"gatehouse/internal/limit"
	"gatehouse/internal/llm"
	"gatehouse/internal/provider"
)

// TestRequestLineMatchesSlog: the hand-encoded request line carries what
// slog's JSON handler writes for the same request — the same keys in the
// same order, the same values — and a level the logger disables is not
// written.
func TestRequestLineMatchesSlog(t *testing.T) {
	lines := func(direct bool, level slog.Level) []string {
		s, logs := newTestServer(t)
		if direct {
			logs.Reset()
			s.log = slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: level}))
			s.SetRequestLog(logs)
		}
		fixed := time.Date(2026, 11, 23, 18, 0, 0, 123456789, time.UTC)
		s.now = func() time.Time { return fixed }
		for _, body := range []string{
			`{"model":"nope","messages":[{"role":"user","content":"hi"}]}`, // 404, error fields, quotes in the message
			`{"model":"chat","messages":[{"role":"user","content":"hi"}]}`, // panics: 500, WARN
		} {
			req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(body))
			s.Handler().ServeHTTP(httptest.NewRecorder(), req)
		}
		var out []string
		for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
			if strings.Contains(l, `"msg":"request"`) {
				// Request IDs are random: the same placeholder in both.
				var m struct {
					RequestID string `json:"request_id"`
				}
				_ = json.Unmarshal([]byte(l), &m)
				out = append(out, strings.ReplaceAll(l, m.RequestID, "ID"))
			}
		}
		return out
	}
	viaSlog, direct := lines(false, slog.LevelInfo), lines(true, slog.LevelInfo)
	if len(viaSlog) != 2 || len(direct) != 2 {
		t.Fatalf("request lines: %d through slog, %d direct; want 2 each", len(viaSlog), len(direct))
	}
	for i := range viaSlog {
		if keys(t, direct[i]) != keys(t, viaSlog[i]) {
			t.Errorf("line %d keys differ:\n direct %s\n slog   %s", i, direct[i], viaSlog[i])
		}
		var a, b map[string]any
		_ = json.Unmarshal([]byte(direct[i]), &a)
		_ = json.Unmarshal([]byte(viaSlog[i]), &b)
		for k, v := range b {
			if k != "time" && a[k] != v { // slog stamps its own clock
				t.Errorf("line %d: %s = %v direct, %v through slog", i, k, a[k], v)
			}
		}
	}
	if !strings.Contains(direct[1], `"level":"WARN"`) || !strings.HasPrefix(direct[0], `{"time":"2026-11-23T18:00:00.123456789Z","level":"INFO","msg":"request",`) {
		t.Errorf("levels or line start:\n%s\n%s", direct[0], direct[1])
	}
	if got := lines(true, slog.LevelWarn); len(got) != 1 || !strings.Contains(got[0], `"status":500`) {
		t.Errorf("at level WARN: %v, want only the 500's line", got)
	}
}

// keys lists a JSON object's keys in order.
func keys(t *testing.T, line string) string {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader([]byte(line)))
	if _, err := d.Token(); err != nil {
		t.Fatalf("%s: %v", line, err)
	}
	var ks []string
	for d.More() {
		k, err := d.Token()
		if err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		ks = append(ks, k.(string))
		var skip json.RawMessage
		if err := d.Decode(&skip); err != nil {
			t.Fatalf("%s: %v", line, err)
		}
	}
	return strings.Join(ks, ",")
}

// TestRequestLineQuotedNames: the key's and the deployment's names come
// out of the line the same whether their JSON was made once (with the
// principal, with the pool's backend) or is quoted per request.
func TestRequestLineQuotedNames(t *testing.T) {
	s, _ := newTestServer(t)
	fixed := time.Date(2026, 11, 27, 22, 0, 0, 0, time.UTC)
	s.now = func() time.Time { return fixed }
	p := auth.Principal{KeyID: `key_"1`, Project: "pro<j>\tect"}
	d := &provider.Deployment{Provider: "up\\stream", Model: "gpt-4o-mini\u2028"}
	line := func(quoted bool) string {
		x := &exchange{s: s, rt: s.rt.Load(), r: httptest.NewRequest(http.MethodPost, "/v1/chat/completions", nil),
			id: "ID", start: s.now(), status: http.StatusOK, principal: &p, deployment: d, attempts: 1, billedAttempt: 1}
		if quoted {
			q := p
			q.QuotedKeyID, q.QuotedProject = llm.Quote(p.KeyID), llm.Quote(p.Project)
			x.principal = &q
			x.quotedProvider, x.quotedModel = llm.Quote(d.Provider), llm.Quote(d.Model)
		}
		var l jsonLine
		x.logFields(&l, fixed)
		return string(l.b)
	}
	perRequest, once := line(false), line(true)
	if once != perRequest {
		t.Errorf("names quoted once:\n %s\nquoted per request:\n %s", once, perRequest)
	}
	for _, want := range []string{`"key":"key_\"1"`, `"project":"pro<j>\tect"`, `"provider":"up\\stream"`} {
		if !strings.Contains(once, want) {
			t.Errorf("%s lacks %s", once, want)
		}
	}
}

// TestAppendInt: the log line's integers are strconv's text, across the
// three-digit fast path's edges and beyond it, negatives included.
func TestAppendInt(t *testing.T) {
	check := func(v int) {
		if got, want := string(appendInt([]byte("x"), v)), "x"+strconv.Itoa(v); got != want {
			t.Fatalf("appendInt(%d) = %q, want %q", v, got, want)
		}
	}
	for v := -1100; v <= 11000; v++ {
		check(v)
	}
	for _, v := range []int{math.MaxInt, math.MinInt, 1 << 40, -(1 << 40)} {
		check(v)
	}
}

// TestAppendMillisFloat: a duration in the log line is the text
// strconv.AppendFloat(ms(d), 'g', -1, 64) makes — every microsecond up
// to two seconds, then samples up to and past the fast path's bound
// (where 'g' turns to an exponent), negatives and sub-microsecond parts.
func TestAppendMillisFloat(t *testing.T) {
	check := func(d time.Duration) {
		want := strconv.AppendFloat([]byte("x"), ms(d), 'g', -1, 64)
		if got := appendMillisFloat([]byte("x"), d); string(got) != string(want) {
			t.Fatalf("appendMillisFloat(%d) = %q, want %q", d, got, want)
		}
	}
	for us := time.Duration(0); us <= 2e6; us++ {
		check(us * time.Microsecond)
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 200_000 {
		check(time.Duration(r.Int64N(int64(2000 * time.Second))))
	}
	for _, d := range []time.Duration{999_999_999 * time.Microsecond, 1e9 * time.Microsecond, 1e9*time.Microsecond + 1,
		123_456_789_012 * time.Microsecond, -1, -time.Microsecond, -1500 * time.Microsecond, 999, 1001, math.MaxInt64, math.MinInt64} {
		check(d)
	}
}

// TestAttrNames: slog's attributes carry the bare names of the member
// texts the JSON line writes.
func TestAttrNames(t *testing.T) {
	var a attrList
	a.addString(`,"request_id":`, "r")
	a.addQuoted(`,"key":`, "k", llm.Quoted{})
	a.addInt(`,"status":`, 200)
	a.addMillis(`,"latency_ms":`, 1500*time.Microsecond)
	a.addBool(`,"stream":`, true)
	var got []string
	for _, at := range a {
		got = append(got, at.String())
	}
	if want := "request_id=r key=k status=200 latency_ms=1.5 stream=true"; strings.Join(got, " ") != want {
		t.Errorf("attributes %q, want %q", strings.Join(got, " "), want)
	}
}

// TestRequestLineEndIsTheRecords: the log line's time and latency are
// those of the request's end as its usage record has it, with a clock
// that moves on every reading (one reading serves both).
func TestRequestLineEndIsTheRecords(t *testing.T) {
	for _, direct := range []bool{false, true} {
		s, logs := newTestServer(t)
		if direct {
			s.SetRequestLog(logs)
		}
		clock := time.Date(2026, 11, 28, 3, 0, 0, 0, time.UTC)
		s.now = func() time.Time { clock = clock.Add(250 * time.Microsecond); return clock }
		sink := &sinkRecorder{}
		rt := *s.Runtime()
		rt.Usage = sink
		s.Swap(&rt)
		req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(`{"model":"nope","messages":[]}`))
		s.Handler().ServeHTTP(httptest.NewRecorder(), req)
		var line struct {
			Msg       string    `json:"msg"`
			Time      time.Time `json:"time"`
			LatencyMS float64   `json:"latency_ms"`
		}
		for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
			if strings.Contains(l, `"msg":"request"`) {
				if err := json.Unmarshal([]byte(l), &line); err != nil {
					t.Fatal(err)
				}
			}
		}
		if len(sink.recs) != 1 || line.Msg != "request" {
			t.Fatalf("direct %v: %d records, log line %+v", direct, len(sink.recs), line)
		}
		r := sink.recs[0]
		if line.LatencyMS != r.LatencyMS || r.LatencyMS == 0 {
			t.Errorf("direct %v: latency_ms %v in the line, %v in the record", direct, line.LatencyMS, r.LatencyMS)
		}
		if end := r.Time.Add(time.Duration(r.LatencyMS * 1e6)); direct && !line.Time.Equal(end) {
			t.Errorf("line time %v, the record's end %v", line.Time, end)
		}
	}
}

// TestPlainFieldsNeedNoQuoting: the values the log line writes without
// quoting them (addPlain) are text AppendQuote would leave as it is —
// request IDs, costs, the methods plainMethod lists, the paths plainPath
// lists — and a method or path it does not list is quoted.
func TestPlainFieldsNeedNoQuoting(t *testing.T) {
	plain := func(what, v string) {
		t.Helper()
		if got, want := string(llm.AppendQuote(nil, v)), `"`+v+`"`; got != want {
			t.Errorf("%s %q quotes to %s, not as it is", what, v, got)
		}
	}
	for range 1000 {
		plain("request ID", newRequestID())
	}
	for _, m := range []limit.Micros{0, 1, -1, 999_999, 1_000_000, 123_456_789, math.MaxInt64, math.MinInt64} {
		plain("cost", m.String())
	}
	for range 1000 {
		plain("cost", limit.Micros(rand.Int64()).String())
	}
	for _, m := range []string{"POST", "GET", "DELETE", "PUT", "PATCH", "HEAD", "OPTIONS", `PO"ST`, "P\\", "GE\x01T", "pos\u2028t"} {
		if plainMethod(m) {
			plain("method", m)
		}
	}
	paths := []string{"/v1/chat/completions", "/v1/messages", "/v1/embeddings", "/v1/responses", "/v1/messages/count_tokens", "/v1/models",
		`/v1/"chat"`, "/v1/\\", "/v1/\x7f", "/v1/mod\u2028els", "/v1/chat/completions/", "/V1/messages"}
	for _, p := range paths {
		if plainPath(p) {
			plain("path", p)
		}
	}

	s, _ := newTestServer(t)
	x := &exchange{s: s, rt: s.rt.Load(), r: httptest.NewRequest(http.MethodPost, "/v1/chat/completions", nil), id: "ID", status: 200}
	x.r.Method = `PO"ST`
	x.r.URL.Path = `/v1/"chat"`
	var l jsonLine
	x.logFields(&l, time.Time{})
	for _, want := range []string{`,"method":"PO\"ST",`, `,"path":"/v1/\"chat\"",`} {
		if !strings.Contains(string(l.b), want) {
			t.Errorf("line %s lacks %s", l.b, want)
		}
	}
}

// TestLineStartLevels: a request line opens as slog's JSON handler opens
// it, at the two levels written as constants and at any other.
func TestLineStartLevels(t *testing.T) {
	at := time.Date(2026, 11, 28, 7, 0, 0, 5, time.UTC)
	var stamps lineStamps
	for _, level := range []slog.Level{slog.LevelInfo, slog.LevelWarn, slog.LevelError, slog.LevelDebug, slog.LevelInfo + 2} {
		var buf bytes.Buffer
		h := slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})
		_ = h.Handle(context.Background(), slog.NewRecord(at, level, "request", 0))
		want := strings.TrimSuffix(buf.String(), "}\n")
		if got := string(appendLineStart(nil, &stamps, at, level)); got != want {
			t.Errorf("level %v: %s, slog %s", level, got, want)
		}
	}
}
