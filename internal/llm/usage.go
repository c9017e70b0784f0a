package llm

// Usage is the token count of one call, in OpenAI's terms. Providers that
// report usage differently are mapped into it by their adapter.
type Usage struct {
	PromptTokens     int
	CompletionTokens int
	TotalTokens      int
	CachedTokens     int // prompt tokens served from the provider's prompt cache
	ReasoningTokens  int // completion tokens spent on hidden reasoning
}

// ParseUsage decodes an OpenAI usage object. It returns false for null or
// anything that is not a usage object. It runs on every response and the
// last chunk of every stream, so it scans rather than unmarshals: no
// allocation, and the same answers as encoding/json (a repeated key's
// last value wins; null leaves zero; a non-integer count is an error).
func ParseUsage(raw []byte) (Usage, bool) {
	if KindOf(raw) != KindObject {
		return Usage{}, false
	}
	var u Usage
	ok := true
	err := EachField(raw, func(key string, v []byte, _ int) bool {
		switch key {
		case "prompt_tokens":
			ok = intValue(v, &u.PromptTokens)
		case "completion_tokens":
			ok = intValue(v, &u.CompletionTokens)
		case "total_tokens":
			ok = intValue(v, &u.TotalTokens)
		case "prompt_tokens_details":
			ok = detailValue(v, "cached_tokens", &u.CachedTokens)
		case "completion_tokens_details":
			ok = detailValue(v, "reasoning_tokens", &u.ReasoningTokens)
		}
		return ok
	})
	if err != nil || !ok {
		return Usage{}, false
	}
	if u.TotalTokens == 0 {
		u.TotalTokens = u.PromptTokens + u.CompletionTokens
	}
	return u, true
}

// intValue reads an integer member into dst; null leaves it alone.
func intValue(v []byte, dst *int) bool {
	switch KindOf(v) {
	case KindNull:
		return true
	case KindNumber:
		n, ok := parseInt(v)
		if ok {
			*dst = n
		}
		return ok
	}
	return false
}

// detailValue reads one integer member of a details object.
func detailValue(v []byte, name string, dst *int) bool {
	switch KindOf(v) {
	case KindNull:
		return true
	case KindObject:
		ok := true
		err := EachField(v, func(key string, fv []byte, _ int) bool {
			if key == name {
				ok = intValue(fv, dst)
			}
			return ok
		})
		return err == nil && ok
	}
	return false
}

// parseInt parses a JSON integer (no fraction or exponent) that fits an int.
func parseInt(b []byte) (int, bool) {
	neg := len(b) > 0 && b[0] == '-'
	if neg {
		b = b[1:]
	}
	if len(b) == 0 || len(b) > 18 {
		return 0, false
	}
	n := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	if neg {
		n = -n
	}
	return n, true
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
