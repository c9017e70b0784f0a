package server

import (
	"net/http"
	"strconv"
	"time"

	"gatehouse/internal/auth"
	"gatehouse/internal/llm"
	"gatehouse/internal/messages"
	"gatehouse/internal/stream"
)

// messages serves POST /v1/messages: Anthropic's Messages API in front of
// any backend. The request is translated into the canonical chat request,
// routed like any chat completion, and the OpenAI-shaped answer is
// re-expressed as an Anthropic message or event stream.
func (s *Server) messages(w http.ResponseWriter, r *http.Request) {
	x := s.beginAnthropic(w, r)
	defer x.recover()
	x.serveMessages()
	x.finish()
}

// countTokens serves POST /v1/messages/count_tokens from the gateway's
// own tokenizer; no backend is called (see package tokens for why the
// count is an estimate).
func (s *Server) countTokens(w http.ResponseWriter, r *http.Request) {
	x := s.beginAnthropic(w, r)
	defer x.recover()
	x.serveCountTokens()
	x.finish()
}

func (s *Server) beginAnthropic(w http.ResponseWriter, r *http.Request) *exchange {
	x := s.begin(w, r)
	x.dialect = dialectAnthropic
	// Where Anthropic's SDKs look for it.
	if x.fw != nil {
		x.fw.AppendFields(appendField(x.fw.FieldBuffer(), "Request-Id", x.id), false)
	} else {
		w.Header()["Request-Id"] = []string{x.id}
	}
	return x
}

func (x *exchange) serveMessages() {
	if !x.authenticate() {
		return
	}
	body, ok := x.readBody()
	if !ok {
		return
	}
	req, err := messages.ParseRequest(body)
	if err != nil {
		x.fail(llm.AsError(err))
		return
	}
	id := "msg_" + x.id
	x.serveChatRequest(req, reply{
		completion: func(body []byte) ([]byte, llm.UsageSlot, error) { return messages.EncodeMessage(body, id, req.Model) },
		encoder: func(usageCost func(llm.Usage) string) stream.Encoder {
			st := messages.NewStream(id, req.Model)
			st.UsageCost = usageCost
			return st
		},
	})
}

func (x *exchange) serveCountTokens() {
	if !x.authenticate() {
		return
	}
	body, ok := x.readBody()
	if !ok {
		return
	}
	p, err := messages.ParseCountRequest(body)
	if err != nil {
		x.fail(llm.AsError(err))
		return
	}
	if _, ok := x.resolve(p.Model); !ok {
		return
	}
	n := x.s.tokens().Chat(p)
	x.writeJSON(append(strconv.AppendInt([]byte(`{"input_tokens":`), int64(n), 10), '}'))
}

// missingKeyAnthropic is auth.ErrMissingKey worded for Anthropic clients,
// which send x-api-key.
var missingKeyAnthropic = &llm.Error{Kind: llm.KindAuth, Status: http.StatusUnauthorized, Type: "authentication_error",
	Code: "missing_api_key", Message: "x-api-key header is required (Authorization: Bearer is accepted too)."}

// writeError writes e in the dialect's error shape, with Retry-After on
// rate limits and overloads.
func writeError(w http.ResponseWriter, d dialect, e *llm.Error, requestID string) {
	if d == dialectOpenAI {
		e.WriteOpenAI(w)
		return
	}
	if e == auth.ErrMissingKey {
		e = missingKeyAnthropic
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	if e.RetryAfter > 0 {
		h.Set("Retry-After", strconv.FormatInt(int64((e.RetryAfter+time.Second-1)/time.Second), 10))
	}
	status := e.Status
	if status == 0 {
		status = http.StatusInternalServerError
	}
	w.WriteHeader(status)
	_, _ = w.Write(messages.AppendError(make([]byte, 0, 96+len(e.Message)), e, requestID))
}
