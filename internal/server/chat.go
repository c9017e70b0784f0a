package server

import (
	"net/http"

	"gatehouse/internal/llm"
	"gatehouse/internal/stream"
)

// chat serves POST /v1/chat/completions.
func (s *Server) chat(w http.ResponseWriter, r *http.Request) {
	x := s.begin(w, r)
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
	// completion re-encodes a non-streamed body; nil sends it unchanged.
	completion func(body []byte) ([]byte, error)
	// encoder re-encodes a stream; nil relays OpenAI chunks.
	encoder stream.Encoder
}

// serveChatRequest routes a parsed chat request to a deployment and
// answers with its result, in the form rp says.
func (x *exchange) serveChatRequest(req *llm.ChatRequest, rp reply) {
	x.stream = req.Stream
	g, ok := x.resolve(req.Model)
	if !ok {
		return
	}
	d := g.Pick()
	call := providerCall(x.r, g)
	defer call.Stop()
	up, err := d.Adapter.ChatRequest(call.Context(), d, req)
	resp, ok := x.send(call, d, up, err)
	if !ok {
		return
	}
	if !req.Stream {
		c, err := d.Adapter.Completion(resp, d, req)
		if err != nil {
			x.fail(call.Err(d.Provider, err))
			return
		}
		x.usage, x.hasUsage = c.Usage, c.HasUsage
		body := c.Body
		if rp.completion != nil {
			if body, err = rp.completion(body); err != nil {
				x.fail(llm.AsError(err))
				return
			}
		}
		x.writeJSON(body)
		return
	}
	st, err := d.Adapter.Stream(resp, d, req)
	if err != nil {
		resp.Body.Close()
		x.fail(call.Err(d.Provider, err))
		return
	}
	defer st.Close()
	x.headers()
	res, err := stream.Relay(x.w, st, stream.Options{
		IncludeUsage: req.IncludeUsage,
		OnChunk:      call.Progress,
		Classify:     func(err error) *llm.Error { return call.Err(d.Provider, err) },
		Now:          x.s.now,
		Encoder:      rp.encoder,
	})
	x.usage, x.hasUsage = res.Usage, res.HasUsage
	if !res.FirstChunk.IsZero() {
		x.ttft = res.FirstChunk.Sub(x.start)
	}
	if res.Started {
		x.written = true
	}
	if err != nil {
		x.fail(call.Err(d.Provider, err))
	}
}

// writeJSON sends a successful JSON body.
func (x *exchange) writeJSON(body []byte) {
	x.headers()
	x.written = true
	h := x.w.Header()
	h.Set("Content-Type", "application/json")
	h["Content-Length"] = []string{itoa(len(body))}
	x.w.WriteHeader(http.StatusOK)
	_, _ = x.w.Write(body)
}
