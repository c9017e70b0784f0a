package server

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"gatehouse/internal/llm"
	"gatehouse/internal/metrics"
	"gatehouse/internal/provider"
	"gatehouse/internal/route"
)

// runAttempts serves the request through g's deployments (and its
// fallbacks) with route.Runner; try performs one attempt and answers the
// client only when it succeeds or has started streaming, so a failure
// before that leaves the response free for the next attempt. A request
// no attempt answered gets the last error.
func (x *exchange) runAttempts(g *route.Group, maxTokens int, try func(ctx context.Context, a route.Attempt) route.Result) {
	// This frame holds pointers only: an open stream is relayed from
	// here for its whole life (openStream).
	rep := x.route(g, maxTokens, try)
	if o := x.open; o != nil && rep.Open() {
		x.open = nil
		// The response headers go out from this frame, the shallowest
		// the stream reaches: writing them is the relay's deepest call.
		o.relay.Flush()
		x.relayOpen(o, rep)
	}
	x.attemptsDone(rep)
}

// route runs the attempts; the report it returns is the exchange's.
func (x *exchange) route(g *route.Group, maxTokens int, try func(ctx context.Context, a route.Attempt) route.Result) *route.Report {
	var failedAt time.Time // when the last attempt failed, if one did
	r := route.Runner{
		Table:        x.rt.Routes,
		PromptTokens: x.promptTokens,
		MaxTokens:    maxTokens,
		Try: func(ctx context.Context, a route.Attempt) route.Result {
			if !failedAt.IsZero() { // a backoff after a failure: waiting on the upstream, not gateway work
				x.upstreamWait += x.s.now().Sub(failedAt)
			}
			x.deployment, x.attempts = a.Deployment, a.N // for the headers of this attempt's answer
			x.startAttemptSpan(a)
			res := try(ctx, a)
			if res.Open {
				return res // its span ends with the relay (relayOpen)
			}
			x.endAttemptSpan(res)
			if res.Err != nil && !res.Started {
				failedAt = x.s.now()
			}
			return res
		},
		OnAttempt: x.attempted,
		Allow:     x.allowProvider(),
	}
	x.report = r.Run(x.r.Context(), g)
	return &x.report
}

// relayOpen relays the stream the answered attempt left open, then ends
// the attempt with how the stream went.
func (x *exchange) relayOpen(o *openStream, rep *route.Report) {
	res := x.relayRest(o)
	x.endAttemptSpan(res)
	rep.Close(res)
}

// attemptsDone takes from the report what the answer, the log line and
// the usage record need, and answers a request no attempt answered.
func (x *exchange) attemptsDone(rep *route.Report) {
	x.attempts, x.billedAttempt = rep.Attempts, rep.Answered.N
	switch {
	case rep.Answered.N > 0:
		x.deployment = rep.Answered.Deployment
		x.deploymentNames = rep.Answered.Names()
	case rep.Last.N > 0:
		x.deployment = rep.Last.Deployment
		x.deploymentNames = rep.Last.Names()
	}
	if rep.Err != nil {
		x.fail(rep.Err)
	}
}

// attempted records one attempt in the metrics, and a failed one in the
// log (the request's own line tells only how it ended).
func (x *exchange) attempted(a route.Attempt, res route.Result, o route.Outcome) {
	outcome := "success"
	switch {
	case o == route.Failure:
		outcome = "failure"
	case res.Err != nil && res.Err.Kind == llm.KindCanceled:
		outcome = "canceled"
	case res.Err != nil:
		outcome = "rejected"
	}
	x.rt.Metrics.Attempt(a.Group.Name, a.Group.Strategy, a.Deployment.Provider, a.Deployment.Model, outcome)
	if res.Err == nil || res.Err.Kind == llm.KindCanceled || !x.rt.LogRequests {
		return
	}
	x.s.log.LogAttrs(x.r.Context(), slog.LevelWarn, "upstream attempt failed",
		slog.String("request_id", x.id), slog.Int("attempt", a.N), slog.String("model", a.Group.Name),
		slog.String("provider", a.Deployment.Provider), slog.String("upstream_model", a.Deployment.Model),
		slog.Bool("started", res.Started), slog.String("error_kind", string(res.Err.Kind)), slog.String("error", res.Err.Error()))
}

// upstream performs an upstream request and returns its 2xx response, or
// the classified failure.
func upstream(call *provider.Call, d *provider.Deployment, req *http.Request) (*http.Response, *llm.Error) {
	resp, err := d.Client.Do(req)
	if err != nil {
		return nil, call.Err(d.Provider, err)
	}
	call.Progress()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, d.Adapter.Error(resp, d)
	}
	return resp, nil
}

// prompt returns the prompt's estimated tokens, estimating them the
// first time: tokens.EstimateChat or EstimateInput, a single pass over the
// raw request (Counter's exact count costs more than the gateway may add
// to a request; see package tokens).
func (x *exchange) prompt() int {
	if !x.estimated && x.estimate != nil {
		x.promptTokens, x.estimated = x.estimate(), true
	}
	return x.promptTokens
}

// promptFor estimates the prompt now if routing g needs it: least-tokens
// or a context window, here or in a fallback (admission asks for it
// itself when a limit needs it).
func (x *exchange) promptFor(g *route.Group) {
	if g.WantsPromptTokens() || len(g.Fallbacks) > 0 || len(g.ContextFallbacks) > 0 {
		x.prompt()
	}
}

// record feeds the request's metrics.
func (x *exchange) record() {
	m := x.rt.Metrics
	if m == nil {
		return
	}
	m.End()
	// The route pattern, not the path: /v1/responses/{id} is one series,
	// however many ids are read.
	route := x.r.Pattern
	if route == "" {
		route = x.r.URL.Path
	}
	o := metrics.RequestObs{Route: route, Code: x.status, Took: x.took, TTFT: x.ttft,
		Overhead: x.overhead, Cache: x.cacheResult()}
	if x.group != nil {
		o.Model = x.group.Name
	}
	if p := x.principal; p != nil {
		o.Project = p.Project
	}
	if d := x.deployment; d != nil {
		o.Provider = d.Provider
	}
	if x.err != nil {
		o.ErrorKind = string(x.err.Kind)
	}
	if x.hasUsage && x.cache.hit == nil { // a cache hit used no model's tokens
		u := &x.usage
		o.PromptTokens, o.CompletionTokens, o.CachedTokens, o.ReasoningTokens = u.PromptTokens, u.CompletionTokens, u.CachedTokens, u.ReasoningTokens
	}
	if a := &x.adm; a.costed {
		o.CostMicros = int64(a.cost)
	}
	if d := &x.adm.dec; x.adm.on && !d.Allowed && d.Refused.Kind != "" {
		o.DenialScope, o.DenialKind = string(d.Refused.Scope), string(d.Refused.Kind)
	}
	m.Observe(&o)
}
