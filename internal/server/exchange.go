package server

import (
	"errors"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"

	"gatehouse/internal/auth"
	"gatehouse/internal/h1"
	"gatehouse/internal/llm"
	"gatehouse/internal/provider"
	"gatehouse/internal/reqid"
	"gatehouse/internal/route"
	"gatehouse/internal/telemetry"
)

// exchange is the state of one API request as it moves through the
// pipeline; it ends as one log line.
type exchange struct {
	s     *Server
	rt    *Runtime
	w     http.ResponseWriter
	r     *http.Request
	id    string
	start time.Time

	principal  *auth.Principal
	model      string
	deployment *provider.Deployment
	status     int
	usage      llm.Usage
	ttft       time.Duration
	took       time.Duration // start to end, set by finish for the metrics, the record and the log line
	err        *llm.Error

	// The exchange's flags, side by side: each alone between wider
	// fields would take eight bytes, and the exchange is held for as
	// long as a stream runs.
	stream   bool
	hasUsage bool
	written  bool // response headers are out: errors can no longer change the status
	dialect  dialect
	// estimated: promptTokens holds the estimate.
	estimated bool
	// mapHeaders: headers put the exchange's fields in the map already
	// (on an h1.FieldWriter only an error does, and nothing is answered
	// after it), so a later answer must too, or they would go out twice
	// (see fw): a guard for any path that comes to set them early.
	mapHeaders bool
	// usageEstimated: usage was counted by the gateway, not reported.
	usageEstimated bool
	// noOwnFields: gatehouse's engine saw no x-gatehouse-* field in the
	// request (readLabels asked it); false when not known.
	noOwnFields bool
	// namesChecked: deploymentNames were checked against deployment
	// (names).
	namesChecked bool

	// deploymentNames are the answering deployment's names for the log
	// line and the usage record, made once with its pool backend
	// (route.Attempt.Names); nil when not known. Read through names,
	// which checks them against deployment once.
	deploymentNames *route.Names

	group *route.Group // the model's group once resolved: a metric label that is never client input
	// attempts counts upstream calls; billedAttempt is the one that
	// answered (0: none did). Usage comes from that attempt only, so
	// settlement never bills a failed attempt, nor one twice.
	attempts      int
	billedAttempt int
	// promptTokens is the prompt's estimated size once something needed
	// it (prompt): least-tokens or a context window, a token bucket, a
	// budget. Many requests need none, and the estimate is the largest
	// part of what admission costs a request.
	promptTokens int
	estimate     func() int // how to estimate this request's prompt; nil: never needed

	// open is the stream an attempt left open for runAttempts to relay
	// (openstream.go).
	open *openStream
	// report is how the attempts went (runAttempts); kept here, not in
	// runAttempts' frame, which an open stream is relayed under.
	report route.Report

	adm   admission // rate limits and budgets (admit.go)
	cache cacheUse  // the exact cache (cache.go)
	// vals holds the values of the header fields the exchange sets on
	// every answer: each field's []string is a window on it, so the
	// dozen fields of a limited key's answer cost no slice each.
	vals headerValues
	// fw takes the header lines the exchange formats itself, when the
	// server's ResponseWriter can (h1.FieldWriter); nil: they go into
	// the header map.
	fw h1.FieldWriter

	// For the usage record (usage.go).
	customer string            // the customer the request named, if any
	labels   map[string]string // x-gatehouse-label-* headers
	body     []byte            // the request body as read
	capture  *bodyCapture      // what the client is sent, when the project keeps bodies
	// usageSlot locates the usage object of the body writeJSON sends,
	// when the adapter found it (llm.Completion) or the dialect's
	// translation wrote it (reply.completion); the cost goes there
	// without another walk of the body.
	usageSlot llm.UsageSlot
	// ownBody: the body writeJSON sends was made for this exchange
	// alone (an upstream's answer as the adapter read it), so the cost
	// is written into it in place; a cached answer's bytes are shared,
	// and a translation's may be kept (a stored response).
	ownBody bool
	// upstreamWait is the time spent waiting on upstream calls and
	// between attempts; overhead the rest, up to the response headers.
	upstreamWait time.Duration
	overhead     time.Duration

	// line is the request's log line as queueLine writes it, in a
	// buffer of the server's lineQueue.
	line jsonLine

	// Traces (trace.go); zero Spans when tracing is off.
	op          string // gen_ai.operation.name: chat or embeddings
	span        telemetry.Span
	attemptSpan telemetry.Span
}

// dialect is the API family a route speaks; it decides the shape of
// every error the exchange writes.
type dialect uint8

const (
	dialectOpenAI    dialect = iota
	dialectAnthropic         // /v1/messages: Anthropic's error shape and request-id header
)

func (s *Server) begin(w http.ResponseWriter, r *http.Request) *exchange {
	x := &exchange{s: s, rt: s.rt.Load(), w: w, r: r, start: s.now(), status: http.StatusOK}
	x.id = reqid.New(x.start)
	if x.fw = h1.FieldWriterOf(w); x.fw != nil {
		x.fw.AppendFields(appendField(x.fw.FieldBuffer(), hdrRequestID, x.id), false)
	} else {
		w.Header()[hdrRequestID] = x.vals.one(valRequestID, x.id)
	}
	x.rt.Metrics.Begin() // ended by record
	x.span = x.rt.Tracer.Request(r)
	return x
}

// authenticate runs the runtime's authenticator, if any.
func (x *exchange) authenticate() bool {
	if x.rt.Auth == nil {
		return true
	}
	p, err := x.rt.Auth.Authenticate(x.r)
	if err != nil {
		x.fail(llm.AsError(err))
		return false
	}
	x.principal = p
	x.captureBodies()
	return x.readLabels()
}

// readBody enforces the media type and size limit and returns the body.
func (x *exchange) readBody() ([]byte, bool) {
	if ct := headerValue(x.r.Header, hdrContentType); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || (mt != "application/json" && !(len(mt) > 5 && mt[len(mt)-5:] == "+json")) {
			x.fail(&llm.Error{Kind: llm.KindMediaType, Status: http.StatusUnsupportedMediaType, Type: "invalid_request_error",
				Code: "unsupported_media_type", Message: "Unsupported Content-Type '" + ct + "': send the request body as application/json."})
			return nil, false
		}
	}
	limit := x.rt.MaxBodyBytes
	if x.r.ContentLength > limit {
		x.fail(tooLarge(limit))
		return nil, false
	}
	size := 512
	if x.r.ContentLength > 0 {
		size = int(x.r.ContentLength) + 1
	}
	buf := make([]byte, 0, size)
	body := http.MaxBytesReader(x.w, x.r.Body, limit)
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := body.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			if !utf8.Valid(buf) {
				// JSON travels as UTF-8 (RFC 8259 §8.1); passed on, the
				// bytes would reach the upstream and the usage records
				// as whatever each decoder makes of them.
				x.fail(&llm.Error{Kind: llm.KindBadRequest, Status: http.StatusBadRequest, Type: "invalid_request_error",
					Code: "invalid_json", Message: "The request body is not valid UTF-8."})
				return nil, false
			}
			x.body = buf
			return buf, true
		}
		if err != nil {
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				x.fail(tooLarge(limit))
			} else if errors.Is(err, errBodyTimeout) {
				x.w.Header().Set("Connection", "close")
				x.fail(&llm.Error{Kind: llm.KindBadRequest, Status: http.StatusRequestTimeout, Type: "invalid_request_error",
					Code: "request_timeout", Message: "The request body arrived too slowly: nothing came for the gateway's body read timeout.", Cause: err})
			} else {
				x.fail(&llm.Error{Kind: llm.KindBadRequest, Status: http.StatusBadRequest, Type: "invalid_request_error",
					Code: "body_read_error", Message: "Could not read the request body.", Cause: err})
			}
			return nil, false
		}
	}
}

func tooLarge(limit int64) *llm.Error {
	return &llm.Error{Kind: llm.KindTooLarge, Status: http.StatusRequestEntityTooLarge, Type: "invalid_request_error",
		Code: "request_too_large", Message: "The request body is larger than the gateway's limit of " + strconv.FormatInt(limit, 10) + " bytes."}
}

// resolve finds the model's group and checks the caller may use it.
func (x *exchange) resolve(model string) (*route.Group, bool) {
	x.model = model
	x.nameSpan(model)
	g, ok := x.rt.Routes.Lookup(model)
	if !ok {
		x.fail(llm.ModelNotFound(model))
		return nil, false
	}
	x.group = g
	if x.principal != nil && !x.principal.Allows(model) {
		x.fail(&llm.Error{Kind: llm.KindPermission, Status: http.StatusForbidden, Type: "invalid_request_error",
			Code: "model_not_allowed", Param: "model", Message: "This API key is not allowed to use the model '" + model + "'."})
		return nil, false
	}
	if allow := x.allowProvider(); allow != nil {
		if r := (route.Runner{Table: x.rt.Routes, Allow: allow}); !r.Reachable(g) {
			x.fail(&llm.Error{Kind: llm.KindPermission, Status: http.StatusForbidden, Type: "invalid_request_error",
				Code: "provider_not_allowed", Param: "model", Message: "This API key is not allowed to use any provider that serves the model '" + model + "'."})
			return nil, false
		}
	}
	return g, true
}

// allowProvider is the route.Runner's Allow for a key limited to some
// providers; nil when the key may use any.
func (x *exchange) allowProvider() func(d *provider.Deployment) bool {
	if x.principal == nil || x.principal.Providers == nil {
		return nil
	}
	p := x.principal
	return func(d *provider.Deployment) bool { return p.AllowsProvider(d.Provider) }
}

// headers sets the routing headers every answered request carries.
func (x *exchange) headers() {
	x.mapHeaders = true
	h := x.w.Header()
	if d := x.deployment; d != nil {
		answeredBy(h, &x.vals, d.Provider, d.Model, itoa(max(x.attempts, 1)))
	} else if e := x.cache.hit; e != nil {
		answeredBy(h, &x.vals, e.Provider, e.ServedModel, "0") // who answered when the entry was stored
	}
	h[hdrCache] = cacheHeader[x.cacheResult()]
	x.limitHeaders(h)
	x.setOverhead(h)
}

// appendHeaders formats the fields headers sets into b, for a
// h1.FieldWriter: the same fields, as lines.
func (x *exchange) appendHeaders(b []byte) []byte {
	if d := x.deployment; d != nil {
		b = appendAnsweredBy(b, d.Provider, d.Model, max(x.attempts, 1))
	} else if e := x.cache.hit; e != nil {
		b = appendAnsweredBy(b, e.Provider, e.ServedModel, 0)
	}
	b = appendField(b, hdrCache, cacheHeader[x.cacheResult()][0])
	b = x.appendLimitFields(b)
	return x.appendOverhead(b)
}

// appendAnsweredBy is answeredBy as lines. The names come from the
// configuration (or a cache entry stored from it), not from a client,
// but nothing checked them for header use: appendValue does.
func appendAnsweredBy(b []byte, provider, model string, attempts int) []byte {
	b = append(b, hdrProvider+": "...)
	b = appendValue(b, provider)
	b = append(b, "\r\n"+hdrModel+": "...)
	b = appendValue(b, model)
	b = append(b, "\r\n"+hdrAttempts+": "...)
	b = strconv.AppendInt(b, int64(attempts), 10)
	return append(b, '\r', '\n')
}

// The headers saying who answered, in canonical form.
const (
	hdrRequestID = "X-Gatehouse-Request-Id"
	hdrProvider  = "X-Gatehouse-Provider"
	hdrModel     = "X-Gatehouse-Model"
	hdrAttempts  = "X-Gatehouse-Attempts"
)

// The content type of every JSON answer, under its canonical name:
// stored directly, it costs neither Header.Set's canonicalisation nor a
// slice a response. The slice is never written: net/http copies it, and
// Header.Add appends to a full slice, which makes a new one.
const hdrContentType = "Content-Type"

var jsonContentType = []string{"application/json"}

// headerValue is h.Get(name) for a name already in canonical form, which
// is how net/http's servers (HTTP/1 and HTTP/2 alike) store every
// incoming name: it skips canonicalising a constant name per request.
func headerValue(h http.Header, name string) string {
	if v := h[name]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// answeredBy sets the provider, model and attempts headers. Nearly every
// response carries them, so they are stored under their canonical names
// directly (Header.Set would canonicalise each name again) and their
// values are kept in vals.
func answeredBy(h http.Header, vals *headerValues, provider, model, attempts string) {
	h[hdrProvider] = vals.one(valProvider, provider)
	h[hdrModel] = vals.one(valModel, model)
	h[hdrAttempts] = vals.one(valAttempts, attempts)
}

// headerValues are the values of the header fields an exchange sets, one
// slot a field (the val constants), in the exchange itself: a field's
// value slice is a one-element window on its slot, so setting it
// allocates nothing. Each window's capacity is one, so Header.Add
// appends to a copy and never into the next slot; a slot is set once an
// answer (a second set of the same field writes the same window).
type headerValues [valCount]string

const (
	valRequestID = iota
	valProvider
	valModel
	valAttempts
	valBudget
	valQuota    // the six x-ratelimit fields, in quotaHeaderKeys' order
	valOverhead = valQuota + len(quotaHeaderKeys)
	valCost     = valOverhead + 1
	valCount    = valCost + 1
)

// one stores v in slot i and returns the field value that holds it.
func (v *headerValues) one(i int, s string) []string {
	v[i] = s
	return v[i : i+1 : i+1]
}

// fail answers with err unless the response has already started, and
// records it for the log line either way.
func (x *exchange) fail(err *llm.Error) {
	x.err = err
	if x.written {
		return
	}
	x.written = true
	x.status = err.Status
	if err.Kind == llm.KindCanceled {
		return // nobody is listening
	}
	x.headers()
	if x.adm.on {
		h := x.w.Header()
		h.Del("Trailer") // a stream that never started: nothing follows the error
		h[hdrCost] = []string{zeroCost}
	}
	writeError(x.w, x.dialect, err, x.id)
}

// recover turns a panic in the pipeline into a 500 for the client and an
// error log line, instead of a dropped connection.
func (x *exchange) recover() {
	p := recover()
	if p == nil {
		return
	}
	if p == http.ErrAbortHandler {
		panic(p)
	}
	x.s.log.Error("panic serving request", "request_id", x.id, "panic", p)
	x.fail(&llm.Error{Kind: llm.KindInternal, Status: http.StatusInternalServerError, Type: "server_error",
		Message: "internal gateway error (request " + x.id + ")"})
	x.finish()
}

// finish records the request (metrics, usage record) and writes its log
// line. The one reading of the clock at the end serves them all: the log
// line's time and latency are the record's.
func (x *exchange) finish() {
	end := x.s.now()
	x.took = end.Sub(x.start) // once: Sub tells the clock readings apart each time
	x.record()
	x.keepRecord()
	x.endSpan()
	if !x.rt.LogRequests {
		return
	}
	level := slog.LevelInfo
	if x.err != nil && x.status >= 500 {
		level = slog.LevelWarn
	}
	ctx := x.r.Context()
	if w := x.s.requestLog; w != nil {
		if !x.s.log.Enabled(ctx, level) {
			return
		}
		if q := x.s.lineQueue; q != nil {
			x.queueLine(q, end, level)
			return
		}
		line := linePool.Get().(*jsonLine)
		line.b = appendLineStart(line.b[:0], &x.s.stamps, end, level)
		x.logFields(line)
		line.b = append(line.b, '}', '\n')
		_, _ = w.Write(line.b)
		linePool.Put(line)
		return
	}
	attrs := attrList(make([]slog.Attr, 0, 24))
	x.logFields(&jsonLine{attrs: &attrs})
	x.s.log.LogAttrs(ctx, level, "request", attrs...)
}

// names returns the answering deployment's names when they were made
// of its provider and model, nil otherwise: checked (route.Names.Checked)
// the first time, for the log line and the usage record both, and only
// when one of them is written.
func (x *exchange) names() *route.Names {
	if !x.namesChecked {
		x.deploymentNames, x.namesChecked = x.deploymentNames.Checked(x.deployment), true
	}
	return x.deploymentNames
}

// queueLine writes the request's log line into a buffer of q's, through
// the exchange's own jsonLine, and hands the buffer to q: no pool of
// lines here, and no copy of the line there.
func (x *exchange) queueLine(q lineQueue, end time.Time, level slog.Level) {
	buf := q.Line()
	line := &x.line
	line.b = appendLineStart(*buf, &x.s.stamps, end, level)
	x.logFields(line)
	*buf = append(line.b, '}', '\n')
	line.b = nil // q's from here on
	q.Queue(buf)
}

// logFields emits the fields of the request's log line, in order; each
// key is its member text (see jsonLine). Its latency is x.took (finish sets it).
func (x *exchange) logFields(f *jsonLine) {
	f.addPlain(`,"request_id":`, x.id) // reqid's: "gh-" and hex digits
	x.routeFields(f)
	if x.status == http.StatusOK && f.attrs == nil { // most lines: the status and the next key as one text
		f.b = appendMillisFloat(append(f.b, `,"status":200,"latency_ms":`...), x.took)
	} else {
		f.addInt(`,"status":`, x.status)
		f.addMillis(`,"latency_ms":`, x.took)
	}
	if !x.memoNameFields(f) {
		x.nameFields(f)
	}
	if x.ttft > 0 {
		f.addMillis(`,"ttft_ms":`, x.ttft)
	}
	if a := &x.adm; a.settled {
		f.addPlain(`,"cost_usd":`, a.costText) // limit.Micros.Append's digits
		if x.estimated {
			f.addInt(`,"estimated_prompt_tokens":`, x.promptTokens)
		}
		if a.downgraded != "" {
			f.addString(`,"downgraded_from":`, a.downgraded)
		}
		if a.customer != nil {
			f.addString(`,"customer":`, a.customer.ID)
		}
	}
	if x.hasUsage {
		f.addIntPair(`,"prompt_tokens":`, x.usage.PromptTokens, `,"completion_tokens":`, x.usage.CompletionTokens, "")
		f.addInt(`,"total_tokens":`, x.usage.TotalTokens)
	}
	if x.err != nil {
		f.addString(`,"error_kind":`, string(x.err.Kind))
		f.addString(`,"error":`, x.err.Error())
	}
}

// memoNameFields writes nameFields' members into a JSON line as one text
// the key keeps (auth.Principal.LineMemo), made by nameFields the first
// time: a key's requests write them alike, as long as the stream flag,
// the model's name, the deployment's names and the key's own are the
// same strings. It reports false, and writes nothing, for slog's
// attributes and for the requests it keeps no texts of (no key, model or
// deployment; a failover's or a retry's attempt counts).
func (x *exchange) memoNameFields(f *jsonLine) bool {
	p, d := x.principal, x.deployment
	if f.attrs != nil || p == nil || p.LineMemo == nil || d == nil || x.model == "" || x.attempts != 1 || x.billedAttempt != 1 {
		return false
	}
	var values [llm.TextMemoValues]string // set one by one: a literal is built aside and copied
	values[0] = "false"
	if x.stream {
		values[0] = "true"
	}
	values[1], values[2], values[3], values[4], values[5] = x.model, d.Provider, d.Model, p.KeyID, p.Project
	text := p.LineMemo.Find(&values)
	if text == "" {
		var made jsonLine
		x.nameFields(&made)
		text = string(made.b)
		p.LineMemo.Keep(&values, text)
	}
	f.b = append(f.b, text...)
	return true
}

// nameFields emits the members from "stream" to "project": whether the
// request streamed, the model asked for, the deployment that answered,
// the attempts and the key. What they write depends on those values
// alone, which memoNameFields relies on.
func (x *exchange) nameFields(f *jsonLine) {
	f.addBool(`,"stream":`, x.stream)
	if x.model != "" {
		var q llm.Quoted // the group's name, when the model names one
		if g := x.group; g != nil {
			q = g.QuotedName
		}
		f.addQuoted(`,"model":`, x.model, q)
	}
	if d := x.deployment; d != nil {
		f.addPair(route.LogProviderMember, d.Provider, route.LogModelMember, d.Model, x.names().Members())
	}
	if x.attempts > 0 {
		var text string
		if x.attempts == 1 && x.billedAttempt == 1 { // the first attempt answered, as most do
			text = firstAttemptMembers
		}
		f.addIntPair(`,"attempts":`, x.attempts, `,"billed_attempt":`, x.billedAttempt, text)
	}
	if p := x.principal; p != nil {
		if p.Project != "" {
			f.addPair(auth.LogKeyMember, p.KeyID, auth.LogProjectMember, p.Project,
				p.LogMembers.Text(auth.LogKeyMember, p.KeyID, auth.LogProjectMember, p.Project))
		} else {
			f.addQuoted(auth.LogKeyMember, p.KeyID, p.QuotedKeyID)
		}
	}
}

// routeFields emits the method and the path, as one member text made
// once for the method and path of each of gatehouse's model APIs
// (routeMembers), as two fields otherwise.
func (x *exchange) routeFields(f *jsonLine) {
	m, p := x.r.Method, x.r.URL.Path
	if text := routeMembers(m, p); text != "" {
		f.addPair(`,"method":`, m, `,"path":`, p, text)
		return
	}
	if plainMethod(m) {
		f.addPlain(`,"method":`, m)
	} else {
		f.addString(`,"method":`, m)
	}
	if plainPath(p) {
		f.addPlain(`,"path":`, p)
	} else {
		f.addString(`,"path":`, p)
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
