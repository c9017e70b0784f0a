package tokens

// The ASCII part of the estimate runs as an automaton: one table look-up
// and one addition a byte, where feeding est character by character
// costs a call, a switch and a few stores, and the word-at-a-time fast
// paths that replaced it still branched at every piece. In prose a piece
// ends every five or six bytes, so the branching, not the bytes, was most
// of what the estimate cost a request.
//
// The table is not written by hand: it is est.feed run from every state
// the automaton tells apart, so feed stays the one statement of the
// estimator and the automaton agrees with it by construction (the
// reference and fuzz tests check it anyway). An open piece that holds
// non-ASCII characters (est.wide) has no state here; such text goes
// through feed as before, and the automaton takes over at the next piece.
//
// A state stands for every est whose future estimate is the same: a
// word's letters count until a first token is spent and then only modulo
// wordPerToken; digits modulo digitsPerToken; punctuation modulo
// punctPerToken; whitespace by whether it holds a newline and whether
// none, one, or more spaces follow it. The automaton keeps est's value —
// what the estimate would be if the text ended here, n plus what close
// would add — and each transition adds the change of that value, which
// is a multiple of half a token for ASCII characters.

import "unicode/utf8"

// halfToken is the unit of the automaton's additions, in milli-tokens.
// The value can fall (a space before a newline is no longer a piece of
// its own), by up to stepBias halves a byte; every entry holds its
// change plus stepBias for each byte it steps, and the scans take
// stepBias a byte back.
const (
	halfToken = milli / 2
	stepBias  = 2
)

// The automaton's states: none (nothing open), then words by letters read
// (1 to wordStates) and whether the last was lower-case, digit runs,
// whitespace pieces by (newline seen, spaces 0, 1 or more), punctuation
// runs.
const (
	wordStates = wordFree + wordPerToken
	stateWord  = 1
	stateDigit = stateWord + 2*wordStates
	stateSpace = stateDigit + digitsPerToken
	statePunct = stateSpace + 6
	stateCount = statePunct + punctPerToken
	stopRow    = stateCount << stateShift // where a byte the automaton does not read leads
	stateShift = 2 * codeBits             // a state is kept as its row in steps: state << 6 | pair code
	stepsSize  = 1 << 12
)

// A byte is stepped by its code, three bits: codeStop for a byte the
// automaton does not read (a backslash, a quote, a non-ASCII byte), its
// class (clsLower to clsPunct, 1 to 6) for any other, and codeNone for no
// byte at all. A pair's code is the first byte's code with the second's
// above it, so one entry of steps takes two bytes, and the code of one
// byte followed by codeNone takes one.
const (
	codeBits = 3
	codeStop = 0
	codeNone = 1<<codeBits - 1
)

// steps is the automaton: for state s and pair code p, at s<<6|p, the
// state's row after both bytes (s'<<6) in the low bits and the
// half-tokens the two add (plus stepBias for each) from bit halvesShift;
// a pair with a stop byte leads to stopRow, and every entry of stopRow's
// own row is stopRow with nothing added. One table of packed entries
// rather than a table of rows and one of halves: a step is then one
// load, and the mask that keeps the index in the table (its size is a
// power of two, so an index is masked, not bounds-checked) also drops
// the halves from the next index, so nothing is unpacked on the way. The
// scans add whole entries and shift the sum once every eight bytes; the
// rows' part of such a sum stays below 1<<halvesShift (4 × stopRow), so
// it never reaches the halves.
//
// pairCode is the code of every two bytes read as a little-endian
// uint16, and byteCode the code of one byte and codeNone. Stepping two
// bytes at a time halves the dependent chain of loads a scan goes
// through: per two bytes one 16-bit load, the code's load, or, mask, the
// step's load and an add, where a byte at a time took a load, or, mask,
// load and add for each (BenchmarkScan/prompt, the request path's
// 300-byte prompt: 2,328 instructions an estimate a byte at a time,
// 1,427 by pairs). The price is pairCode's 64 KiB, of which prose
// touches a few KiB (pairs of printable ASCII bytes, in some 200 cache
// lines at most); steps has 37 rows of 64 codes, 16 KiB with its
// padding to a power of two, where the table of single-byte steps it
// replaces had a row entry for each of 256 byte values, 64 KiB.
//
// stateEst is the est each state stands for (n is 0), and pendingOf what
// close would add to it.
type asciiAutomaton struct {
	steps     *[stepsSize]uint32
	pairCode  *[1 << 16]uint8 // read as a little-endian uint16
	byteCode  [1 << 8]uint8
	stateEst  [stateCount]est
	pendingOf [stateCount]int
}

// halvesShift is where an entry of steps keeps its half-tokens.
const halvesShift = 20

// automaton is built once, when the package is loaded, and only read
// after. steps and pairCode are reached through pointers, which a scan
// loads once and keeps in registers: the address of a table inside a
// global value is a constant the compiler computes again (a LEA) at
// every use in a loop, two instructions an eight-byte block.
var automaton = buildAutomaton()

// buildAutomaton runs feed from every state on every class of ASCII
// byte, and twice for a pair, so feed stays the only definition of the
// estimate.
func buildAutomaton() (a asciiAutomaton) {
	if 4*stopRow >= 1<<halvesShift || stopRow >= stepsSize {
		panic("tokens: the ASCII automaton's rows do not fit below its halves")
	}
	a.steps, a.pairCode = new([stepsSize]uint32), new([1 << 16]uint8)
	for s := range stateCount {
		a.stateEst[s] = estOfState(s)
		a.pendingOf[s] = pending(&a.stateEst[s])
	}
	for c := range 1 << 8 {
		a.byteCode[c] = codeOf(byte(c)) | codeNone<<codeBits
	}
	for p := range 1 << 16 {
		a.pairCode[p] = codeOf(byte(p)) | codeOf(byte(p>>8))<<codeBits
	}
	for s := range stateCount {
		for p := range 1 << stateShift {
			a.steps[s<<stateShift|p] = a.pairStep(s, uint8(p%(1<<codeBits)), uint8(p>>codeBits))
		}
	}
	for p := range 1 << stateShift {
		a.steps[stopRow|p] = stopRow
	}
	return a
}

// codeOf is the code of byte c.
func codeOf(c byte) uint8 {
	if c >= utf8.RuneSelf || c == '\\' || c == '"' {
		return codeStop
	}
	return asciiClass[c]
}

// pairStep is the entry of steps for state s and the bytes of codes
// first and second.
func (a *asciiAutomaton) pairStep(s int, first, second uint8) uint32 {
	if first == codeStop || first == codeNone || second == codeStop {
		return stopRow
	}
	next, h := a.classStep(s, first)
	if second != codeNone {
		var h2 int
		next, h2 = a.classStep(next, second)
		h += h2
	}
	return uint32(h)<<halvesShift | uint32(next<<stateShift)
}

// classStep feeds one ASCII character of class c from state s and
// returns the state reached and the half-tokens it adds, plus stepBias.
func (a *asciiAutomaton) classStep(s int, c uint8) (int, int) {
	e := a.stateEst[s]
	e.feed(c, 0)
	next, ok := e.state()
	d := e.n + pending(&e) - a.pendingOf[s]
	h := d/halfToken + stepBias
	if !ok || d%halfToken != 0 || h < 0 || h > 0xff {
		panic("tokens: the ASCII automaton cannot hold what feed does")
	}
	return next, h
}

// estOfState is the est state s stands for: the fewest letters, digits,
// punctuation marks or spaces that lead to it.
func estOfState(s int) est {
	switch {
	case s == 0:
		return est{}
	case s < stateDigit:
		k := s - stateWord
		return est{cls: clsLower, run: k/2 + 1, lower: k%2 == 1}
	case s < stateSpace:
		return est{cls: clsDigit, run: s - stateDigit + 1}
	case s < statePunct:
		k := s - stateSpace
		return est{cls: clsSpace, spaces: k % 3, nl: k >= 3}
	}
	return est{cls: clsPunct, run: s - statePunct + 1}
}

// state returns the automaton's state for e, or false when the open
// piece holds characters the automaton does not read (non-ASCII ones).
func (e *est) state() (int, bool) {
	if e.wide != 0 {
		return 0, false
	}
	switch e.cls {
	case clsNone:
		return 0, true
	case clsLower:
		r := e.run
		if r == 0 {
			return 0, false
		}
		if r > wordStates { // past its first token a word counts modulo wordPerToken
			r = wordFree + 1 + (r-wordFree-1)%wordPerToken
		}
		s := stateWord + 2*(r-1)
		if e.lower {
			s++
		}
		return s, true
	case clsDigit:
		if e.run == 0 {
			return 0, false
		}
		return stateDigit + (e.run-1)%digitsPerToken, true
	case clsSpace:
		s := stateSpace + min(e.spaces, 2)
		if e.nl {
			s += 3
		}
		return s, true
	case clsPunct:
		if e.run == 0 {
			return 0, false
		}
		return statePunct + (e.run-1)%punctPerToken, true
	}
	return 0, false
}

// pending is what close would add to e's count.
func pending(e *est) int {
	c := *e
	c.n = 0
	c.close()
	return c.n
}

// enter returns e's state as a row of steps and its value (n and what is
// pending), or false if the automaton cannot take over.
func (e *est) enter() (row uint, value int, ok bool) {
	s, ok := e.state()
	if !ok {
		return 0, 0, false
	}
	return uint(s) << stateShift, e.n + pending(e), true
}

// leave makes e the est of the automaton's row, worth value.
func (e *est) leave(row uint, value int) {
	s := row >> stateShift
	*e = automaton.stateEst[s]
	e.n = value - automaton.pendingOf[s]
}

// step is one transition: the row reached from row on ASCII byte c, and
// the half-tokens it adds (plus stepBias).
func step(row uint, c byte) (uint, uint) {
	e := uint(automaton.steps[(row|uint(automaton.byteCode[c]))%stepsSize])
	return e % stepsSize, e >> halvesShift
}

// scanASCII runs the automaton over s from i, from row, up to the end or
// to the first byte it does not read: a non-ASCII one, a backslash or a
// quote. It returns where it stopped, the row reached and the
// half-tokens added. Such a byte leads to stopRow and stays there, so
// eight bytes at a time are stepped through, two by two, with no test;
// the eight that reach it are gone through again by pairs, and the pair
// that reaches it (or a last odd byte) one byte at a time.
//
// The loops index t, the rest of s, from 0, so that the compiler can
// prove every index in bounds (from i it checked each block's), and
// keep the entry last stepped as the row: its halves are masked off by
// the next step's index, and only the row returned is masked.
//
// Sixteen bytes a block counted fewer instructions on the request
// path's prompt (1,393 against 1,577 in BenchmarkScan/prompt) but more
// where escapes stop the scan every line or two (prose 9,945 against
// 9,559, code 25,213 against 22,010): a block that reaches a stop is
// stepped for nothing and gone through again.
func scanASCII[T string | []byte](s T, i int, row uint) (int, uint, int) {
	t := s[i:]
	steps, pairCode := automaton.steps, automaton.pairCode
	_, _ = steps[0], pairCode[0] // nil checks once, not a step at a time
	j := 0
	var h uint
	for end := len(t) - 8; j <= end; j += 8 {
		w := t[j : j+8]
		// the steps written out (an inlined call leaves a no-op behind),
		// each entry added whole: its row's bits are shifted out at the end
		e := uint(steps[(row|uint(pairCode[uint16(w[0])|uint16(w[1])<<8]))%stepsSize])
		g := e
		e = uint(steps[(e|uint(pairCode[uint16(w[2])|uint16(w[3])<<8]))%stepsSize])
		g += e
		e = uint(steps[(e|uint(pairCode[uint16(w[4])|uint16(w[5])<<8]))%stepsSize])
		g += e
		e = uint(steps[(e|uint(pairCode[uint16(w[6])|uint16(w[7])<<8]))%stepsSize])
		if e == stopRow {
			break
		}
		row, h = e, h+(g+e)>>halvesShift
	}
	for ; j <= len(t)-2; j += 2 {
		e := uint(steps[(row|uint(pairCode[uint16(t[j])|uint16(t[j+1])<<8]))%stepsSize])
		if e == stopRow {
			break
		}
		row, h = e, h+e>>halvesShift
	}
	for ; j < len(t); j++ {
		e := uint(steps[(row|uint(automaton.byteCode[t[j]]))%stepsSize])
		if e == stopRow {
			break
		}
		row, h = e, h+e>>halvesShift
	}
	return i + j, row % stepsSize, int(h) - stepBias*j
}

// escapeByte is the ASCII character whose class a backslash escape
// feeds (\n a newline, \t a space, \" a quote, an invalid \a the letter),
// or 0 for the escapes jsonString decodes itself (\u, a non-ASCII byte).
var escapeByte = func() (t [256]byte) {
	for c := 1; c < utf8.RuneSelf; c++ {
		t[c] = byte(c)
	}
	t['n'], t['r'] = '\n', '\n'
	t['t'], t['b'], t['f'] = ' ', ' ', ' '
	t['u'] = 0
	// A backslash or a quote would stop the automaton; a slash is
	// punctuation too.
	t['\\'], t['"'] = '/', '/'
	return t
}()

// punctStand is the byte stepped for a backslash or a quote that is
// text, not JSON syntax: those two stop the automaton, and a slash is
// punctuation as they are.
const punctStand = '/'

// textASCII runs the automaton over text from i up to the end or to a
// non-ASCII character, or to a quote when quotes is set (rawTokens reads
// a JSON string as one); it returns where it stopped, the row reached and
// the half-tokens added.
func textASCII[T string | []byte](s T, i int, row uint, quotes bool) (int, uint, int) {
	h := 0
	for {
		var add int
		i, row, add = scanASCII(s, i, row)
		h += add
		if i >= len(s) || s[i] >= utf8.RuneSelf || (quotes && s[i] == '"') {
			return i, row, h
		}
		var a uint
		row, a = step(row, punctStand)
		h += int(a) - stepBias
		i++
	}
}

// jsonASCII runs the automaton over the body of a JSON string from i,
// decoding the escapes that stand for one ASCII character, up to the end
// or to what only feed can take (a non-ASCII character, \u, a final
// backslash), or to a quote when closing is set (the string's end; else
// a quote is punctuation). It returns where it stopped, the row reached
// and the half-tokens added.
func jsonASCII(s []byte, i int, row uint, closing bool) (int, uint, int) {
	h := 0
	for {
		var add int
		i, row, add = scanASCII(s, i, row)
		h += add
		if i >= len(s) {
			return i, row, h
		}
		c := s[i]
		switch {
		case c == '"' && !closing:
			c = punctStand
			i++
		case c == '\\' && i+1 < len(s) && escapeByte[s[i+1]] != 0:
			c = escapeByte[s[i+1]]
			i += 2
		default:
			return i, row, h
		}
		var a uint
		row, a = step(row, c)
		h += int(a) - stepBias
	}
}
