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
	out := make([]byte, 0, len(body)+len(cost)+9)
	if at.CostEnd > 0 {
		return append(append(append(out, body[:at.CostStart]...), cost...), body[at.CostEnd:]...)
	}
	end := at.End - 1 // the object's closing brace
	out = append(out, body[:end]...)
	if !at.Empty {
		out = append(out, ',')
	}
	return append(append(append(out, `"cost":`...), cost...), body[end:]...)
}
