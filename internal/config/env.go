package config

import (
	"fmt"
	"sort"
	"unicode/utf8"
)

// Environment expansion runs on the file's text before YAML parsing, so a
// reference works anywhere a value does (rpm: ${RPM:-60}). Syntax:
//
//	${VAR}          the variable's value; an error when VAR is unset
//	${VAR:-default} the default when VAR is unset or empty; ${VAR:-} gives ""
//	$$              a literal $
//
// A $ followed by anything else is kept. References inside comments are left
// alone, so a commented-out provider does not demand its key. Values are
// inserted as text: quote the reference ("${VAR}") when a value may hold
// YAML syntax such as ": " or " #".
//
// Expansion changes lengths, so it records a posMap that turns a position
// in the expanded text back into one in the file: every error names the
// line and column the user wrote.

// envError is a bad or unset reference, at a byte offset of the source.
type envError struct {
	off int
	msg string
}

// span maps a run of the expanded text to the source. A literal span maps
// byte for byte; a substituted span maps all of its bytes to the start of
// the reference that produced it.
type span struct {
	out, in, n int
	lit        bool
}

type posMap struct {
	src, out        []byte
	spans           []span
	srcRows, outRow []int // byte offset of each line start
}

// expand substitutes references in src. It returns the expanded text, the
// map back to src (nil when nothing was substituted), problems with
// references, and the substituted values (so errors can be scrubbed of them).
func expand(src []byte, lookup func(string) (string, bool)) ([]byte, *posMap, []envError, []string) {
	var (
		out    = make([]byte, 0, len(src))
		spans  []span
		errs   []envError
		values []string
		subst  bool

		comment  bool
		quote    byte // the open quote, or 0
		prevSig  byte // last non-blank byte on the line, or 0
		lineHead = true
	)
	emitLit := func(in int, b []byte) {
		if n := len(spans); n > 0 && spans[n-1].lit && spans[n-1].in+spans[n-1].n == in {
			spans[n-1].n += len(b)
		} else {
			spans = append(spans, span{out: len(out), in: in, n: len(b), lit: true})
		}
		out = append(out, b...)
	}
	emitSub := func(in int, v string) {
		subst = true
		if v != "" {
			spans = append(spans, span{out: len(out), in: in, n: len(v)})
			out = append(out, v...)
		}
	}
	for i := 0; i < len(src); {
		c := src[i]
		switch {
		case c == '\n':
			comment, quote, prevSig, lineHead = false, 0, 0, true
			emitLit(i, src[i:i+1])
			i++
			continue
		case comment:
			emitLit(i, src[i:i+1])
			i++
			continue
		case c == '$' && i+1 < len(src) && src[i+1] == '$':
			emitSub(i, "$")
			i += 2
			lineHead, prevSig = false, '$'
			continue
		case c == '$' && i+1 < len(src) && src[i+1] == '{':
			v, n, msg := reference(src[i:], lookup)
			if msg != "" {
				errs = append(errs, envError{off: i, msg: msg})
			}
			if n == 0 { // unterminated: keep the text as written
				emitLit(i, src[i:i+2])
				i += 2
			} else {
				emitSub(i, v)
				values = append(values, v)
				i += n
			}
			lineHead, prevSig = false, '}'
			continue
		}
		switch {
		case quote == '"' && c == '\\' && i+1 < len(src) && src[i+1] != '\n':
			emitLit(i, src[i:i+2])
			i += 2
			continue
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '#' && (lineHead || src[i-1] == ' ' || src[i-1] == '\t'):
			comment = true
		case (c == '"' || c == '\'') && opensQuote(src, i, prevSig, lineHead):
			quote = c
		}
		if c != ' ' && c != '\t' {
			lineHead, prevSig = false, c
		}
		emitLit(i, src[i:i+1])
		i++
	}
	if !subst {
		return src, nil, errs, nil
	}
	return out, &posMap{src: src, out: out, spans: spans, srcRows: rowStarts(src), outRow: rowStarts(out)}, errs, values
}

// opensQuote reports whether a quote character at src[i] starts a quoted
// scalar, rather than sitting inside a plain one (as in "it's").
func opensQuote(src []byte, i int, prevSig byte, lineHead bool) bool {
	if lineHead {
		return true
	}
	if p := src[i-1]; p != ' ' && p != '\t' && p != '[' && p != '{' && p != ',' {
		return false
	}
	switch prevSig {
	case ':', '[', '{', ',', '-', '?':
		return true
	}
	return false
}

// reference parses the "${...}" at the start of s. It returns the value, the
// reference's length (0 when it is not terminated on its line) and a
// problem, if any.
func reference(s []byte, lookup func(string) (string, bool)) (string, int, string) {
	end := -1
	for j := 2; j < len(s) && s[j] != '\n'; j++ {
		if s[j] == '}' {
			end = j
			break
		}
	}
	if end < 0 {
		return "", 0, "unterminated ${ (write $${ for a literal)"
	}
	inner := string(s[2:end])
	name, def, hasDef := inner, "", false
	for j := 0; j+1 < len(inner); j++ {
		if inner[j] == ':' && inner[j+1] == '-' {
			name, def, hasDef = inner[:j], inner[j+2:], true
			break
		}
	}
	if !validVarName(name) {
		return "", end + 1, fmt.Sprintf("invalid reference ${%s}: want ${NAME} or ${NAME:-default}", inner)
	}
	v, ok := lookup(name)
	switch {
	case hasDef && v == "":
		return def, end + 1, ""
	case !ok:
		return "", end + 1, fmt.Sprintf("environment variable %s is not set (use ${%s:-} to allow it to be empty)", name, name)
	}
	return v, end + 1, ""
}

func validVarName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '_' || 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || i > 0 && '0' <= c && c <= '9' {
			continue
		}
		return false
	}
	return true
}

func rowStarts(b []byte) []int {
	rows := []int{0}
	for i, c := range b {
		if c == '\n' {
			rows = append(rows, i+1)
		}
	}
	return rows
}

// source turns a line and column of the expanded text into the ones of the
// file. A nil map is the identity.
func (m *posMap) source(line, col int) (int, int) {
	if m == nil || line <= 0 {
		return line, col
	}
	off := offsetOf(m.out, m.outRow, line, col)
	k := sort.Search(len(m.spans), func(k int) bool { return m.spans[k].out > off }) - 1
	in := 0
	if k >= 0 {
		s := m.spans[k]
		in = s.in
		if s.lit {
			in += min(off-s.out, s.n)
		}
	}
	return lineColOf(m.src, m.srcRows, in)
}

// offsetOf converts a 1-based line and rune column to a byte offset.
func offsetOf(b []byte, rows []int, line, col int) int {
	if line > len(rows) {
		return len(b)
	}
	off := rows[line-1]
	for ; col > 1 && off < len(b) && b[off] != '\n'; col-- {
		_, size := utf8.DecodeRune(b[off:])
		off += size
	}
	return off
}

// lineColOf converts a byte offset to a 1-based line and rune column.
func lineColOf(b []byte, rows []int, off int) (int, int) {
	off = min(max(off, 0), len(b))
	line := sort.Search(len(rows), func(k int) bool { return rows[k] > off })
	return line, utf8.RuneCount(b[rows[line-1]:off]) + 1
}
