package server

import (
	"gatehouse/internal/route"
	"gatehouse/internal/telemetry"
)

// Spans of an exchange (when the runtime has a Tracer): the request's
// server span from begin to finish, "admission" around admit, one client
// span per upstream attempt (its context goes upstream as traceparent),
// and "stream" around a stream's relay. With tracing off every Span is
// the zero Span and each call below is a nil check.

// genAISystem is the gen_ai.system / gen_ai.provider.name value of a
// provider type, as the GenAI semantic conventions spell them.
func genAISystem(providerType string) string {
	switch providerType {
	case "openai", "openai-compatible", "mock":
		return "openai"
	case "azure":
		return "azure.ai.openai"
	case "gemini":
		return "gcp.gemini"
	case "bedrock":
		return "aws.bedrock"
	}
	return providerType // anthropic, ollama
}

// nameSpan names the request's span after the operation and the model,
// as the conventions ask ("chat gpt-4o-mini").
func (x *exchange) nameSpan(model string) {
	if !x.span.On() {
		return
	}
	x.span.SetName(x.op + " " + model)
	x.span.Str("gen_ai.operation.name", x.op)
	x.span.Str("gen_ai.request.model", model)
}

// startAttemptSpan opens the client span of one upstream attempt.
func (x *exchange) startAttemptSpan(a route.Attempt) {
	if !x.span.On() {
		return
	}
	d := a.Deployment
	sp := x.span.Child(x.rt.Tracer, x.op+" "+d.Model, true)
	sys := genAISystem(d.Type)
	sp.Str("gen_ai.operation.name", x.op)
	sp.Str("gen_ai.system", sys)
	sp.Str("gen_ai.provider.name", sys)
	sp.Str("gen_ai.request.model", d.Model)
	sp.Str("gatehouse.provider", d.Provider)
	sp.Int("gatehouse.attempt", a.N)
	x.attemptSpan = sp
}

// endAttemptSpan closes it with how the attempt went.
func (x *exchange) endAttemptSpan(res route.Result) {
	sp := x.attemptSpan
	if !sp.On() {
		return
	}
	if res.Err != nil {
		sp.Int("http.response.status_code", res.Err.Status)
		sp.Fail(string(res.Err.Kind), res.Err.Message)
	} else {
		sp.Int("http.response.status_code", 200)
	}
	sp.End()
	x.attemptSpan = telemetry.Span{}
}

// endSpan finishes the request's span with what the client got.
func (x *exchange) endSpan() {
	sp := x.span
	if !sp.On() {
		return
	}
	if x.op != "" {
		sp.Str("gen_ai.operation.name", x.op)
	}
	sp.Int("http.response.status_code", x.status)
	sp.Str("gatehouse.request_id", x.id)
	if d := x.deployment; d != nil {
		sys := genAISystem(d.Type)
		sp.Str("gen_ai.system", sys)
		sp.Str("gen_ai.provider.name", sys)
		sp.Str("gen_ai.response.model", d.Model)
		sp.Str("gatehouse.provider", d.Provider)
	}
	if p := x.principal; p != nil {
		sp.Str("gatehouse.key_id", p.KeyID)
		sp.Str("gatehouse.project", p.Project)
	}
	if x.hasUsage {
		sp.Int("gen_ai.usage.input_tokens", x.usage.PromptTokens)
		sp.Int("gen_ai.usage.output_tokens", x.usage.CompletionTokens)
	}
	if x.adm.costed {
		sp.Str("gatehouse.cost_usd", x.adm.costText)
	}
	if x.attempts > 0 {
		sp.Int("gatehouse.attempts", x.attempts)
	}
	if x.err != nil {
		sp.Fail(string(x.err.Kind), x.err.Message)
	}
	sp.End()
}
