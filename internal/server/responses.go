package server

import (
	"context"
	"net/http"

	"gatehouse/internal/cache"
	"gatehouse/internal/llm"
	"gatehouse/internal/provider"
	"gatehouse/internal/responses"
	"gatehouse/internal/route"
	"gatehouse/internal/stream"
)

// responsesCreate serves POST /v1/responses: OpenAI's Responses API in
// front of any backend. The request becomes a chat request (after the
// stored conversation it continues, if any), is routed, limited, cached
// and recorded like any chat completion, and the answer is re-expressed
// as a response object or the Responses event stream.
func (s *Server) responsesCreate(w http.ResponseWriter, r *http.Request) {
	x := s.begin(w, r)
	x.op = "chat"
	defer x.recover()
	x.serveResponses()
	x.finish()
}

// storedResponse serves GET /v1/responses/{id} (remove false) or DELETE
// (remove true) from the stored responses of the caller's project.
func (s *Server) storedResponse(remove bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		x := s.begin(w, r)
		x.op = "responses"
		defer x.recover()
		x.serveStoredResponse(remove)
		x.finish()
	}
}

func (x *exchange) serveResponses() {
	if !x.authenticate() {
		return
	}
	body, ok := x.readBody()
	if !ok {
		return
	}
	r, err := responses.ParseRequest(body)
	if err != nil {
		x.fail(llm.AsError(err))
		return
	}
	store := x.rt.Responses
	if (r.Store || r.PreviousID != "") && store == nil {
		param := "store"
		if r.PreviousID != "" {
			param = "previous_response_id"
		}
		x.fail(llm.BadRequest(param, "unsupported_parameter",
			"Unsupported parameter: '%s': this gateway keeps no responses (it runs without a database).", param))
		return
	}
	var prior []byte
	if r.PreviousID != "" {
		prev, found, err := store.Response(x.r.Context(), x.responseScope(), r.PreviousID)
		if err != nil {
			x.fail(storeUnavailable(err))
			return
		}
		if !found {
			x.fail(&llm.Error{Kind: llm.KindNotFound, Status: http.StatusNotFound, Type: "invalid_request_error",
				Code: "previous_response_not_found", Param: "previous_response_id",
				Message: "Previous response with id '" + r.PreviousID + "' not found."})
			return
		}
		prior = prev.Items
	}
	req, err := r.Chat(prior)
	if err != nil {
		x.fail(llm.AsError(err))
		return
	}
	meta := responses.Meta{ID: "resp_" + x.id[len("gh-"):], CreatedAt: x.start.Unix(), Model: r.Model, Previous: r.PreviousID}
	keep := func(e *responses.Encoded) {
		if r.Store {
			x.keepResponse(store, r, e.ID, e, prior)
		}
	}
	x.serveChatRequest(req, reply{
		uncached: len(r.Untranslatable()) > 0,
		fit:      func(d *provider.Deployment) *llm.Error { return untranslatable(d, r) },
		native: func(ctx context.Context, a route.Attempt, ra provider.ResponsesAPI) route.Result {
			return x.nativeAttempt(ctx, a, ra, r, prior, keep)
		},
		completion: func(body []byte) ([]byte, llm.UsageSlot, error) {
			e, err := responses.EncodeResponse(body, r, meta)
			if err != nil {
				return nil, llm.UsageSlot{}, err
			}
			keep(e)
			return e.Body, e.Usage, nil
		},
		encoder: func(usageCost func(llm.Usage) string) stream.Encoder {
			st := responses.NewStream(r, meta)
			st.UsageCost = usageCost
			st.OnComplete = keep
			return st
		},
	})
}

// untranslatable refuses what only a backend speaking the Responses API
// could honour, naming the first such parameter, unless the deployment
// drops what it cannot do.
func untranslatable(d *provider.Deployment, r *responses.Request) *llm.Error {
	u := r.Untranslatable()
	if len(u) == 0 || d.DropUnsupported {
		return nil
	}
	return llm.BadRequest(u[0].Param, "unsupported_parameter",
		"Unsupported parameter: '%s' (provider %q cannot honour it: %s). Set drop_unsupported on the provider to drop it.",
		u[0].Param, d.Provider, u[0].Why)
}

// keepResponse stores a finished response before the client has all of
// it, so a previous_response_id sent the moment it arrives finds it. A
// failure to store is logged and the answer still goes out: the client
// learns of it when it continues.
func (x *exchange) keepResponse(store responses.Store, r *responses.Request, id string, e *responses.Encoded, prior []byte) {
	if id == "" {
		id = responses.ResponseID(e.Body)
	}
	st := &responses.Stored{
		ID: id, Project: x.responseScope(), Model: r.Model, CreatedAt: x.start.UTC(),
		Response: e.Body, Items: responses.Conversation(prior, r.Input, e.Output),
	}
	if err := store.PutResponse(x.r.Context(), st); err != nil {
		x.s.log.Warn("storing a response failed", "request_id", x.id, "response_id", id, "error", err.Error())
	}
}

// responseScope is the project a stored response belongs to: a key sees
// only its own project's.
func (x *exchange) responseScope() string {
	if x.principal == nil {
		return ""
	}
	return cacheProject(x)
}

func (x *exchange) serveStoredResponse(remove bool) {
	if !x.authenticate() {
		return
	}
	id := x.r.PathValue("id")
	store := x.rt.Responses
	if store == nil {
		x.fail(responseNotFound(id))
		return
	}
	if remove {
		found, err := store.DeleteResponse(x.r.Context(), x.responseScope(), id)
		switch {
		case err != nil:
			x.fail(storeUnavailable(err))
		case !found:
			x.fail(responseNotFound(id))
		default:
			x.writeStored(append(append(append([]byte(`{"id":`), llm.AppendQuote(nil, id)...), `,"object":"response","deleted":true`...), '}'))
		}
		return
	}
	st, found, err := store.Response(x.r.Context(), x.responseScope(), id)
	switch {
	case err != nil:
		x.fail(storeUnavailable(err))
	case !found:
		x.fail(responseNotFound(id))
	default:
		x.writeStored(st.Response)
	}
}

// writeStored answers a read of the store: no upstream, no cost.
func (x *exchange) writeStored(body []byte) {
	x.written = true
	h := x.w.Header()
	x.setOverhead(h)
	h[hdrContentType] = jsonContentType
	h["Content-Length"] = []string{itoa(len(body))}
	x.w.WriteHeader(http.StatusOK)
	if x.r.Method != http.MethodHead {
		_, _ = x.w.Write(body)
	}
}

func responseNotFound(id string) *llm.Error {
	return &llm.Error{Kind: llm.KindNotFound, Status: http.StatusNotFound, Type: "invalid_request_error",
		Message: "Response with id '" + id + "' not found."}
}

func storeUnavailable(err error) *llm.Error {
	return &llm.Error{Kind: llm.KindUnavailable, Status: http.StatusServiceUnavailable, Type: "server_error",
		Code: "store_unavailable", Message: "The response store is unavailable; try again.", Cause: err}
}

// nativeAttempt sends the request to a deployment that speaks the
// Responses API itself: the client's body (its model and conversation
// fitted), the answer relayed as it comes. Usage, the store and the cache
// read the answer; the cache keeps it as a chat completion, so a hit
// serves Responses and chat clients alike.
func (x *exchange) nativeAttempt(ctx context.Context, a route.Attempt, ra provider.ResponsesAPI, r *responses.Request,
	prior []byte, keep func(*responses.Encoded)) route.Result {
	d := a.Deployment
	body, err := r.NativeBody(d.Model, prior)
	if err != nil {
		return route.Result{Err: llm.AsError(err)}
	}
	start := x.s.now()
	call := provider.StartCall(ctx, a.Timeouts)
	up, err := ra.ResponsesRequest(call.Context(), d, body, r.Stream)
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
	finished := func(obj []byte) {
		keep(&responses.Encoded{Body: obj, Output: responses.OutputOf(obj)})
		if x.cache.write {
			if chat, ok := responses.ToChat(obj); ok {
				u, _ := responses.UsageOf(obj)
				x.keepAnswer(&cache.Entry{Completion: chat, Usage: u})
			}
		}
	}
	if !r.Stream {
		defer call.Stop()
		b, err := provider.ReadBody(resp, d.ResponseLimit())
		x.upstreamWait += x.s.now().Sub(t0)
		if err != nil {
			return route.Result{Err: call.Err(d.Provider, err)}
		}
		u, has, err := responses.ReadNative(b, d.Provider)
		if err != nil {
			return route.Result{Err: llm.AsError(err)}
		}
		finished(b)
		x.usage, x.hasUsage = u, has
		if !has {
			chat, _ := responses.ToChat(b)
			x.countCompletion(d.Model, llm.CompletionText(chat))
		}
		x.writeJSON(b)
		return route.Result{FirstByte: x.s.now().Sub(start)}
	}
	x.upstreamWait += x.s.now().Sub(t0)
	st := responses.NewNativeStream(resp)
	usageCost := x.streamUsageCost(d)
	enc := &responses.NativeEncoder{UsageCost: usageCost, OnComplete: finished, Stream: st}
	fields := x.streamFields()
	o := &openStream{call: call, provider: d.Provider, st: st, start: start, span: x.span.Child(x.rt.Tracer, "stream", false)}
	model := d.Model
	o.count = func(*stream.Result) { x.countCompletion(model, st.Text.String()) }
	o.relay = stream.Start(x.w, st, stream.Options{
		OnChunk:   func() { call.Progress(); a.Relayed(1) }, // one token a chunk: least-tokens sees the reply's progress
		Classify:  func(err error) *llm.Error { return call.Err(d.Provider, err) },
		Now:       x.s.now,
		Encoder:   enc,
		UsageCost: usageCost,
		Fields:    fields,
	})
	return x.opened(o)
}
