package tokens

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
)

// scanByBytes is scanASCII one byte at a time, each through step: the
// scan as it was before the automaton stepped bytes in pairs.
func scanByBytes(s []byte, i int, row uint) (int, uint, int) {
	h := 0
	for ; i < len(s) && codeOf(s[i]) != codeStop; i++ {
		var a uint
		row, a = step(row, s[i])
		h += int(a) - stepBias
	}
	return i, row, h
}

// checkScan fails unless scanASCII, on s from i in state, stops where
// the byte-by-byte scan does, in the same row with the same half-tokens
// (for s as bytes and as a string), and unless that row and value are
// what feed makes of the same bytes: the pair steps and the single ones
// are both checked against the estimator's one definition.
func checkScan(t *testing.T, s []byte, i, state int) {
	t.Helper()
	row := uint(state) << stateShift
	j, r, h := scanASCII(s, i, row)
	wj, wr, wh := scanByBytes(s, i, row)
	if j != wj || r != wr || h != wh {
		t.Fatalf("scanASCII(%q, %d, state %d) = %d, row %d, %d halves; by bytes %d, row %d, %d halves", s, i, state, j, r, h, wj, wr, wh)
	}
	if sj, sr, sh := scanASCII(string(s), i, row); sj != j || sr != r || sh != h {
		t.Fatalf("scanASCII(string %q, %d, state %d) = %d, row %d, %d halves; as bytes %d, row %d, %d halves", s, i, state, sj, sr, sh, j, r, h)
	}
	e := automaton.stateEst[state]
	for _, c := range s[i:j] {
		e.feed(asciiClass[c], 0)
	}
	want, ok := e.state()
	if !ok || uint(want)<<stateShift != r {
		t.Fatalf("scanASCII(%q, %d, state %d) ends in state %d, feed in %d (%v)", s, i, state, r>>stateShift, want, ok)
	}
	if got, want := automaton.pendingOf[state]+h*halfToken, e.n+pending(&e); got != want {
		t.Fatalf("scanASCII(%q, %d, state %d) adds to a value of %d, feed to %d", s, i, state, got, want)
	}
	if j < len(s) && codeOf(s[j]) != codeStop {
		t.Fatalf("scanASCII(%q, %d, state %d) stopped at %d, on %q, a byte it reads", s, i, state, j, s[j])
	}
}

// TestPairScanEqualsByteScan: the scan that steps two bytes at a time
// agrees with the scan of one byte at a time and with feed, from every
// state of the automaton, on random ASCII, UTF-8 and escape-heavy bytes
// at every start and length, and with a stop byte (a quote, a backslash,
// a non-ASCII byte) at each position of a pair and of an eight-byte
// block, after bytes of every class.
func TestPairScanEqualsByteScan(t *testing.T) {
	alphabets := []string{
		"abcxyzABCXYZ019 \t\n\r.,;(){}-_'!?/",
		"aaaaaaaaaaaaaaaaaaaaaaaB. 12\n",
		"a\\\"\\n\\\\ \"x",
		"ab é日本😀\xff\xc3",
		"\x00\x1f\x7f\x20\x0b\x0c",
	}
	rng := rand.New(rand.NewPCG(7, 8))
	for range 600 {
		alpha := []byte(alphabets[rng.IntN(len(alphabets))])
		s := make([]byte, rng.IntN(40))
		for k := range s {
			s[k] = alpha[rng.IntN(len(alpha))]
		}
		for i := 0; i <= len(s); i++ {
			for state := range stateCount {
				checkScan(t, s, i, state)
			}
		}
	}
	for _, unit := range []string{"abcdefghij", "ABCDEFGHIJ", "0123456789", " ", "\n", " \n  ", "!#$%&'()*+,-./:;<=>?@[]^_`{|}~", "aB1 \n."} {
		run := strings.Repeat(unit, 20)
		for _, stop := range []byte{'"', '\\', 0x80, 0xc3, 0xff} {
			for at := range 20 {
				s := []byte(run[:20])
				s[at] = stop
				for i := range 8 {
					for state := range stateCount {
						checkScan(t, s, i, state)
					}
				}
			}
		}
	}
}

// TestPairStepsHaveBothBytes: every entry of steps for a pair of
// readable bytes is the single step of the first byte followed by the
// single step of the second, and a pair with a stop byte in either place
// leads to stopRow. TestPairScanEqualsByteScan reaches only the pairs its
// strings hold; this checks every pair code from every state.
func TestPairStepsHaveBothBytes(t *testing.T) {
	for state := range stateCount {
		row := uint(state) << stateShift
		for p := range 1 << 16 {
			a, b := byte(p), byte(p>>8)
			got := automaton.steps[row|uint(automaton.pairCode[p])]
			if codeOf(a) == codeStop || codeOf(b) == codeStop {
				if got != stopRow {
					t.Fatalf("state %d, bytes %q %q: entry %#x, want stopRow", state, a, b, got)
				}
				continue
			}
			r1, h1 := step(row, a)
			r2, h2 := step(r1, b)
			if want := uint32(h1+h2)<<halvesShift | uint32(r2); got != want {
				t.Fatalf("state %d, bytes %q %q: entry %#x, two single steps %#x", state, a, b, got, want)
			}
		}
	}
}

// TestStringAtEqualsEst: stringAt, which estimates a string read by the
// automaton to its closing quote from the automaton's value alone and
// hands anything else on to an est, estimates every string as a fresh
// est fed the whole string does, and as the reference, and moves past
// the same bytes: strings the automaton reads whole and strings where it
// stops at any position on a \u escape, a non-ASCII character or a
// string cut short.
func TestStringAtEqualsEst(t *testing.T) {
	pieces := []string{"a", "word", "Word", " ", `\n`, `\t`, `\"`, `\\`, `\/`, ".", "12", "é", `\u00e9`, `\u0041`, `\ud83d\ude00`, "日本", `x\"y`}
	rng := rand.New(rand.NewPCG(9, 10))
	fast := 0
	for range 20000 {
		var body strings.Builder
		for range rng.IntN(30) {
			body.WriteString(pieces[rng.IntN(len(pieces))])
		}
		raw := `"` + body.String() + `"`
		for _, b := range [][]byte{[]byte(`[` + raw + `,1]`), []byte(`[` + raw[:rng.IntN(len(raw))+1])} {
			var e est
			wantEnd := e.jsonStringRest(b, 2)
			want := e.tokens()
			o := object{b: b}
			if got := o.stringAt(1); got != want || o.i != wantEnd {
				t.Fatalf("stringAt(%s) = %d, moved to %d; an est %d, to %d", b, got, o.i, want, wantEnd)
			}
			if b[len(b)-1] == ']' {
				if ref := refStringTokens([]byte(raw)); want != ref {
					t.Fatalf("stringAt(%s) = %d, reference %d", raw, want, ref)
				}
				if j, _, _ := jsonASCII(b, 2, 0, true); b[j] == '"' {
					fast++
				}
			}
		}
	}
	if fast < 1000 {
		t.Fatalf("only %d strings read by the automaton to their end", fast)
	}
}

// TestNextItemSkipsAsItsLoop: nextItem, which returns at once when the
// byte it starts on is above the comma, moves to where skipItem's loop
// does, after any byte and before any of the bytes that follow one.
func TestNextItemSkipsAsItsLoop(t *testing.T) {
	for c := range 256 {
		for _, rest := range []string{"", " ", "\n\t ,  {", ",\"a\"", "]", " , ]", "x"} {
			b := []byte("[" + string(rune(0)) + rest)
			b[1] = byte(c)
			for i := 1; i <= len(b); i++ {
				if got, want := nextItem(b, i), skipItem(b, i); got != want {
					t.Fatalf("nextItem(%q, %d) = %d, skipItem %d", b, i, got, want)
				}
			}
		}
	}
}

// BenchmarkScan estimates JSON strings as the request path reads a
// message's content (stringTokens: jsonBody, jsonASCII, scanASCII): the
// request path's benchmark prompt, the corpus's prose (paragraphs, so
// \n escapes stop the scan every few lines) and its source code; and
// the request path's messages array whole (EstimateChat, the walk
// around the scan included).
func BenchmarkScan(b *testing.B) {
	prompt := strings.Repeat("Summarise the trade-offs of running an LLM gateway in front of several providers. ", 4)[:300]
	for _, c := range []struct{ name, text string }{{"prompt", prompt}, {"prose", prose}, {"code", code}} {
		raw, err := json.Marshal(c.text)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(raw)))
			for b.Loop() {
				stringTokens(raw)
			}
		})
	}
	messages := []byte(`[{"role":"user","content":"` + prompt + `"}]`)
	b.Run("request", func(b *testing.B) {
		b.SetBytes(int64(len(messages)))
		for b.Loop() {
			EstimateChat(messages, nil)
		}
	})
}
