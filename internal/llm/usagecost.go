package llm

// SetUsageCost puts "cost": <cost> into the top-level "usage" object of a
// JSON response or chunk (replacing a cost already there), as OpenRouter
// reports it: clients that never see HTTP trailers still learn what the
// request cost, and SDKs keep unknown fields. cost must be a JSON number
// ("0.001250"). The body is returned unchanged, with false, when it has
// no usage object or is not well-formed.
func SetUsageCost(body []byte, cost string) ([]byte, bool) {
	_, _, slot, err := CheckUsage(body)
	if err != nil || slot.End == 0 {
		return body, false
	}
	return SetUsageCostAt(body, slot, cost), true
}

// SetUsageCostAt is SetUsageCost for a body whose usage object CheckUsage
// has already found (at.End > 0): nothing is walked again.
func SetUsageCostAt(body []byte, at UsageSlot, cost string) []byte {
	head, field, tail := UsageCostSplice(at)
	out := make([]byte, 0, head+len(field)+len(cost)+len(body)-tail)
	return append(append(append(append(out, body[:head]...), field...), cost...), body[tail:]...)
}

// UsageCostSplice says where SetUsageCostAt puts the cost, for a writer
// that sends the body in parts rather than build a new one: body[:head],
// then field, then the cost, then body[tail:]. at.End must be > 0.
func UsageCostSplice(at UsageSlot) (head int, field string, tail int) {
	if at.CostEnd > 0 { // the cost already there is replaced
		return at.CostStart, "", at.CostEnd
	}
	end := at.End - 1 // the object's closing brace
	if at.Empty {
		return end, `"cost":`, end
	}
	return end, `,"cost":`, end
}
