package llm

// SetUsageCost puts "cost": <cost> into the top-level "usage" object of a
// JSON response or chunk (replacing a cost already there), as OpenRouter
// reports it: clients that never see HTTP trailers still learn what the
// request cost, and SDKs keep unknown fields. cost must be a JSON number
// ("0.001250"). The body is returned unchanged, with false, when it has
// no usage object.
func SetUsageCost(body []byte, cost string) ([]byte, bool) {
	uStart, uEnd := -1, -1
	err := EachField(body, func(key string, v []byte, off int) bool {
		if key == "usage" && KindOf(v) == KindObject {
			uStart, uEnd = off, off+len(v) // the last one wins, as in a decoder
		}
		return true
	})
	if err != nil || uStart < 0 {
		return body, false
	}
	return SetUsageCostAt(body, uStart, uEnd, cost), true
}

// SetUsageCostAt is SetUsageCost for a body whose usage object is known
// to lie at body[uStart:uEnd] (ScanUsage found it while reading the
// usage): only that object is walked, not the whole body again.
func SetUsageCostAt(body []byte, uStart, uEnd int, cost string) []byte {
	usage := body[uStart:uEnd]
	cStart, cEnd := -1, -1
	empty := true
	_ = EachField(usage, func(key string, v []byte, off int) bool {
		empty = false
		if key == "cost" {
			cStart, cEnd = uStart+off, uStart+off+len(v)
		}
		return true
	})
	out := make([]byte, 0, len(body)+len(cost)+9)
	if cStart >= 0 {
		return append(append(append(out, body[:cStart]...), cost...), body[cEnd:]...)
	}
	// Before the object's closing brace (trailing whitespace allowed).
	end := uEnd - 1
	for end > uStart && body[end] != '}' {
		end--
	}
	out = append(out, body[:end]...)
	if !empty {
		out = append(out, ',')
	}
	return append(append(append(out, `"cost":`...), cost...), body[end:]...)
}
