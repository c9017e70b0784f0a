package llm

import "bytes"

// UsageSlot locates, in a non-streamed answer, the usage object the
// gateway writes its cost into, and what the edit needs, so that
// SetUsageCostAt changes the body without walking any of it again.
type UsageSlot struct {
	// Start and End bound the body's last top-level "usage" object (the
	// one a decoder keeps); End is 0 when there is none or the body is
	// not well-formed. The object's closing brace is at End-1.
	Start, End int
	// CostStart and CostEnd bound the value of that object's last "cost"
	// member (the one replaced); CostEnd is 0 when it has none.
	CostStart, CostEnd int
	// Empty is set when the object has no members: the cost then goes
	// in without a comma before it.
	Empty bool
}

// CheckUsage reads a whole non-streamed answer in one walk: it reports
// whether body is one well-formed JSON object (err nil when it is,
// ErrNotObject when it is well-formed JSON of another kind, a
// *SyntaxError otherwise; nesting deeper than the scanner's limit, 512,
// counts as malformed), reads the first top-level "usage" as UsageOf
// does, and notes where its last usage object lies for SetUsageCostAt
// (a zero slot when the body is malformed).
//
// A non-streamed answer is relayed as it came, so it must be whole; the
// walk that validates it reads the usage counts and the cost's place
// while it passes them: walking the usage object again to read the
// counts, and a third time to find its "cost", cost about as much again
// as the validation itself.
func CheckUsage(body []byte) (u Usage, ok bool, slot UsageSlot, err error) {
	w := usageWalk{s: scanner{data: body}}
	if err = w.answer(nil); err != nil {
		w.slot = UsageSlot{}
	}
	return w.u, w.ok, w.slot, err
}

// usageWalk is the state of CheckUsage's and CheckChunk's walk.
type usageWalk struct {
	s    scanner
	last bool // read the last top-level "usage", not the first
	seen bool // the first top-level "usage" has been passed
	u    Usage
	ok   bool
	slot UsageSlot
	at   int // the last "usage" member's value is s.data[at:end]
	end  int
}

// answer is EachField's walk of the top-level object, with its "usage"
// members read by usage instead of skipped, and the others passed to
// each if it is set; the errors are EachField's. (each is a parameter,
// not a field of w, so that a caller's closure can stay on its stack.)
func (w *usageWalk) answer(each func(name, v []byte)) error {
	s := &w.s
	if open, err := s.openDocument(); !open {
		return err
	}
	for {
		ks, err := s.memberKey()
		if err != nil {
			return err
		}
		name := memberName(s.data[ks:s.pos])
		if err := s.memberColon(); err != nil {
			return err
		}
		vs := s.pos
		if string(name) == "usage" {
			if err := w.usage(); err != nil {
				return err
			}
			w.at, w.end = vs, s.pos
		} else {
			if err := s.value(1); err != nil {
				return err
			}
			if each != nil {
				each(name, s.data[vs:s.pos])
			}
		}
		more, err := s.memberNext()
		if err != nil {
			return err
		}
		if !more {
			return s.end()
		}
	}
}

// usage walks a top-level "usage" value at s.pos (nesting depth 1, as
// EachField's values), the way scanner.object does: the first one's
// counts (or, for a chunk, each one's) are read as ParseUsage reads
// them, and an object's slot replaces the one noted before (the last
// object wins, as in a decoder).
func (w *usageWalk) usage() error {
	s := &w.s
	read := w.last || !w.seen
	if s.peek() != '{' {
		if err := s.value(1); err != nil {
			return err
		}
		if read { // not an object: no usage reported
			w.seen, w.u, w.ok = true, Usage{}, false
		}
		return nil
	}
	var u Usage
	ok := true
	slot := UsageSlot{Start: s.pos, Empty: true}
	s.pos++
	s.skipSpace()
	if s.peek() == '}' {
		s.pos++
		slot.End = s.pos
		w.done(read, u, ok, slot)
		return nil
	}
	slot.Empty = false
	for {
		ks, err := s.memberKey()
		if err != nil {
			return err
		}
		key := memberName(s.data[ks:s.pos])
		if err := s.memberColon(); err != nil {
			return err
		}
		vs := s.pos
		switch string(key) {
		case "prompt_tokens_details":
			err = w.detail(2, "cached_tokens", &u.CachedTokens, read, &ok)
		case "completion_tokens_details":
			err = w.detail(2, "reasoning_tokens", &u.ReasoningTokens, read, &ok)
		default:
			err = s.value(2)
		}
		if err != nil {
			return err
		}
		if v := s.data[vs:s.pos]; read && ok {
			switch string(key) {
			case "prompt_tokens":
				ok = intValue(v, &u.PromptTokens)
			case "completion_tokens":
				ok = intValue(v, &u.CompletionTokens)
			case "total_tokens":
				ok = intValue(v, &u.TotalTokens)
			}
		}
		if string(key) == "cost" {
			slot.CostStart, slot.CostEnd = vs, s.pos
		}
		more, err := s.memberNext()
		if err != nil {
			return err
		}
		if !more {
			slot.End = s.pos
			w.done(read, u, ok, slot)
			return nil
		}
	}
}

// done records a usage object walked whole.
func (w *usageWalk) done(read bool, u Usage, ok bool, slot UsageSlot) {
	w.slot = slot
	if !read {
		return
	}
	w.seen = true
	if !ok {
		w.u, w.ok = Usage{}, false
		return
	}
	if u.TotalTokens == 0 {
		u.TotalTokens = u.PromptTokens + u.CompletionTokens
	}
	w.u, w.ok = u, true
}

// detail walks a details value at s.pos, at the given depth, reading
// its member name into dst as detailValue does when read and *ok are
// set, and clearing *ok when detailValue would refuse the value.
func (w *usageWalk) detail(depth int, name string, dst *int, read bool, ok *bool) error {
	s := &w.s
	if !read || !*ok || s.peek() != '{' {
		vs := s.pos
		if err := s.value(depth); err != nil {
			return err
		}
		if read && *ok && KindOf(s.data[vs:s.pos]) != KindNull {
			*ok = false
		}
		return nil
	}
	s.pos++
	s.skipSpace()
	if s.peek() == '}' {
		s.pos++
		return nil
	}
	for {
		ks, err := s.memberKey()
		if err != nil {
			return err
		}
		match := string(memberName(s.data[ks:s.pos])) == name
		if err := s.memberColon(); err != nil {
			return err
		}
		vs := s.pos
		if err := s.value(depth + 1); err != nil {
			return err
		}
		if match && *ok {
			*ok = intValue(s.data[vs:s.pos], dst)
		}
		if more, err := s.memberNext(); !more {
			return err
		}
	}
}

// ChunkUsage is what CheckChunk learns of a stream chunk's usage.
type ChunkUsage struct {
	Usage    Usage
	HasUsage bool      // the last "usage" member is a usage object ParseUsage accepts
	Slot     UsageSlot // where SetUsageCostAt puts the cost
	// At and End bound the last "usage" member's value, whatever its
	// kind (so that one the client did not ask for can be cut); End is 0
	// when the chunk has none.
	At, End int
}

// CheckChunk is CheckUsage for one event of a stream: the last
// top-level "usage" member is the one read (each event is decoded on
// its own, and a decoder keeps the last), and each other top-level
// member is passed to each, by its unescaped name (for comparing with
// known names: invalid UTF-8 in it is left as it came), in the same
// walk. On error the ChunkUsage is zero.
func CheckChunk(data []byte, each func(name, value []byte)) (ChunkUsage, error) {
	w := usageWalk{s: scanner{data: data}, last: true}
	if err := w.answer(each); err != nil {
		return ChunkUsage{}, err
	}
	return ChunkUsage{Usage: w.u, HasUsage: w.ok, Slot: w.slot, At: w.at, End: w.end}, nil
}

// memberName returns a scanned key's name for comparing with a known
// one, without building a string: the bytes between its quotes, or, for
// the rare key with escapes, the unescaped name. (A key with invalid
// UTF-8 matches no known name either way.)
func memberName(q []byte) []byte {
	inner := q[1 : len(q)-1]
	if bytes.IndexByte(inner, '\\') < 0 {
		return inner
	}
	k, _ := unquoteJSON(q)
	return []byte(k)
}
