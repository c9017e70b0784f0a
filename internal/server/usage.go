package server

import (
	"net/http"
	"strings"
	"time"

	"gatehouse/internal/account"
	"gatehouse/internal/h1"
	"gatehouse/internal/limit"
	"gatehouse/internal/llm"
	"gatehouse/internal/stream"
)

// UsageSink takes the usage record of every API request; *account.Sink
// implements it without ever blocking the request.
type UsageSink interface {
	Add(account.Record)
}

// FieldPrefix begins the names of the request fields gatehouse reads
// of its own (labels, the customer, the cache's): the prefix for
// gatehouse's engine to note (h1.Server.NotePrefix), so that a request
// without any is not searched for them.
const FieldPrefix = "X-Gatehouse-"

// LabelPrefix begins the names of label headers,
// x-gatehouse-label-<name>: <value>, kept on the request's usage record.
const LabelPrefix = FieldPrefix + "Label-"

// Label headers' bounds, and the overhead header.
const (
	maxLabels     = 8
	maxLabelName  = 32
	maxLabelValue = 128
	hdrOverhead   = "X-Gatehouse-Overhead-Ms"
)

// ownField is the value of one of gatehouse's own request fields (a
// name of FieldPrefix), with no look-up in the header map when the
// engine saw none of them come (noOwnFields, which readLabels sets
// after authentication: only a keyed request reads these fields).
func (x *exchange) ownField(name string) string {
	if x.noOwnFields {
		return ""
	}
	return headerValue(x.r.Header, name)
}

// readLabels keeps the request's label headers for its usage record, or
// answers 400 (parseLabels) and reports false.
func (x *exchange) readLabels() bool {
	if n := h1.RequestNotesOf(x.w); n != nil {
		if has, known := n.Prefixed(FieldPrefix); known && !has {
			x.noOwnFields = true // the engine saw no field of ours as it read the request
			return true
		}
	}
	labels, err := parseLabels(x.r.Header)
	if err != nil {
		x.fail(err)
		return false
	}
	x.labels = labels
	return true
}

// parseLabels collects the label headers of h, refusing a bad name, an
// over-long value, a repeated label or more than maxLabels; a refused
// request keeps none of them. Header names arrive canonicalised, so the
// prefix is compared without case and the name kept in lower case.
func parseLabels(h http.Header) (map[string]string, *llm.Error) {
	var labels map[string]string
	for k, vs := range h {
		if len(k) <= len(LabelPrefix) || !strings.EqualFold(k[:len(LabelPrefix)], LabelPrefix) {
			continue
		}
		name := strings.ToLower(k[len(LabelPrefix):])
		var problem string
		switch {
		case !validLabelName(name):
			problem = "Label names after x-gatehouse-label- must be 1 to 32 characters of a-z, 0-9, '_' and '-'."
		case len(vs) != 1:
			problem = "The label '" + name + "' is given more than once."
		case len(vs[0]) > maxLabelValue:
			problem = "The value of the label '" + name + "' is longer than 128 bytes."
		case len(labels) == maxLabels:
			problem = "A request may carry at most 8 x-gatehouse-label-* headers."
		}
		if problem != "" {
			return nil, labelError("x-gatehouse-label-"+name, problem)
		}
		if labels == nil {
			labels = make(map[string]string, 2)
		}
		labels[name] = vs[0]
	}
	return labels, nil
}

func validLabelName(s string) bool {
	if len(s) == 0 || len(s) > maxLabelName {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

func labelError(param, msg string) *llm.Error {
	return &llm.Error{Kind: llm.KindBadRequest, Status: http.StatusBadRequest, Type: "invalid_request_error",
		Code: "invalid_label", Param: param, Message: msg}
}

// setOverhead fixes the gateway's overhead so far — the time since the
// request arrived less the time spent waiting on upstream calls and
// between retries — and sends it in x-gatehouse-overhead-ms. It runs as
// the response headers are set, so the figure covers everything the
// gateway did before the client saw an answer.
func (x *exchange) setOverhead(h http.Header) {
	x.overhead = max(x.s.now().Sub(x.start)-x.upstreamWait, 0)
	var buf [24]byte
	h[hdrOverhead] = x.vals.one(valOverhead, string(appendMillis(buf[:0], x.overhead)))
}

// appendOverhead is setOverhead as a line.
func (x *exchange) appendOverhead(b []byte) []byte {
	x.overhead = max(x.s.now().Sub(x.start)-x.upstreamWait, 0)
	b = append(b, hdrOverhead+": "...)
	return append(appendMillis(b, x.overhead), '\r', '\n')
}

// appendMillis appends d in milliseconds with three decimals ("0.153").
func appendMillis(b []byte, d time.Duration) []byte {
	us := d.Microseconds()
	b = limit.AppendInt(b, us/1000)
	frac := us % 1000
	return append(b, '.', byte('0'+frac/100), byte('0'+frac/10%10), byte('0'+frac%10))
}

// captureBodies starts keeping what the client is sent, for a project
// that keeps bodies in its usage records: every byte written, streams
// included, up to the redactor's limit. Flushes and trailers pass
// through (Unwrap).
func (x *exchange) captureBodies() {
	if p := x.principal; p == nil || !p.LogBodies || x.rt.Bodies == nil || x.rt.Usage == nil {
		return
	}
	x.capture = &bodyCapture{ResponseWriter: x.w, limit: x.rt.Bodies.Limit()}
	x.w = x.capture
}

// bodyCapture copies the first limit bytes of a response.
type bodyCapture struct {
	http.ResponseWriter
	limit int
	b     []byte
}

func (c *bodyCapture) Write(p []byte) (int, error) {
	if room := c.limit - len(c.b); room > 0 {
		c.b = append(c.b, p[:min(room, len(p))]...)
	}
	return c.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach Flush and the rest.
func (c *bodyCapture) Unwrap() http.ResponseWriter { return c.ResponseWriter }

// countStream fills in the usage of a stream that ended without any —
// the client went away, the upstream broke off or never reports usage —
// from what was relayed: the prompt's estimate plus the completion
// tokens of the text the client was sent (the sample, scaled to the
// whole stream when the sample is only its start). The cost is then
// priced from it, never above the reservation (answeredCost).
func (x *exchange) countStream(model string, res *stream.Result) {
	n, _ := x.s.completions().Count(model, stream.SampleText(res.Sample))
	if res.Sampled > 0 && res.Relayed > res.Sampled {
		n = int(float64(n)*float64(res.Relayed)/float64(res.Sampled) + 0.5)
	}
	x.setCounted(n)
}

// countCompletion fills in the usage of a whole answer that came without
// any, from its text.
func (x *exchange) countCompletion(model, text string) {
	n, _ := x.s.completions().Count(model, text)
	x.setCounted(n)
}

func (x *exchange) setCounted(completion int) {
	prompt := x.prompt()
	x.usage = llm.Usage{PromptTokens: prompt, CompletionTokens: completion, TotalTokens: prompt + completion}
	x.hasUsage, x.usageEstimated = true, true
}

// keepRecord hands the request's usage record to the sink, if any. The
// record (368 bytes) is filled where it lies rather than returned, which
// would copy it once more on its way to Add; gatehouse's own sink takes
// it by its address (account.Sink.Keep), where a call of the interface's
// Add copies it for the call, and could not take its address without
// moving it to the heap.
func (x *exchange) keepRecord() {
	sink := x.rt.Usage
	if sink == nil {
		return
	}
	var r account.Record
	x.usageRecord(&r)
	if s, ok := sink.(*account.Sink); ok {
		s.Keep(&r)
	} else {
		sink.Add(r)
	}
}

// usageRecord fills r, a zero Record, with the request as the usage API
// shows it. The figures are the ones the client saw: status, the cost
// header, the usage relayed.
func (x *exchange) usageRecord(r *account.Record) {
	r.RequestID = x.id
	r.Time = x.start.UTC()
	r.Endpoint = x.r.URL.Path
	r.Customer = x.customer
	r.Model = x.model
	r.Status = x.status
	r.Attempts = x.attempts
	r.Stream = x.stream
	r.Labels = x.labels
	r.Cache = x.cacheResult()
	r.LatencyMS = ms(x.took)
	r.TTFTMS = ms(x.ttft)
	r.OverheadMS = ms(x.overhead)
	if a := &x.adm; a.downgraded != "" {
		r.Model = a.downgraded // as the client sent it
	}
	if p := x.principal; p != nil {
		r.KeyID, r.ProjectID, r.Project = p.KeyID, p.ProjectID, p.Project
		if x.capture != nil {
			r.RequestBody = x.rt.Bodies.Body(x.body)
			r.ResponseBody = x.rt.Bodies.Body(x.capture.b)
		}
	}
	if d := x.deployment; d != nil {
		r.ServedModel, r.Provider, r.Deployment = d.Model, d.Provider, x.names().Joined(d)
	} else if e := x.cache.hit; e != nil {
		r.ServedModel, r.Provider, r.Deployment = e.ServedModel, e.Provider, e.Deployment
		r.Saved = e.Cost
	}
	if x.err != nil {
		r.ErrorKind = string(x.err.Kind)
	}
	if x.hasUsage {
		u := &x.usage
		r.PromptTokens, r.CompletionTokens, r.CachedTokens, r.ReasoningTokens = u.PromptTokens, u.CompletionTokens, u.CachedTokens, u.ReasoningTokens
	}
	r.UsageSource = account.SourceReported
	if x.usageEstimated || (x.written && x.status < 300 && !x.hasUsage && x.deployment != nil) {
		r.UsageSource = account.SourceEstimated
	}
	if x.adm.costed {
		r.Cost = x.adm.cost
	}
}
