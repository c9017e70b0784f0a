package stream

import (
	"bytes"

	"gatehouse/internal/llm"
)

// appendText appends to dst the text an OpenAI chunk carries (each
// choice's delta content, refusal and reasoning, and its tool calls'
// names and arguments) as the raw JSON strings, one a line. A JSON string
// holds no raw line break, so the lines need no escaping of their own. It
// walks the chunk without decoding it (it runs for every chunk) and skips
// what is not where an OpenAI chunk has it.
func appendText(dst, chunk []byte) []byte {
	return appendChoicesText(dst, choicesOf(chunk))
}

// appendChoicesText is appendText for what choicesOf returned of the
// chunk: the relay searches for the choices once, for the size it counts
// and for the text, not once for each (the search finds them without
// walking the id, model and fingerprint before them).
func appendChoicesText(dst, v []byte) []byte {
	if !bytes.HasPrefix(v, []byte(choicesKey)) {
		return dst
	}
	v = v[len(choicesKey):]
	if text, ok := onlyContent(v); ok {
		// onlyContent found text's closing quote with StringEnd: it is a
		// whole JSON string, which appendString would check again.
		return appendLine(dst, text)
	}
	choices := llm.Walk(v, '[')
	for _, c, ok := choices.Next(); ok; _, c, ok = choices.Next() {
		if d := member(c, `"delta"`); d != nil {
			dst = appendDeltaText(dst, d)
		}
	}
	return dst
}

// sampleStart is the first capacity of a sample taken from text chunks:
// a few hundred bytes of text, the size of a short answer.
const sampleStart = 512

// contentOnly is how nearly every chunk of a reply in text opens its one
// choice: a delta with content and nothing else.
const contentOnly = `[{"index":0,"delta":{"content":"`

// onlyContent returns the content string of choices that are one choice
// whose delta is only content, as servers write them (no spaces);
// ok is false for any other shape, which the walk then reads.
func onlyContent(choices []byte) (text []byte, ok bool) {
	if !bytes.HasPrefix(choices, []byte(contentOnly)) {
		return nil, false
	}
	start := len(contentOnly) - 1 // the opening quote
	end := llm.StringEnd(choices, start)
	if end >= len(choices) || choices[end] != '}' {
		return nil, false
	}
	// No other choice may follow: none does when "delta" appears
	// nowhere after (where it does, in a string or not, the walk reads
	// the chunk instead).
	if bytes.Contains(choices[end+1:], []byte(`"delta"`)) {
		return nil, false
	}
	return choices[start:end], true
}

func appendDeltaText(dst, delta []byte) []byte {
	w := llm.Walk(delta, '{')
	for k, v, ok := w.Next(); ok; k, v, ok = w.Next() {
		switch string(k) {
		case `"content"`, `"refusal"`, `"reasoning_content"`:
			dst = appendString(dst, v)
		case `"tool_calls"`:
			calls := llm.Walk(v, '[')
			for _, call, ok := calls.Next(); ok; _, call, ok = calls.Next() {
				fn := llm.Walk(member(call, `"function"`), '{')
				for k, s, ok := fn.Next(); ok; k, s, ok = fn.Next() {
					if string(k) == `"name"` || string(k) == `"arguments"` {
						dst = appendString(dst, s)
					}
				}
			}
		}
	}
	return dst
}

// member returns the raw value of key in the object obj, nil if absent.
func member(obj []byte, key string) []byte {
	w := llm.Walk(obj, '{')
	for k, v, ok := w.Next(); ok; k, v, ok = w.Next() {
		if string(k) == key {
			return v
		}
	}
	return nil
}

// appendString appends v and a line break when v is a non-empty JSON
// string (not null, a number, "", a string cut short, or one holding a
// raw line break, which JSON does not allow).
func appendString(dst, v []byte) []byte {
	if len(v) <= 2 || v[0] != '"' || llm.StringEnd(v, 0) != len(v) || v[len(v)-1] != '"' {
		return dst
	}
	escapes := 0
	for p := len(v) - 2; p > 0 && v[p] == '\\'; p-- {
		escapes++
	}
	if escapes%2 == 1 { // the last quote is escaped: the string was cut
		return dst
	}
	return appendLine(dst, v)
}

// appendLine appends v, a whole JSON string, and a line break, unless v
// is "" or holds a raw line break (not JSON, and it would split the line).
func appendLine(dst, v []byte) []byte {
	if len(v) <= 2 || bytes.IndexByte(v, '\n') >= 0 {
		return dst
	}
	if dst == nil {
		// The sample's first text: room for a few chunks' at once,
		// instead of growing through every small size.
		dst = make([]byte, 0, sampleStart)
	}
	return append(append(dst, v...), '\n')
}

// SampleText is the text a Result.Sample holds, decoded. A line that is
// not a JSON string (it cannot come from appendText) is left out.
func SampleText(sample []byte) string {
	var b []byte
	for line := range bytes.SplitSeq(sample, []byte{'\n'}) {
		if len(line) == 0 {
			continue
		}
		s, err := llm.UnquoteString(line)
		if err != nil {
			continue
		}
		b = append(b, s...)
	}
	return string(b)
}
