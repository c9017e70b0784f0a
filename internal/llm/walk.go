package llm

import "bytes"

// Walker iterates the elements of a raw JSON array or the members of an
// object, for input the scanner (EachField, ParseChatRequest) has already
// validated: it does not validate again, and it takes no callbacks, since
// a closure handed to a scanner escapes to the heap and this runs on the
// request path (the token estimate walks every message). On anything that
// is not JSON it still terminates.
type Walker struct {
	b   []byte
	i   int
	obj bool
}

// Walk starts iterating v when it opens with open ('[' or '{'); any other
// value iterates nothing.
func Walk(v []byte, open byte) Walker {
	i := skipSpaceAt(v, 0)
	if i >= len(v) || v[i] != open {
		return Walker{}
	}
	return Walker{b: v, i: i + 1, obj: open == '{'}
}

// Next returns the next member's raw key (quoted; nil in arrays) and raw
// value.
func (w *Walker) Next() (key, val []byte, ok bool) {
	b := w.b
	i := skipSpaceAt(b, w.i)
	if i < len(b) && b[i] == ',' {
		i = skipSpaceAt(b, i+1)
	}
	if i >= len(b) || b[i] == ']' || b[i] == '}' {
		w.b = nil
		return nil, nil, false
	}
	if w.obj {
		e := valueEnd(b, i)
		key = b[i:e]
		i = skipSpaceAt(b, e)
		if i < len(b) && b[i] == ':' {
			i = skipSpaceAt(b, i+1)
		}
	}
	e := valueEnd(b, i)
	if e <= i { // no progress: not JSON
		w.b = nil
		return nil, nil, false
	}
	w.i = e
	return key, b[i:e], true
}

func skipSpaceAt(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\n' || b[i] == '\t' || b[i] == '\r') {
		i++
	}
	return i
}

// ValueEnd is the end of the JSON value starting at b[i], for input the
// scanner has validated (see Walker); on anything else it is still at
// most len(b). For a walk that reads some values itself (the token
// estimate reads a message's content once, finding its end as it goes).
func ValueEnd(b []byte, i int) int { return valueEnd(b, i) }

// valueEnd is the end of the value starting at b[i].
func valueEnd(b []byte, i int) int {
	if i >= len(b) {
		return len(b)
	}
	switch b[i] {
	case '"':
		return StringEnd(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				j = StringEnd(b, j) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return j + 1
				}
			}
		}
		return len(b)
	}
	j := i
	for j < len(b) && b[j] != ',' && b[j] != '}' && b[j] != ']' && b[j] != ' ' && b[j] != '\n' && b[j] != '\t' && b[j] != '\r' && b[j] != ':' {
		j++
	}
	return j
}

// StringEnd is the index after the JSON string starting at b[i] (its
// opening quote): after the next quote not escaped (preceded by an even
// number of backslashes), or len(b) for a string cut short. It finds
// quotes with IndexByte, since prompts are long strings and the request
// path runs this on every one of them.
func StringEnd(b []byte, i int) int {
	j := i + 1
	for {
		k := bytes.IndexByte(b[j:], '"')
		if k < 0 {
			return len(b)
		}
		j += k
		escapes := 0
		for p := j - 1; p > i && b[p] == '\\'; p-- {
			escapes++
		}
		if escapes%2 == 0 {
			return j + 1
		}
		j++
	}
}
