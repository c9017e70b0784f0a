package tokens

// The estimator below is what the request path uses to size a
// reservation: Counter is exact for o200k but costs tens of
// microseconds and hundreds of allocations for a short prompt, more than
// the whole gateway may add to a request. The estimate only decides how
// much is held while the call runs; settlement uses the usage the
// upstream reports, so an estimate that is off moves no money, it only
// makes a limit refuse a little early or late while the call is in
// flight. Counter stays for count_tokens, where clients want the count.
//
// It mimics o200k's pre-tokenizer in one pass over the text, with no
// allocation: letter runs (with the space or punctuation mark before
// them, and split at a lower-to-upper case change), digit groups of up
// to three, punctuation runs, and whitespace runs are pieces; a piece is
// one token unless it is long (long words and punctuation runs are
// several) or in a script whose letters the vocabulary covers more
// sparsely (CJK about one token a character, Cyrillic about one per
// three letters). TestEstimateAgainstCounter holds it to EstimateBound
// of Counter on a mixed corpus.
//
// feed below is the estimator's one statement; ASCII text runs through
// an automaton built from it (scan.go), and the tests hold the result
// equal to feeding every character, and to the estimator as it was
// before the automaton (reference_test.go).

import (
	"unicode"
	"unicode/utf8"

	"gatehouse/internal/llm"
)

// EstimateBound is the relative error TestEstimateAgainstCounter allows
// the estimate, against Counter, on each sample of its corpus of at least
// 120 tokens (English prose, source code, indented JSON, CSV numbers,
// Markdown with emoji, Russian, Chinese, Japanese, Arabic); the samples
// measure within 10%. Short texts are within a few tokens. For models of
// other families Counter is itself an estimate (see the package doc).
const EstimateBound = 0.15

// character classes of the pre-tokenizer
const (
	clsNone uint8 = iota
	clsLower
	clsUpper // upper-case, title-case and other letters that start a piece
	clsDigit
	clsSpace
	clsNewline
	clsPunct
)

// asciiClass classifies every ASCII byte.
var asciiClass = func() (t [128]uint8) {
	for c := range 128 {
		switch {
		case c >= 'a' && c <= 'z':
			t[c] = clsLower
		case c >= 'A' && c <= 'Z':
			t[c] = clsUpper
		case c >= '0' && c <= '9':
			t[c] = clsDigit
		case c == '\n' || c == '\r':
			t[c] = clsNewline
		case c == ' ' || c == '\t' || c == '\v' || c == '\f':
			t[c] = clsSpace
		default:
			t[c] = clsPunct
		}
	}
	return t
}()

// Weights are in thousandths of a token.
const (
	milli = 1000
	// wordFree is the letters a word piece holds in its first token;
	// each further token covers wordPerToken letters. Common English
	// words are single tokens; long and rare ones split into 3–5 letter
	// pieces.
	wordFree     = 8
	wordPerToken = 4
	// punctPerToken is the ASCII punctuation one token covers in a run
	// ("});", "\":\"" are single tokens).
	punctPerToken = 2
	// digitsPerToken is the digits of a group (o200k splits numbers
	// into groups of up to three).
	digitsPerToken = 3
	// punctPrefix is what a punctuation mark costs when it starts a word
	// piece ("(ctx", ".Lock", "\"name"): often merged, often not.
	punctPrefix = 500
)

// est is the state of one estimate: finished pieces in n (milli-tokens)
// and the piece being read.
type est struct {
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
func (e *est) feed(c uint8, w int) {
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

func (e *est) addLetter(c uint8, w int) {
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
func (e *est) prefix() {
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
func (e *est) close() {
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
		e.n += (e.run+digitsPerToken-1)/digitsPerToken*milli + e.wide
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

func (e *est) reset() {
	e.cls, e.run, e.wide, e.lower, e.spaces, e.nl = clsNone, 0, 0, false, 0, false
}

// tokens ends the text and returns its estimate.
func (e *est) tokens() int {
	e.close()
	return wholeTokens(e.n)
}

// wholeTokens rounds milli-tokens to the nearest whole token.
func wholeTokens(n int) int { return (n + milli/2) / milli }

// runeClass classifies a non-ASCII character and weighs it: the share
// of a token one such character costs in o200k, by script.
func runeClass(r rune) (uint8, int) {
	switch {
	case unicode.Is(unicode.Han, r):
		return clsLower, 900
	case unicode.In(r, unicode.Hiragana, unicode.Katakana):
		return clsLower, 700
	case unicode.Is(unicode.Hangul, r):
		return clsLower, 750
	case unicode.Is(unicode.Cyrillic, r):
		return letterCase(r), 330
	case unicode.Is(unicode.Greek, r):
		return letterCase(r), 450
	case unicode.In(r, unicode.Arabic, unicode.Hebrew):
		return clsLower, 400
	case unicode.In(r, unicode.Devanagari, unicode.Bengali, unicode.Tamil, unicode.Thai):
		return clsLower, 450
	case unicode.IsLetter(r) || unicode.Is(unicode.Mn, r):
		if r < 0x250 { // Latin-1 and Latin Extended: accented letters of Latin words
			return letterCase(r), 250
		}
		return clsLower, 600
	case unicode.IsDigit(r) || unicode.IsNumber(r):
		return clsDigit, milli
	case r == 0x85 || r == 0x2028 || r == 0x2029:
		return clsNewline, 0
	case unicode.IsSpace(r):
		return clsSpace, 0
	}
	// Symbols and emoji: their UTF-8 bytes mostly take a token or two.
	if r >= 0x10000 {
		return clsPunct, 1500
	}
	return clsPunct, milli
}

func letterCase(r rune) uint8 {
	if unicode.IsUpper(r) || unicode.IsTitle(r) {
		return clsUpper
	}
	return clsLower
}

// text feeds s: its ASCII stretches through the automaton (scan.go),
// other characters through feed.
func (e *est) text(s string) {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if row, v, ok := e.enter(); ok {
				j, row, h := textASCII(s, i, row, false)
				e.leave(row, v+h*halfToken)
				i = j
				continue
			}
			e.feed(asciiClass[c], 0)
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		cls, w := runeClass(r)
		e.feed(cls, w)
	}
}

// jsonString feeds the text of a raw JSON string (quotes included).
// raw has been validated by the scanner.
func (e *est) jsonString(raw []byte) {
	if len(raw) < 2 {
		return
	}
	e.jsonBody(raw[1:len(raw)-1], false)
}

// jsonStringRest feeds the rest of the JSON string whose body goes on
// at b[i] and returns the index after the string: the estimate finds
// the string's end as it reads it, so the walk of a request need not
// look for it first. b has been validated by the scanner; a string cut
// short ends at len(b).
func (e *est) jsonStringRest(b []byte, i int) int {
	j := i + e.jsonBody(b[i:], true)
	if j < len(b) {
		j++ // the closing quote
	}
	return j
}

// jsonBody feeds the body of a JSON string, decoding escapes as it goes:
// ASCII and the escapes of one ASCII character through the automaton,
// the rest through feed. It stops at the end of s or, when closing is
// set, at the closing quote (one not escaped), and returns where.
func (e *est) jsonBody(s []byte, closing bool) int {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if row, v, ok := e.enter(); ok {
				j, row, h := jsonASCII(s, i, row, closing)
				e.leave(row, v+h*halfToken)
				if closing && j < len(s) && s[j] == '"' {
					return j
				}
				if j > i {
					i = j
					continue
				}
			}
			if c == '"' && closing {
				return i
			}
		}
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
			e.feed(asciiClass[c], 0)
			i++
			continue
		}
		r, size := utf8.DecodeRune(s[i:])
		i += size
		cls, w := runeClass(r)
		e.feed(cls, w)
	}
	return len(s)
}

func hex4(b []byte) rune {
	var r rune
	for _, c := range b {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c - 'a' + 10)
		case c >= 'A' && c <= 'F':
			r |= rune(c - 'A' + 10)
		}
	}
	return r
}

// EstimateText approximates Counter.Count(s).
func EstimateText(s string) int {
	var e est
	e.text(s)
	return e.tokens()
}

// stringTokens estimates a raw JSON string value.
func stringTokens(raw []byte) int {
	if len(raw) < 2 || raw[0] != '"' {
		return 0
	}
	var e est
	e.jsonString(raw)
	return e.tokens()
}

// rawTokens estimates any raw JSON value as the text of its strings and
// numbers, plus a token per two structural characters.
func rawTokens(raw []byte) int {
	var e est
	for i := 0; i < len(raw); {
		c := raw[i]
		switch {
		case c == '"':
			j := llm.StringEnd(raw, i)
			e.feed(clsPunct, 0)
			e.jsonString(raw[i:j])
			e.feed(clsPunct, 0)
			i = j
		case c >= utf8.RuneSelf:
			i++
		default:
			if row, v, ok := e.enter(); ok {
				j, row, h := textASCII(raw, i, row, true)
				e.leave(row, v+h*halfToken)
				i = j
				continue
			}
			e.feed(asciiClass[c], 0)
			i++
		}
	}
	return e.tokens()
}

// EstimateChat approximates Counter.Chat from the raw "messages" and
// "tools" arrays of an OpenAI chat request (tools may be nil), without
// decoding them: the same allowances per message, tool call, tool and
// image, and an estimate of every text in between. The arrays come from
// a body the scanner validated; on anything else it still terminates.
func EstimateChat(messages, tools []byte) int {
	n := ReplyPriming
	for i := openArray(messages); i < len(messages) && messages[i] != ']' && messages[i] != '}'; i = nextItem(messages, i) {
		var t int
		t, i = messageTokens(messages, i)
		n += MessageOverhead + t
	}
	if len(tools) == 0 { // most requests: not even a call of openArray
		return n
	}
	for i := openArray(tools); i < len(tools) && tools[i] != ']' && tools[i] != '}'; i = nextItem(tools, i) {
		var t int
		t, i = callTokens(tools, i, `"name"`, `"description"`, true)
		n += ToolOverhead + t
	}
	return n
}

// The walk of a request is EstimateChat's own, rather than llm.Walker's,
// which finds each value's end before handing it over: here a string is
// read once, by the estimate, which finds its end as it goes, and an
// object's end is where its members end, not found by a scan of its own
// (with llm.Walker a tool's schema was read five times). The arrays come
// from a body the scanner validated; on anything else the walk still
// moves on at every step and ends.

// openArray returns the index of the first element of the array b holds,
// or len(b) when b is not an array.
func openArray(b []byte) int {
	if i := skipSpace(b, 0); i < len(b) && b[i] == '[' {
		return nextItem(b, i+1)
	}
	return len(b)
}

// object walks the members of an object: next returns a member's key and
// where its value starts, and the caller reads the value and sets i to
// its end (value does both for a value read whole). After the last
// member, i is the index after the object.
type object struct {
	b []byte
	i int
}

// openObject starts walking the object that opens at b[i], or returns
// false (and the end of whatever value is there) if none does.
func openObject(b []byte, i int) (object, int, bool) {
	if b[i] != '{' {
		return object{}, max(llm.ValueEnd(b, i), i+1), false
	}
	return object{b: b, i: i + 1}, 0, true
}

func (o *object) next() (key []byte, at int, ok bool) {
	b := o.b
	i := o.i
	if i < len(b) && (b[i] <= ' ' || b[i] == ',') { // compact JSON skips the call
		i = skipItem(b, i)
	}
	if i >= len(b) || b[i] == '}' || b[i] == ']' {
		o.i = min(i+1, len(b))
		return nil, 0, false
	}
	k := i + 1
	if b[i] == '"' {
		k = nameEnd(b, i)
	} else { // not a member name: the body was not an object's
		k = max(llm.ValueEnd(b, i), k)
	}
	key = b[i:k]
	if i = skipSpace(b, k); i < len(b) && b[i] == ':' {
		i = skipSpace(b, i+1)
	}
	if i >= len(b) {
		o.i = len(b)
		return nil, 0, false
	}
	return key, i, true
}

// value returns the value that starts at b[at] and moves past it.
func (o *object) value(at int) []byte {
	v := o.b[at:max(llm.ValueEnd(o.b, at), at+1)]
	o.i = at + len(v)
	return v
}

// stringAt estimates the string value that starts at b[at] and moves
// past it. The automaton reads it from its first state (an est with
// nothing read is state 0, worth nothing); nearly every string the walk
// estimates is read by it to the closing quote (ASCII and escapes of one
// ASCII character), and its estimate is then the automaton's value
// rounded, with no est to enter, leave and close. A string that holds
// anything else goes on through an est from where the automaton stopped.
// The scan stops at every quote and backslash, so a quote it stops at
// closes the string; only a string with an escape or a non-ASCII
// character needs jsonASCII, which decodes escapes around the scans.
func (o *object) stringAt(at int) int {
	i, row, h := scanASCII(o.b, at+1, 0)
	if i < len(o.b) && o.b[i] != '"' {
		var more int
		i, row, more = jsonASCII(o.b, i, row, true)
		h += more
	}
	if i < len(o.b) && o.b[i] == '"' {
		o.i = i + 1
		return wholeTokens(h * halfToken)
	}
	var e est
	e.leave(row, h*halfToken)
	o.i = e.jsonStringRest(o.b, i)
	return e.tokens()
}

// messageTokens estimates the message that opens at b[i] and returns the
// index after it.
func messageTokens(b []byte, i int) (n, end int) {
	o, end, ok := openObject(b, i)
	if !ok {
		return 0, end
	}
	n = o.roleAndContent()
	if o.i < len(b) && b[o.i] == '}' { // most messages: role and content were all
		return n, o.i + 1
	}
	// The switch converts key for its compares only, with no string made
	// of it: a string kept in a variable for a switch of compares was
	// copied out of the body twice a message.
	for key, at, ok := o.next(); ok; key, at, ok = o.next() {
		str := b[at] == '"'
		switch string(key) {
		case `"role"`:
			n += o.role(at, str)
		case `"content"`:
			if str {
				n += o.stringAt(at)
			} else {
				n += contentTokens(o.value(at))
			}
		case `"name"`, `"reasoning_content"`, `"refusal"`:
			if str {
				n += o.stringAt(at)
			} else {
				o.value(at)
			}
		case `"tool_calls"`:
			v := o.value(at)
			for j := openArray(v); j < len(v) && v[j] != ']' && v[j] != '}'; j = nextItem(v, j) {
				var t int
				t, j = callTokens(v, j, `"name"`, `"arguments"`, false)
				n += MessageOverhead + t
			}
		default:
			o.value(at)
		}
	}
	return n, o.i
}

// roleAndContent estimates a message's first members when they are a
// role the APIs define and a string content, written as the SDKs write
// them ({"role":"user","content":"...), and moves past them; otherwise
// what it could not read this way is left to the walk of members. Nearly
// every message starts so, and two compares of known bytes take the
// place of finding two member names and comparing each with the names a
// message has.
func (o *object) roleAndContent() (n int) {
	b, i := o.b, o.i
	if !hasPrefix(b[i:], `"role":"`) {
		return 0
	}
	n, i, ok := roleTokens(b, i+len(`"role":`))
	if !ok {
		return 0
	}
	o.i = i
	// `,"content":"` in two compares of eight and four bytes: one of all
	// twelve calls memequal.
	if hasPrefix(b[i:], `,"conten`) && hasPrefix(b[i+8:], `t":"`) {
		n += o.stringAt(i + len(`,"content":`))
	}
	return n
}

// role estimates a message's role, whose value starts at b[at] (a
// string when str), and moves past it; a role that is no string counts
// nothing, as any other member's value that is not text.
func (o *object) role(at int, str bool) int {
	if !str {
		o.value(at)
		return 0
	}
	if t, end, ok := roleTokens(o.b, at); ok {
		o.i = end
		return t
	}
	return o.stringAt(at)
}

// roleTokens is the estimate of the role whose string opens at b[at],
// and the index after it, when the role is one the APIs define, spelled
// without escapes; ok is false for any other. Every message has a role,
// nearly always one of these, and the estimate of each is fixed: a
// compare or two, where estimating the string afresh costs a couple of
// hundred instructions (TestRoleTokens checks each number against the
// estimate itself).
func roleTokens(b []byte, at int) (n, end int, ok bool) {
	s := b[at:]
	switch {
	case hasPrefix(s, `"user"`):
		return 1, at + len(`"user"`), true
	case hasPrefix(s, `"assistant"`):
		return 2, at + len(`"assistant"`), true
	case hasPrefix(s, `"system"`):
		return 1, at + len(`"system"`), true
	case hasPrefix(s, `"tool"`):
		return 1, at + len(`"tool"`), true
	case hasPrefix(s, `"developer"`):
		return 2, at + len(`"developer"`), true
	}
	return 0, at, false
}

func hasPrefix(b []byte, p string) bool { return len(b) >= len(p) && string(b[:len(p)]) == p }

// callTokens estimates a tool call or a tool, the object that opens at
// b[i], by its first "function" member: the string members a and c of
// that, and when params is set its first "parameters" as raw JSON. It
// returns the index after the object.
func callTokens(b []byte, i int, a, c string, params bool) (n, end int) {
	o, end, ok := openObject(b, i)
	if !ok {
		return 0, end
	}
	seen := false
	for key, at, ok := o.next(); ok; key, at, ok = o.next() {
		if seen || string(key) != `"function"` || b[at] != '{' {
			seen = seen || string(key) == `"function"`
			o.value(at)
			continue
		}
		seen = true
		fn := object{b: b, i: at + 1}
		for k, fat, ok := fn.next(); ok; k, fat, ok = fn.next() {
			switch {
			case (string(k) == a || string(k) == c) && b[fat] == '"':
				n += fn.stringAt(fat)
			case params && string(k) == `"parameters"`:
				params = false // the first one only
				n += rawTokens(fn.value(fat))
			default:
				fn.value(fat)
			}
		}
		o.i = fn.i
	}
	return n, o.i
}

// nextItem skips the whitespace and the comma before an array's element
// or an object's member. Where there is nothing to skip (in compact
// JSON, at an array's first element and at its end) the byte there is a
// bracket, a brace or another byte above the comma, and a test for that
// is small enough to be inlined: only the bytes up to the comma
// (whitespace, the comma, a string's quote) call skipItem.
func nextItem(b []byte, i int) int {
	if i < len(b) && b[i] > ',' {
		return i
	}
	return skipItem(b, i)
}

// skipItem is nextItem's loop.
func skipItem(b []byte, i int) int {
	i = skipSpace(b, i)
	if i < len(b) && b[i] == ',' {
		i = skipSpace(b, i+1)
	}
	return i
}

// skipSpace skips JSON whitespace. All four of its bytes are ≤ ' ': the
// first compare tells apart the byte that is none (nearly every one, in
// the compact JSON the SDKs send).
func skipSpace(b []byte, i int) int {
	for i < len(b) && b[i] <= ' ' && (b[i] == ' ' || b[i] == '\n' || b[i] == '\t' || b[i] == '\r') {
		i++
	}
	return i
}

// nameEnd is the index after the member name (a JSON string) that opens
// at b[i], or len(b) for one cut short. Names are a few bytes without
// escapes: a loop over them costs less than llm.ValueEnd's, which looks
// for the closing quote with IndexByte (a call and its setup) and then
// back for the backslashes before it.
func nameEnd(b []byte, i int) int {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '"':
			return j + 1
		case '\\':
			j++ // the escaped byte, which may be a quote
		}
	}
	return len(b)
}

// member returns the raw value of key (quoted) in obj, or nil.
func member(obj []byte, key string) []byte {
	fs := llm.Walk(obj, '{')
	for k, v, ok := fs.Next(); ok; k, v, ok = fs.Next() {
		if string(k) == key {
			return v
		}
	}
	return nil
}

// contentTokens estimates a message's content: a string, or an array of
// parts (text, images at their allowance, anything else by its JSON).
func contentTokens(v []byte) int {
	if len(v) > 0 && v[0] == '"' {
		return stringTokens(v)
	}
	n := 0
	parts := llm.Walk(v, '[')
	for _, part, ok := parts.Next(); ok; _, part, ok = parts.Next() {
		typ, text := member(part, `"type"`), member(part, `"text"`)
		switch {
		case string(typ) == `"image_url"` || string(typ) == `"input_image"`:
			n += ImageTokens
		case len(text) > 0 && text[0] == '"':
			n += stringTokens(text)
		default:
			n += rawTokens(part)
		}
	}
	return n
}

// EstimateInput approximates the tokens of an embeddings request's
// "input": a string, an array of strings, or arrays of token IDs (which
// count one each).
func EstimateInput(input []byte) int {
	if len(input) > 0 && input[0] == '"' {
		return stringTokens(input)
	}
	n := 0
	items := llm.Walk(input, '[')
	for _, v, ok := items.Next(); ok; _, v, ok = items.Next() {
		switch {
		case len(v) == 0:
		case v[0] == '"':
			n += stringTokens(v)
		case v[0] == '[':
			ids := llm.Walk(v, '[')
			for _, _, ok := ids.Next(); ok; _, _, ok = ids.Next() {
				n++
			}
		default:
			n++
		}
	}
	return n
}
