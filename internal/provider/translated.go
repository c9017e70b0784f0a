package provider

import (
	"maps"
	"strings"

	"gatehouse/internal/llm"
)

// FitTranslated adapts a request translated from another dialect (an
// Anthropic /v1/messages request, say) to an OpenAI-shaped upstream that
// would refuse what the translation carried over: OpenAI and Azure know
// no top_k, and only their reasoning models take reasoning_effort (gpt-4o
// answers 400 to it, so a client that asks Claude for thinking would
// otherwise fail on every OpenAI fallback). The client did not write those
// parameters for this upstream, so dropping them is the translation's
// business; a request sent in OpenAI's own dialect is never touched, and
// gets the upstream's answer to what it sent.
//
// Servers of type openai-compatible get both (vLLM, llama.cpp and Ollama
// read top_k; most ignore what they do not know) unless the provider sets
// drop_unsupported, which treats them as OpenAI does.
func FitTranslated(d *Deployment, req *llm.ChatRequest) (*llm.ChatRequest, error) {
	if !req.Translated() {
		return req, nil
	}
	p, err := req.Params()
	if err != nil {
		return nil, err
	}
	strict := d.Type == "openai" || d.Type == "azure" || d.DropUnsupported
	if !strict {
		return req, nil
	}
	_, topK := p.Other["top_k"]
	reasoning := (p.ReasoningEffort != "" || p.ThinkingBudget > 0) && !OpenAIReasoningModel(d.Model)
	if !topK && !reasoning {
		return req, nil
	}
	fit := *p
	if topK {
		fit.Other = maps.Clone(p.Other)
		delete(fit.Other, "top_k")
	}
	if reasoning {
		fit.ReasoningEffort, fit.ThinkingBudget = "", 0
	}
	return llm.NewChatRequest(&fit)
}

// OpenAIReasoningModel reports whether an OpenAI model ID names a
// reasoning model, the ones that take reasoning_effort: the o-series,
// gpt-5 and gpt-oss. An Azure deployment name that does not say so is
// taken for a model that does not reason (its effort is dropped, which
// costs the default depth, not a 400).
func OpenAIReasoningModel(model string) bool {
	m := strings.ToLower(model)
	if i := strings.LastIndexByte(m, '/'); i >= 0 {
		m = m[i+1:]
	}
	for _, prefix := range []string{"o1", "o3", "o4", "gpt-5", "gpt-oss"} {
		if strings.HasPrefix(m, prefix) {
			return true
		}
	}
	return false
}

// EmptySchema is the JSON Schema of a function that takes no arguments.
// OpenAI lets a tool's parameters be absent; Anthropic, Bedrock and
// Ollama require a schema, so their adapters send this one.
const EmptySchema = `{"type":"object","properties":{}}`
