package server

import (
	"net/http"
	"strconv"

	"gatehouse/internal/llm"
	"gatehouse/internal/provider"
	"gatehouse/internal/route"
)

// embeddings serves POST /v1/embeddings.
func (s *Server) embeddings(w http.ResponseWriter, r *http.Request) {
	x := s.begin(w, r)
	defer x.recover()
	x.serveEmbeddings()
	x.finish()
}

func (x *exchange) serveEmbeddings() {
	if !x.authenticate() {
		return
	}
	body, ok := x.readBody()
	if !ok {
		return
	}
	req, err := llm.ParseEmbedRequest(body)
	if err != nil {
		x.fail(llm.AsError(err))
		return
	}
	g, ok := x.resolve(req.Model)
	if !ok {
		return
	}
	d := g.Pick()
	em, ok := d.Adapter.(provider.Embedder)
	if !ok {
		x.deployment = d
		x.fail(llm.BadRequest("model", "embeddings_not_supported",
			"The model '%s' is served by provider '%s', which does not support embeddings.", req.Model, d.Provider))
		return
	}
	call := providerCall(x.r, g)
	defer call.Stop()
	up, err := em.EmbedRequest(call.Context(), d, req)
	resp, ok := x.send(call, d, up, err)
	if !ok {
		return
	}
	c, err := em.Embedding(resp, d, req)
	if err != nil {
		x.fail(call.Err(d.Provider, err))
		return
	}
	x.usage, x.hasUsage = c.Usage, c.HasUsage
	x.writeJSON(c.Body)
}

// providerCall starts the upstream call for a group under the client's
// context, so a client that leaves cancels the upstream request.
func providerCall(r *http.Request, g *route.Group) *provider.Call {
	return provider.StartCall(r.Context(), g.Timeouts)
}

func itoa(n int) string { return strconv.Itoa(n) }
