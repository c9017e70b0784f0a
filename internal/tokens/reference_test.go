package tokens

// The estimator as it was before its ASCII automaton (scan.go), kept
// unchanged as the reference the new code must equal exactly: the
// request path's reservations are not to move with a speed-up. Only the
// names differ (ref…); runeClass, hex4, member and the weights are shared,
// being unchanged.

import (
	"unicode/utf8"

	"gatehouse/internal/llm"
)

// refEst is the state of one estimate: finished pieces in n (milli-tokens)
// and the piece being read.
type refEst struct {
	n      int   // milli-tokens of finished pieces
	cls    uint8 // class of the open piece: clsNone, clsLower (a word), clsDigit, clsSpace, clsPunct
	run    int   // ASCII letters, digits or punctuation in the open piece
	wide   int   // milli-tokens of the open piece's other characters
	lower  bool  // the word's last letter was lower-case: an upper-case one starts a new piece
	spaces int   // whitespace since the last newline, in an open whitespace piece
	nl     bool  // the open whitespace piece holds a newline
}

// feed adds one character of class c; w is its weight when it is not
// ASCII (0 for ASCII).
func (e *refEst) feed(c uint8, w int) {
	switch c {
	case clsLower, clsUpper:
		if e.cls == clsLower {
			if !(e.lower && c == clsUpper) {
				e.addLetter(c, w)
				return
			}
			e.close()
		} else {
			if e.cls == clsPunct {
				e.n += punctPrefix
			}
			e.prefix()
		}
		e.cls = clsLower
		e.addLetter(c, w)
	case clsDigit:
		if e.cls != clsDigit {
			e.close()
			e.cls = clsDigit
		}
		if w > 0 {
			e.wide += w
		} else {
			e.run++
		}
	case clsSpace, clsNewline:
		if e.cls == clsPunct && c == clsNewline {
			return // a punctuation piece takes the newlines after it
		}
		if e.cls != clsSpace {
			e.close()
			e.cls = clsSpace
		}
		if c == clsNewline {
			e.nl, e.spaces = true, 0
		} else {
			e.spaces++
		}
	case clsPunct:
		if e.cls != clsPunct {
			if e.cls == clsSpace {
				e.prefix()
			} else {
				e.close()
			}
			e.cls = clsPunct
		}
		if w > 0 {
			e.wide += w
		} else {
			e.run++
		}
	}
}

// spaceWord starts the commonest piece of prose, a space and an ASCII
// letter (" the", " The"), as feeding the two would: the open piece
// closes, the space joins the word as its prefix and costs nothing. It
// returns 1, the letter taken; the caller takes the lower-case run after.
func (e *refEst) spaceWord(letter byte) int {
	e.close()
	e.cls = clsLower
	e.run = 1
	e.lower = letter >= 'a'
	return 1
}

func refAsciiLetter(c byte) bool { return c-'a' < 26 || c-'A' < 26 }

// refLowerRun takes the lower-case ASCII letters that start s into the open
// word, as feeding them one by one would, and returns how many it took.
// While the open word is plain ASCII and what follows is more " word"
// pieces of lower-case letters (most of English prose), it closes each
// word and opens the next in the same tight loop, with the arithmetic of
// close inlined: that loop is most of what the estimate costs a request.
func refLowerRun[T string | []byte](e *refEst, s T) int {
	n := 0
	for n < len(s) && s[n]-'a' < 26 {
		n++
	}
	if n > 0 {
		e.run += n
		e.lower = true
	}
	if e.wide != 0 {
		return n
	}
	if n+1 >= len(s) || s[n] != ' ' || s[n+1]-'a' >= 26 {
		return n
	}
	done, run := e.n, e.run
	for n+1 < len(s) && s[n] == ' ' && s[n+1]-'a' < 26 {
		done += refWordTokens(run)
		start := n + 1
		n = start + 1
		for n < len(s) && s[n]-'a' < 26 {
			n++
		}
		run = n - start
	}
	e.n, e.run, e.lower = done, run, true
	return n
}

// refWordTokens is what close adds for a word of run ASCII letters.
func refWordTokens(run int) int {
	t := milli
	if run > wordFree {
		t += (run - wordFree + wordPerToken - 1) / wordPerToken * milli
	}
	return t
}

func (e *refEst) addLetter(c uint8, w int) {
	if w > 0 {
		e.wide += w
	} else {
		e.run++
	}
	e.lower = c == clsLower
}

// prefix ends the open piece before a word or punctuation piece that
// takes its last character (a space, or for a word a punctuation mark)
// as its own first one.
func (e *refEst) prefix() {
	switch e.cls {
	case clsSpace:
		if e.nl {
			e.n += milli
		}
		if e.spaces > 1 || (e.spaces == 0 && !e.nl) {
			e.n += milli
		}
		e.reset()
	case clsPunct:
		if e.run > 0 {
			e.run--
		} else {
			e.wide = max(e.wide-milli, 0)
		}
		if e.run > 0 || e.wide > 0 {
			e.close()
		} else {
			e.reset()
		}
	default:
		e.close()
	}
}

// close ends the open piece.
func (e *refEst) close() {
	switch e.cls {
	case clsLower:
		t := e.wide
		if e.run > 0 {
			t += milli
			if e.run > wordFree {
				t += (e.run - wordFree + wordPerToken - 1) / wordPerToken * milli
			}
		}
		e.n += max(t, milli)
	case clsDigit:
		e.n += (e.run+2)/3*milli + e.wide
	case clsSpace:
		if e.nl {
			e.n += milli
		}
		if e.spaces > 0 {
			e.n += milli
		}
	case clsPunct:
		e.n += (e.run+punctPerToken-1)/punctPerToken*milli + e.wide
	}
	e.reset()
}

func (e *refEst) reset() {
	e.cls, e.run, e.wide, e.lower, e.spaces, e.nl = clsNone, 0, 0, false, 0, false
}

// tokens ends the text and returns its estimate.
func (e *refEst) tokens() int {
	e.close()
	return (e.n + milli/2) / milli
}

// runeClass classifies a non-ASCII character and weighs it: the share

// refAsciiStep feeds the ASCII character s[i], with the runs the fast
// paths take after it, and returns the index after them.
func refAsciiStep[T string | []byte](e *refEst, s T, i int) int {
	c := s[i]
	if c == ' ' && e.cls != clsSpace && i+1 < len(s) && refAsciiLetter(s[i+1]) {
		i += 1 + e.spaceWord(s[i+1])
		return i + refLowerRun(e, s[i:])
	}
	e.feed(asciiClass[c], 0)
	i++
	if e.cls == clsLower {
		i += refLowerRun(e, s[i:])
	}
	return i
}

// text feeds s.
func (e *refEst) text(s string) {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			i = refAsciiStep(e, s, i)
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		cls, w := runeClass(r)
		e.feed(cls, w)
	}
}

// jsonString feeds the text of a raw JSON string (quotes included),
// decoding escapes as it goes. raw has been validated by the scanner.
func (e *refEst) jsonString(raw []byte) {
	if len(raw) < 2 {
		return
	}
	s := raw[1 : len(raw)-1]
	for i := 0; i < len(s); {
		c := s[i]
		if c == '\\' && i+1 < len(s) {
			i += 2
			switch s[i-1] {
			case 'n', 'r':
				e.feed(clsNewline, 0)
			case 't', 'b', 'f':
				e.feed(clsSpace, 0)
			case 'u':
				r := rune(0xFFFD)
				if i+4 <= len(s) {
					r = hex4(s[i : i+4])
					i += 4
				}
				if r < utf8.RuneSelf {
					e.feed(asciiClass[r], 0)
				} else if r >= 0xD800 && r < 0xDC00 { // a surrogate pair: one character outside the BMP
					if i+6 <= len(s) && s[i] == '\\' && s[i+1] == 'u' {
						i += 6
					}
					e.feed(clsPunct, 1500)
				} else {
					cls, w := runeClass(r)
					e.feed(cls, w)
				}
			default: // \" \\ \/, or an invalid escape of a byte that may not be ASCII
				if b := s[i-1]; b < utf8.RuneSelf {
					e.feed(asciiClass[b], 0)
				} else {
					e.feed(clsPunct, 0)
				}
			}
			continue
		}
		if c < utf8.RuneSelf {
			i = refAsciiStep(e, s, i)
			continue
		}
		r, size := utf8.DecodeRune(s[i:])
		i += size
		cls, w := runeClass(r)
		e.feed(cls, w)
	}
}

// refEstimateText approximates Counter.Count(s).
func refEstimateText(s string) int {
	var e refEst
	e.text(s)
	return e.tokens()
}

// refStringTokens estimates a raw JSON string value.
func refStringTokens(raw []byte) int {
	if len(raw) < 2 || raw[0] != '"' {
		return 0
	}
	var e refEst
	e.jsonString(raw)
	return e.tokens()
}

// refRawTokens estimates any raw JSON value as the text of its strings and
// numbers, plus a token per two structural characters.
func refRawTokens(raw []byte) int {
	var e refEst
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if c == '"' {
			j := llm.StringEnd(raw, i) - 1 // the closing quote, or the last byte of a string cut short
			e.feed(clsPunct, 0)
			e.jsonString(raw[i : j+1])
			e.feed(clsPunct, 0)
			i = j
			continue
		}
		if c < utf8.RuneSelf {
			e.feed(asciiClass[c], 0)
		}
	}
	return e.tokens()
}

// refEstimateChat approximates Counter.Chat from the raw "messages" and
// "tools" arrays of an OpenAI chat request (tools may be nil), without
// decoding them: the same allowances per message, tool call, tool and
// image, and an estimate of every text in between. The arrays come from
// a body the scanner validated; on anything else it still terminates.
func refEstimateChat(messages, tools []byte) int {
	n := ReplyPriming
	ms := llm.Walk(messages, '[')
	for _, m, ok := ms.Next(); ok; _, m, ok = ms.Next() {
		n += MessageOverhead
		fs := llm.Walk(m, '{')
		for k, v, ok := fs.Next(); ok; k, v, ok = fs.Next() {
			switch string(k) {
			case `"role"`, `"name"`, `"reasoning_content"`, `"refusal"`:
				n += refStringTokens(v)
			case `"content"`:
				n += refContentTokens(v)
			case `"tool_calls"`:
				calls := llm.Walk(v, '[')
				for _, tc, ok := calls.Next(); ok; _, tc, ok = calls.Next() {
					n += MessageOverhead + refFieldTokens(member(tc, `"function"`), `"name"`, `"arguments"`)
				}
			}
		}
	}
	ts := llm.Walk(tools, '[')
	for _, t, ok := ts.Next(); ok; _, t, ok = ts.Next() {
		fn := member(t, `"function"`)
		n += ToolOverhead + refFieldTokens(fn, `"name"`, `"description"`) + refRawTokens(member(fn, `"parameters"`))
	}
	return n
}

// refFieldTokens estimates the string members a and b of object obj.
func refFieldTokens(obj []byte, a, b string) int {
	n := 0
	fs := llm.Walk(obj, '{')
	for k, v, ok := fs.Next(); ok; k, v, ok = fs.Next() {
		if string(k) == a || string(k) == b {
			n += refStringTokens(v)
		}
	}
	return n
}

// refContentTokens estimates a message's content: a string, or an array of
// parts (text, images at their allowance, anything else by its JSON).
func refContentTokens(v []byte) int {
	if len(v) > 0 && v[0] == '"' {
		return refStringTokens(v)
	}
	n := 0
	parts := llm.Walk(v, '[')
	for _, part, ok := parts.Next(); ok; _, part, ok = parts.Next() {
		typ, text := member(part, `"type"`), member(part, `"text"`)
		switch {
		case string(typ) == `"image_url"` || string(typ) == `"input_image"`:
			n += ImageTokens
		case len(text) > 0 && text[0] == '"':
			n += refStringTokens(text)
		default:
			n += refRawTokens(part)
		}
	}
	return n
}

// EstimateInput approximates the tokens of an embeddings request's
// "input": a string, an array of strings, or arrays of token IDs (which
