package server

import (
	"context"
	"net/http"
	"strconv"

	"gatehouse/internal/llm"
	"gatehouse/internal/provider"
	"gatehouse/internal/route"
	"gatehouse/internal/tokens"
)

// embeddings serves POST /v1/embeddings.
func (s *Server) embeddings(w http.ResponseWriter, r *http.Request) {
	x := s.begin(w, r)
	x.op = "embeddings"
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
	x.estimate = func() int { return tokens.EstimateInput(req.Input) }
	x.promptFor(g)
	if g, ok = x.admit(g, admitRequest{maxOut: -1, user: req.User}); !ok {
		return
	}
	defer x.settle()
	x.runAttempts(g, 0, func(ctx context.Context, a route.Attempt) route.Result {
		return x.embedAttempt(ctx, a, req)
	})
}

// embedAttempt makes one upstream embeddings call and, if it succeeds,
// answers the client.
func (x *exchange) embedAttempt(ctx context.Context, a route.Attempt, req *llm.EmbedRequest) route.Result {
	d := a.Deployment
	em, ok := d.Adapter.(provider.Embedder)
	if !ok {
		return route.Result{Err: llm.BadRequest("model", "embeddings_not_supported",
			"The model '%s' is served by provider '%s', which does not support embeddings.", req.Model, d.Provider)}
	}
	start := x.s.now()
	call := provider.StartCall(ctx, a.Timeouts)
	defer call.Stop()
	up, err := em.EmbedRequest(call.Context(), d, req)
	if err != nil {
		return route.Result{Err: llm.AsError(err)}
	}
	x.attemptSpan.Inject(x.rt.Tracer, up.Header)
	t0 := x.s.now()
	resp, uerr := upstream(call, d, up)
	if uerr != nil {
		x.upstreamWait += x.s.now().Sub(t0)
		return route.Result{Err: uerr}
	}
	c, err := em.Embedding(resp, d, req)
	x.upstreamWait += x.s.now().Sub(t0)
	if err != nil {
		return route.Result{Err: call.Err(d.Provider, err)}
	}
	x.usage, x.hasUsage = c.Usage, c.HasUsage
	x.writeJSON(c.Body)
	return route.Result{FirstByte: x.s.now().Sub(start)}
}

func itoa(n int) string { return strconv.Itoa(n) }
