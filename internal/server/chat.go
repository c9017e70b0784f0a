package server

import (
	"context"
	"net/http"
	"time"

	"gatehouse/internal/cache"
	"gatehouse/internal/llm"
	"gatehouse/internal/provider"
	"gatehouse/internal/route"
	"gatehouse/internal/stream"
	"gatehouse/internal/tokens"
)

// chat serves POST /v1/chat/completions.
func (s *Server) chat(w http.ResponseWriter, r *http.Request) {
	x := s.begin(w, r)
	x.op = "chat"
	defer x.recover()
	x.serveChat()
	x.finish()
}

func (x *exchange) serveChat() {
	if !x.authenticate() {
		return
	}
	body, ok := x.readBody()
	if !ok {
		return
	}
	req, err := llm.ParseChatRequest(body)
	if err != nil {
		x.fail(llm.AsError(err))
		return
	}
	x.serveChatRequest(req, reply{})
}

// reply is how a route's dialect answers with what the backend returned
// (always OpenAI-shaped); the zero value relays it as it is.
type reply struct {
	// fit, when set, checks the request against the deployment an
	// attempt goes to (a parameter only some backends honour); an error
	// ends the attempt unanswered.
	fit func(d *provider.Deployment) *llm.Error
	// native, when set, serves an attempt whose deployment speaks the
	// request's own API (the Responses API), bypassing translation.
	native func(ctx context.Context, a route.Attempt, ra provider.ResponsesAPI) route.Result
	// uncached: the chat request does not carry everything that can
	// change the answer (a Responses request's built-in tools), so its
	// cache key would not either; the cache is neither read nor written.
	uncached bool
	// completion re-encodes a non-streamed body, returning where it
	// wrote the usage object (End 0 when it did not say), so writeJSON
	// need not walk a body the gateway has just built; nil sends the body
	// unchanged.
	completion func(body []byte) ([]byte, llm.UsageSlot, error)
	// encoder returns a fresh re-encoder for a stream (one per attempt: an
	// attempt that fails before its first byte may have fed it); nil
	// relays OpenAI chunks.
	encoder func(usageCost func(llm.Usage) string) stream.Encoder
}

// serveChatRequest routes a parsed chat request through the model's
// deployments, with failover, and answers with the result in the form rp
// says.
func (x *exchange) serveChatRequest(req *llm.ChatRequest, rp reply) {
	x.stream = req.Stream
	x.op = "chat"
	g, ok := x.resolve(req.Model)
	if !ok {
		return
	}
	x.estimate = func() int { return tokens.EstimateChat(req.Messages, req.Tools) }
	x.promptFor(g)
	if !x.cachePolicy() {
		return
	}
	if rp.uncached {
		x.cache.read, x.cache.write = false, false
	}
	if g, ok = x.admit(g, admitRequest{maxOut: req.MaxTokens, user: req.User}); !ok {
		return
	}
	defer x.keepCached() // after settle: the answer's cost is what a hit saves
	defer x.settle()
	if x.serveFromCache(req, g, rp) {
		return
	}
	x.runAttempts(g, req.MaxTokens, func(ctx context.Context, a route.Attempt) route.Result {
		return x.chatAttempt(ctx, a, req, rp)
	})
}

// chatAttempt makes one upstream call and, if it succeeds, answers the
// client. A failure is returned unanswered unless the stream had started.
// A stream that started is left open (x.open) for runAttempts to relay.
func (x *exchange) chatAttempt(ctx context.Context, a route.Attempt, req *llm.ChatRequest, rp reply) route.Result {
	d := a.Deployment
	if rp.native != nil && d.ResponsesAPI {
		if ra, ok := d.Adapter.(provider.ResponsesAPI); ok {
			return rp.native(ctx, a, ra)
		}
	}
	if rp.fit != nil {
		if err := rp.fit(d); err != nil {
			return route.Result{Err: err}
		}
	}
	start := x.s.now()
	call := provider.StartCall(ctx, a.Timeouts)
	up, err := d.Adapter.ChatRequest(call.Context(), d, req)
	if err != nil {
		call.Stop()
		return route.Result{Err: llm.AsError(err)}
	}
	x.attemptSpan.Inject(x.rt.Tracer, up.Header)
	t0 := x.s.now()
	resp, uerr := upstream(call, d, up)
	if uerr != nil {
		call.Stop()
		x.upstreamWait += x.s.now().Sub(t0)
		return route.Result{Err: uerr}
	}
	if !req.Stream {
		res := x.chatCompletion(call, resp, d, req, rp, start, t0)
		call.Stop()
		return res
	}
	x.upstreamWait += x.s.now().Sub(t0) // until the response headers; the relay waits on chunks after the client's headers
	return x.chatStream(call, resp, a, req, rp, start)
}

// chatCompletion answers with a non-streamed completion.
func (x *exchange) chatCompletion(call *provider.Call, resp *http.Response, d *provider.Deployment, req *llm.ChatRequest,
	rp reply, start, t0 time.Time) route.Result {
	c, err := d.Adapter.Completion(resp, d, req)
	x.upstreamWait += x.s.now().Sub(t0) // the body is read: the upstream's part is done
	if err != nil {
		return route.Result{Err: call.Err(d.Provider, err)}
	}
	if x.cache.write {
		x.keepAnswer(&cache.Entry{Completion: append([]byte(nil), c.Body...), Usage: c.Usage})
	}
	body, slot := c.Body, c.Slot
	if rp.completion != nil {
		if body, slot, err = rp.completion(body); err != nil {
			return route.Result{Err: llm.AsError(err)}
		}
	}
	x.usage, x.hasUsage = c.Usage, c.HasUsage
	if !c.HasUsage {
		x.countCompletion(d.Model, llm.CompletionText(c.Body))
	}
	// Only the adapter's body is the exchange's own: a dialect's
	// translation may keep what it made (a stored response).
	x.usageSlot, x.ownBody = slot, rp.completion == nil
	x.writeJSON(body)
	return route.Result{FirstByte: x.s.now().Sub(start)}
}

// chatStream starts relaying a streamed completion; it owns call from
// here. Until the first event goes out a failure is returned unanswered,
// so another deployment may still be tried; then the stream is left open.
func (x *exchange) chatStream(call *provider.Call, resp *http.Response, a route.Attempt, req *llm.ChatRequest,
	rp reply, start time.Time) route.Result {
	d := a.Deployment
	st, err := d.Adapter.Stream(resp, d, req)
	if err != nil {
		resp.Body.Close()
		call.Stop()
		return route.Result{Err: call.Err(d.Provider, err)}
	}
	var enc stream.Encoder
	usageCost := x.streamUsageCost(d)
	if rp.encoder != nil {
		enc = rp.encoder(usageCost)
	}
	fields := x.streamFields()
	o := &openStream{call: call, provider: d.Provider, st: st, start: start, span: x.span.Child(x.rt.Tracer, "stream", false)}
	model := d.Model
	o.count = func(res *stream.Result) { x.countStream(model, res) }
	var relayed llm.Stream = st
	if x.cache.write {
		o.rec = cache.NewRecorder(st, x.rt.Caching.MaxEntryBytes)
		relayed = o.rec
	}
	o.relay = stream.Start(x.w, relayed, stream.Options{
		IncludeUsage: req.IncludeUsage,
		OnChunk:      func() { call.Progress(); a.Relayed(1) }, // one token a chunk: least-tokens sees the reply's progress
		Classify:     func(err error) *llm.Error { return call.Err(d.Provider, err) },
		Now:          x.s.now,
		Encoder:      enc,
		UsageCost:    usageCost,
		Fields:       fields,
	})
	return x.opened(o)
}

// writeJSON sends a successful JSON body. The exchange's own fields go
// to an h1.FieldWriter as lines when there is one, Content-Type with them;
// Content-Length stays in the map, which is where the engine looks for
// the fields that frame the body.
func (x *exchange) writeJSON(body []byte) {
	fw := x.fw
	if x.mapHeaders {
		fw = nil
	}
	var lines []byte
	if fw != nil {
		lines = x.appendHeaders(fw.FieldBuffer())
	} else {
		x.headers()
	}
	x.written = true
	if x.adm.on {
		cost := x.costHeader()
		if fw != nil {
			lines = appendField(lines, hdrCost, cost)
		} else {
			x.w.Header()[hdrCost] = x.vals.one(valCost, cost)
		}
		switch { // for clients that read no headers
		case x.usageSlot.End > 0 && x.ownBody:
			body = llm.SetUsageCostOwned(body, x.usageSlot, cost)
		case x.usageSlot.End > 0:
			body = llm.SetUsageCostAt(body, x.usageSlot, cost)
		default:
			body, _ = llm.SetUsageCost(body, cost)
		}
	}
	if x.cache.pending != nil {
		x.storeAnswer()
	}
	if fw != nil {
		fw.AppendFields(append(lines, hdrContentType+": application/json\r\n"...), true)
	} else {
		x.w.Header()[hdrContentType] = jsonContentType
	}
	if len(body) > autoContentLength {
		x.w.Header()["Content-Length"] = []string{itoa(len(body))}
	}
	x.w.WriteHeader(http.StatusOK)
	_, _ = x.w.Write(body)
}

// autoContentLength is the largest body net/http sends with a
// Content-Length it computed itself, on HTTP/1 and HTTP/2 alike: a
// handler's writes are buffered (2048 bytes on HTTP/1, server.go's
// bufferBeforeChunkingSize; 4096 on HTTP/2, handlerChunkWriteSize), and a
// body still whole in that buffer when the handler returns, with no
// Content-Length, Transfer-Encoding or Trailer set, goes out with its
// length. A larger one would be chunked (or framed by DATA frames with no
// length), so writeJSON sets the header then. Below it, leaving the
// header out keeps a limited key's response headers small enough for the
// header map not to grow a second time (see BENCHMARKS.md, admitcut).
const autoContentLength = 2048
