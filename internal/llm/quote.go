package llm

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
