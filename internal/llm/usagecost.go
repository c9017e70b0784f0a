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

// SpliceRoom is the spare capacity a body read for SetUsageCostOwned
// should have past its end: the member `,"cost":` and a cost of up to
// 24 digits fit in it.
const SpliceRoom = 32

// SetUsageCostOwned is SetUsageCostAt for a body its caller owns (no one
// else reads or keeps it): when the array behind it has room past its
// end (see SpliceRoom), the cost is written into it in place, moving
// only the bytes after the usage object's cost, which is most often the
// end of the body; otherwise it is copied as SetUsageCostAt does. The
// bytes of body are changed either way only in its own array: the
// result is what SetUsageCostAt returns.
func SetUsageCostOwned(body []byte, at UsageSlot, cost string) []byte {
	// The bytes from cut to keep are replaced by the member's name (when
	// name), with a comma before it unless it is the object's first, and
	// cost.
	cut, keep, name := at.End-1, at.End-1, true
	if at.CostEnd > 0 {
		cut, keep, name = at.CostStart, at.CostEnd, false
	}
	ins := len(cost)
	if name {
		ins += len(costName(at.Empty))
	}
	n := len(body) - (keep - cut) + ins
	if n > cap(body) {
		return SetUsageCostAt(body, at, cost)
	}
	out := body[:n]
	copy(out[cut+ins:], body[keep:]) // copy moves overlapping bytes correctly
	w := cut
	if name {
		w += putCostName(out[w:], at.Empty)
	}
	copy(out[w:], cost)
	return out
}

// costName is the name of the cost member as it is inserted: after a
// comma, unless the usage object is empty.
func costName(first bool) string {
	if first {
		return `"cost":`
	}
	return `,"cost":`
}

// putCostName writes costName(first) at the start of b, which has room
// for it, and returns its length. Its eight or seven bytes go in one or
// two stores of an array, where copy calls memmove for each of the two
// strings that made it.
func putCostName(b []byte, first bool) int {
	name := [8]byte{',', '"', 'c', 'o', 's', 't', '"', ':'}
	if first {
		*(*[7]byte)(b) = [7]byte(name[1:])
		return 7
	}
	*(*[8]byte)(b) = name
	return 8
}
