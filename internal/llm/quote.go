package llm

import "unsafe"

// Quoted is a string with its JSON form made once, for a name written
// into JSON again and again: a key's ID or a deployment's model goes into
// every request's log line, and quoting it each time costs more than
// copying it.
type Quoted struct{ s, json string }

// Quote makes s's Quoted.
func Quote(s string) Quoted { return Quoted{s, string(AppendQuote(nil, s))} }

// AppendQuoted appends s as a JSON string, as AppendQuote does: copied
// from q when q was made from s, quoted afresh otherwise (a zero Quoted,
// or one made before the name changed), so a stale or missing q costs
// time, never a wrong line.
func AppendQuoted(b []byte, q Quoted, s string) []byte {
	if q.json != "" && q.s == s {
		return append(b, q.json...)
	}
	return AppendQuote(b, s)
}

// Members is the JSON text of two members of an object,
// `,"a":"x","b":"y"`, made once for a pair of names written into JSON
// again and again: a key's ID and its project, a deployment's provider
// and model go into every request's log line, and one copy of their
// text costs less than two names, two quotes and their checks.
//
// Each member's name comes as the text that opens it, `,"a":`, which the
// caller writes as a constant. A Members is kept with the names and the
// values it was made of, and Text gives its text only for those: a zero
// or a stale Members (made before a name changed) costs the caller the
// member-by-member way, never a wrong line.
type Members struct{ k1, v1, k2, v2, json string }

// MakeMembers makes the Members of k1 v1 and k2 v2, where k1 and k2 are
// the members' opening texts (`,"a":`), which must be valid JSON with
// nothing but the name to escape; the values are quoted here.
func MakeMembers(k1, v1, k2, v2 string) Members {
	b := make([]byte, 0, len(k1)+len(v1)+len(k2)+len(v2)+4)
	b = AppendQuote(append(b, k1...), v1)
	b = AppendQuote(append(b, k2...), v2)
	return Members{k1, v1, k2, v2, string(b)}
}

// Text returns m's JSON text when m was made of exactly these names and
// values, "" otherwise (a zero Members has no text to give).
func (m *Members) Text(k1, v1, k2, v2 string) string {
	if len(m.v1) != len(v1) || len(m.v2) != len(v2) || len(m.k1) != len(k1) || len(m.k2) != len(k2) {
		return ""
	}
	if SameData(m.v1, v1) && SameData(m.v2, v2) && SameData(m.k1, k1) && SameData(m.k2, k2) {
		return m.json
	}
	return ""
}

// SameString is a == b, answered by length and by the bytes' address
// before their contents. The names the request path writes again and
// again (a key's, a project's, a deployment's, the constants of routes
// and kinds) are most often the very string they are compared with,
// where == calls the runtime's memequal for every pair of equal length.
// The log line's Members, the metrics' series and the usage records'
// encoder compare with it.
func SameString(a, b string) bool {
	return len(a) == len(b) && (len(a) == 0 || unsafe.StringData(a) == unsafe.StringData(b) || a == b)
}

// SameData is SameString for strings known to be of one length: a
// caller comparing several pairs tests all their lengths first, then
// their contents here, so that each comparison is a branch rather than
// a value carried into the next.
func SameData(a, b string) bool {
	return unsafe.StringData(a) == unsafe.StringData(b) || a == b
}
