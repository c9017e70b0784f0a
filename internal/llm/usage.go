package llm

import "encoding/json"

// Usage is the token count of one call, in OpenAI's terms. Providers that
// report usage differently are mapped into it by their adapter.
type Usage struct {
	PromptTokens     int
	CompletionTokens int
	TotalTokens      int
	CachedTokens     int // prompt tokens served from the provider's prompt cache
	ReasoningTokens  int // completion tokens spent on hidden reasoning
}

type wireUsage struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	TotalTokens         int `json:"total_tokens"`
	PromptTokensDetails *struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	CompletionTokensDetails *struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	} `json:"completion_tokens_details"`
}

// ParseUsage decodes an OpenAI usage object. It returns false for null or
// anything that is not a usage object.
func ParseUsage(raw []byte) (Usage, bool) {
	if KindOf(raw) != KindObject {
		return Usage{}, false
	}
	var w wireUsage
	if err := json.Unmarshal(raw, &w); err != nil {
		return Usage{}, false
	}
	u := Usage{PromptTokens: w.PromptTokens, CompletionTokens: w.CompletionTokens, TotalTokens: w.TotalTokens}
	if w.PromptTokensDetails != nil {
		u.CachedTokens = w.PromptTokensDetails.CachedTokens
	}
	if w.CompletionTokensDetails != nil {
		u.ReasoningTokens = w.CompletionTokensDetails.ReasoningTokens
	}
	if u.TotalTokens == 0 {
		u.TotalTokens = u.PromptTokens + u.CompletionTokens
	}
	return u, true
}

// UsageOf finds the top-level "usage" member of a response or chunk body.
func UsageOf(body []byte) (Usage, bool) {
	var raw []byte
	_ = EachField(body, func(key string, v []byte, _ int) bool {
		if key == "usage" {
			raw = v
			return false
		}
		return true
	})
	return ParseUsage(raw)
}
