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
	"gatehouse/internal/reqid"
	"gatehouse/internal/route"
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

// TestRequestLineMembersMatchSlog: the line's fields are byte for byte
// what slog's JSON handler writes for them, whether the names come as
// member texts made once — the principal's (auth.Principal.LogMembers),
// the deployment's (route.Backend.LogMembers), a model API's method and
// path (routeMembers) — or field by field: names that need escaping, a
// principal or a deployment renamed after its members were made (a
// stale text must not be written), none made at all, any method and
// path.
func TestRequestLineMembersMatchSlog(t *testing.T) {
	s, _ := newTestServer(t)
	fixed := time.Date(2026, 11, 27, 22, 0, 0, 0, time.UTC)
	static := auth.NewStatic([]auth.StaticKey{{Secret: "gh-members", Principal: auth.Principal{KeyID: `key_"1`, Project: "pro<j>\tect\u2028"}}})
	made, ok := static.Lookup("gh-members")
	if !ok || made.LogMembers.Text(auth.LogKeyMember, made.KeyID, auth.LogProjectMember, made.Project) == "" {
		t.Fatalf("the static principal has no members made: %+v", made)
	}
	renamed := *made // its members made for the name before
	renamed.Project = `renamed "p"`
	noProject := *made
	noProject.Project = ""
	bare := auth.Principal{KeyID: "k\\2", Project: "plain"} // made without quoteNames
	d := &provider.Deployment{Provider: "up\\stream", Model: "gpt-4o-mini\u2028"}
	dm := &route.NewPool(route.PoolOptions{}).Backend(d).Names
	moved := *d // its names made for the model before
	moved.Model = "other<model>"

	type exchangeCase struct {
		p       *auth.Principal
		d       *provider.Deployment
		members *route.Names
	}
	cases := map[string]exchangeCase{
		"made":      {made, d, dm},
		"renamed":   {&renamed, &moved, dm},
		"noProject": {&noProject, d, nil},
		"bare":      {&bare, d, &route.Names{}},
		"none":      {nil, nil, nil},
	}
	routes := [][2]string{{"POST", "/v1/chat/completions"}, {"POST", "/v1/messages"}, {"POST", "/v1/embeddings"},
		{"POST", "/v1/responses"}, {"POST", "/v1/messages/count_tokens"}, {"GET", "/v1/models"},
		{"GET", "/v1/chat/completions"}, {"PUT", "/v1/messages"}, {"POST", "/v1/models"}, {`PO"ST`, "/v1/chat/completions"},
		{"POST", `/v1/"chat"`}, {"DELETE", "/v1/responses/resp_1"}, {"POST", "/v1/chat/completions/"}}
	// The model's name, quoted once with its group (route.Group.QuotedName)
	// when it names the group, afresh otherwise; the counts, constant
	// for a first attempt's answer.
	g := route.NewGroup(`chat "4o"\u2028`, route.Failover, []*provider.Deployment{d}, nil, provider.Timeouts{})
	type modelCase struct {
		model                   string
		group                   *route.Group
		attempts, billed, usage int
	}
	models := []modelCase{{g.Name, g, 1, 1, 0}, {`other "model"`, g, 2, 2, 7}, {"chat", nil, 2, 1, 1234}, {"", nil, 0, 0, 0}, {g.Name, g, 1, 0, 999}}
	for name, c := range cases {
		for i, rt := range routes {
			mc := models[i%len(models)]
			x := &exchange{s: s, rt: s.rt.Load(), r: httptest.NewRequest(http.MethodPost, "/", nil),
				id: "ID", start: fixed, status: http.StatusOK, principal: c.p, deployment: c.d, deploymentNames: c.members,
				model: mc.model, group: mc.group, attempts: mc.attempts, billedAttempt: mc.billed}
			if mc.usage > 0 {
				x.hasUsage, x.usage = true, llm.Usage{PromptTokens: mc.usage, CompletionTokens: mc.usage / 2, TotalTokens: mc.usage + mc.usage/2}
			}
			x.r.Method, x.r.URL.Path = rt[0], rt[1]
			want := slogFields(t, x)
			for range 2 { // the second from the key's LineMemo, where it keeps one
				var l jsonLine
				x.logFields(&l)
				if got := string(l.b); got != want {
					t.Errorf("%s %q %+v:\n line %s\n slog %s", name, rt, mc, got, want)
				}
			}
		}
	}
	// The renamed names are the ones written, not the texts made before.
	x := &exchange{s: s, rt: s.rt.Load(), r: httptest.NewRequest(http.MethodPost, "/v1/chat/completions", nil),
		id: "ID", start: fixed, principal: &renamed, deployment: &moved, deploymentNames: dm}
	var l jsonLine
	x.logFields(&l)
	for _, want := range []string{`,"project":"renamed \"p\""`, `,"upstream_model":"other<model>"`} {
		if !strings.Contains(string(l.b), want) {
			t.Errorf("renamed: line %s lacks %s", l.b, want)
		}
	}
}

// slogFields is what slog's JSON handler writes for x's log fields, after
// its message: the fields of the line that logFields writes.
func slogFields(t *testing.T, x *exchange) string {
	t.Helper()
	var attrs attrList
	x.logFields(&jsonLine{attrs: &attrs})
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).LogAttrs(context.Background(), slog.LevelInfo, "request", attrs...)
	const msg = `"msg":"request"`
	at := strings.Index(buf.String(), msg)
	if at < 0 {
		t.Fatalf("slog wrote %s", buf.String())
	}
	return strings.TrimSuffix(buf.String()[at+len(msg):], "}\n")
}

// TestAppendInt: the log line's integers are strconv's text, across
// limit.AppendInt's fast paths (below ten, a hundred, a thousand, 10^8)
// and beyond them, negatives included.
func TestAppendInt(t *testing.T) {
	check := func(v int) {
		if got, want := string(appendInt([]byte("x"), v)), "x"+strconv.Itoa(v); got != want {
			t.Fatalf("appendInt(%d) = %q, want %q", v, got, want)
		}
	}
	for v := -1100; v <= 11000; v++ {
		check(v)
	}
	for _, v := range []int{math.MaxInt, math.MinInt, 1 << 40, -(1 << 40), 99_999_999, 100_000_000, -100_000_000} {
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
	l := jsonLine{attrs: &a}
	l.addString(`,"request_id":`, "r")
	l.addQuoted(`,"key":`, "k", llm.Quoted{})
	l.addInt(`,"status":`, 200)
	l.addMillis(`,"latency_ms":`, 1500*time.Microsecond)
	l.addBool(`,"stream":`, true)
	l.addPair(`,"provider":`, "p", `,"upstream_model":`, "m", `,"provider":"p","upstream_model":"m"`)
	l.addIntPair(`,"attempts":`, 1, `,"billed_attempt":`, 1, firstAttemptMembers)
	l.addPlain(`,"cost_usd":`, "0.1")
	if len(l.b) != 0 {
		t.Errorf("with attributes, the line also got %q", l.b)
	}
	var got []string
	for _, at := range a {
		got = append(got, at.String())
	}
	if want := "request_id=r key=k status=200 latency_ms=1.5 stream=true provider=p upstream_model=m attempts=1 billed_attempt=1 cost_usd=0.1"; strings.Join(got, " ") != want {
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
		plain("request ID", reqid.New(time.Now()))
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
	x.logFields(&l)
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

// TestRequestLineMemoFollowsNames: a key's LineMemo gives its text only
// for the names it was made of. Copies of one principal share the memo,
// so a copy with another project, a deployment with another model, the
// other stream flag and more combinations than the memo has slots each
// write their own names, in any order and again.
func TestRequestLineMemoFollowsNames(t *testing.T) {
	s, _ := newTestServer(t)
	fixed := time.Date(2026, 11, 28, 22, 0, 0, 0, time.UTC)
	static := auth.NewStatic([]auth.StaticKey{{Secret: "gh-memo", Principal: auth.Principal{KeyID: "key_memo", Project: "alpha"}}})
	made, ok := static.Lookup("gh-memo")
	if !ok || made.LineMemo == nil {
		t.Fatalf("the static principal has no LineMemo: %+v", made)
	}
	renamed := *made
	renamed.Project = "beta"
	noProject := *made
	noProject.Project = ""
	pool := route.NewPool(route.PoolOptions{})
	d1 := &provider.Deployment{Provider: "up", Model: "gpt-4o-mini"}
	d2 := &provider.Deployment{Provider: "up", Model: "gpt-4o"}
	d3 := &provider.Deployment{Provider: "down", Model: "gpt-4o-mini"}
	type step struct {
		p      *auth.Principal
		d      *provider.Deployment
		model  string
		stream bool
	}
	var steps []step
	for _, p := range []*auth.Principal{made, &renamed, &noProject} {
		for _, d := range []*provider.Deployment{d1, d2, d3} {
			for _, model := range []string{"chat", "fast"} {
				steps = append(steps, step{p, d, model, false}, step{p, d, model, true})
			}
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 4 * len(steps) {
		st := steps[i%len(steps)]
		if i >= len(steps) {
			st = steps[rng.IntN(len(steps))]
		}
		x := &exchange{s: s, rt: s.rt.Load(), r: httptest.NewRequest(http.MethodPost, "/v1/chat/completions", nil),
			id: "ID", start: fixed, status: http.StatusOK, principal: st.p, deployment: st.d,
			deploymentNames: &pool.Backend(st.d).Names, model: st.model, stream: st.stream, attempts: 1, billedAttempt: 1}
		var l jsonLine
		x.logFields(&l)
		if got, want := string(l.b), slogFields(t, x); got != want {
			t.Fatalf("step %d %+v:\n line %s\n slog %s", i, st, got, want)
		}
	}
}
