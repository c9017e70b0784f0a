package server

import (
	"net/http"

	"gatehouse/internal/llm"
	"gatehouse/internal/provider"
	"gatehouse/internal/responses"
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

// responsesByID serves GET and DELETE /v1/responses/{id} from the
// stored responses of the caller's project.
func (s *Server) responsesByID(w http.ResponseWriter, r *http.Request) {
	x := s.begin(w, r)
	x.op = "responses"
	defer x.recover()
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		x.serveStoredResponse(false)
	case http.MethodDelete:
		x.serveStoredResponse(true)
	default:
		w.Header().Set("Allow", "GET, DELETE")
		x.fail(&llm.Error{Kind: llm.KindBadRequest, Status: http.StatusMethodNotAllowed, Type: "invalid_request_error",
			Code: "method_not_allowed", Message: "Method " + r.Method + " is not allowed on " + r.URL.Path + "; use GET or DELETE."})
	}
	x.finish()
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
			x.keepResponse(store, r, meta, e, prior)
		}
	}
	x.serveChatRequest(req, reply{
		fit: func(d *provider.Deployment) *llm.Error { return untranslatable(d, r) },
		completion: func(body []byte) ([]byte, error) {
			e, err := responses.EncodeResponse(body, r, meta)
			if err != nil {
				return nil, err
			}
			keep(e)
			return e.Body, nil
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
func (x *exchange) keepResponse(store responses.Store, r *responses.Request, m responses.Meta, e *responses.Encoded, prior []byte) {
	st := &responses.Stored{
		ID: m.ID, Project: x.responseScope(), Model: r.Model, CreatedAt: x.start.UTC(),
		Response: e.Body, Items: responses.Conversation(prior, r.Input, e.Output),
	}
	if err := store.PutResponse(x.r.Context(), st); err != nil {
		x.s.log.Warn("storing a response failed", "request_id", x.id, "response_id", m.ID, "error", err.Error())
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
	x.headers()
	x.written = true
	h := x.w.Header()
	h.Set("Content-Type", "application/json")
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
