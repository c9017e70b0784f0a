package server

import (
	"log/slog"
	"strconv"
	"sync"
	"time"

	"gatehouse/internal/limit"
	"gatehouse/internal/llm"
)

// jsonLine receives the fields of a request's log line (logFields), so
// the one list of fields feeds both the hand-written JSON line and slog:
// it appends them to a JSON object in the making, b, or, with attrs set,
// collects them as slog attributes (a server with no request-log
// writer). One concrete type rather than an interface of the two: the
// line every request writes calls its methods directly, not through an
// interface's table.
//
// A key arrives as the constant text that introduces its member in the
// JSON line, `,"name":`, with no character that needs escaping: the line
// appends it in one copy, and slog's attributes take the name out of it
// (memberName), without an allocation either way.
type jsonLine struct {
	b     []byte
	attrs *attrList
}

// memberName is the name in a key's member text `,"name":`.
func memberName(k string) string { return k[2 : len(k)-2] }

func (l *jsonLine) addString(k, v string) {
	if l.attrs != nil {
		l.attrs.addString(k, v)
		return
	}
	l.b = llm.AppendQuote(append(l.b, k...), v)
}

// addQuoted adds v, whose JSON form q may hold already (see
// llm.AppendQuoted): the names of a key or a deployment, made once.
func (l *jsonLine) addQuoted(k, v string, q llm.Quoted) {
	if l.attrs != nil {
		l.attrs.addString(k, v)
		return
	}
	l.b = llm.AppendQuoted(append(l.b, k...), q, v)
}

// addPair adds two string fields, whose JSON member text,
// `,"k1":"v1","k2":"v2"`, text holds when not "" (made once: see
// llm.Members and routeMembers); with text "", the values are quoted
// here.
func (l *jsonLine) addPair(k1, v1, k2, v2, text string) {
	switch {
	case l.attrs != nil:
		l.attrs.addPair(k1, v1, k2, v2)
	case text != "":
		l.b = append(l.b, text...)
	default:
		l.b = llm.AppendQuote(append(llm.AppendQuote(append(l.b, k1...), v1), k2...), v2)
	}
}

// addPlain adds v, which holds only bytes a JSON string keeps as they
// are (printable ASCII but '"' and '\\'): a request ID gatehouse made, a
// formatted number. The line writes it between quotes without looking
// at it.
func (l *jsonLine) addPlain(k, v string) {
	if l.attrs != nil {
		l.attrs.addString(k, v)
		return
	}
	l.b = append(append(append(append(l.b, k...), '"'), v...), '"')
}

func (l *jsonLine) addInt(k string, v int) {
	if l.attrs != nil {
		l.attrs.addInt(k, v)
		return
	}
	l.b = appendInt(append(l.b, k...), v)
}

// addIntPair adds two integer fields, whose JSON member text text holds
// when not "" (a constant for the common values), as addPair.
func (l *jsonLine) addIntPair(k1 string, v1 int, k2 string, v2 int, text string) {
	switch {
	case l.attrs != nil:
		l.attrs.addInt(k1, v1)
		l.attrs.addInt(k2, v2)
	case text != "":
		l.b = append(l.b, text...)
	default:
		l.b = appendInt(append(appendInt(append(l.b, k1...), v1), k2...), v2)
	}
}

// addMillis adds d in milliseconds, as the float64 ms(d).
func (l *jsonLine) addMillis(k string, d time.Duration) {
	if l.attrs != nil {
		l.attrs.addMillis(k, d)
		return
	}
	l.b = appendMillisFloat(append(l.b, k...), d)
}

func (l *jsonLine) addBool(k string, v bool) {
	if l.attrs != nil {
		l.attrs.addBool(k, v)
		return
	}
	l.b = strconv.AppendBool(append(l.b, k...), v)
}

// appendInt appends v as strconv.AppendInt(b, v, 10) does, by the
// decimal writer the limit headers and the cost share.
func appendInt(b []byte, v int) []byte { return limit.AppendInt(b, int64(v)) }

// appendMillisFloat appends ms(d) as strconv.AppendFloat(b, ms(d), 'g',
// -1, 64) does (slog's form: 12.5, 1e+06), which costs a shortest-digits
// search per number. ms(d) is a whole number of microseconds over 1000,
// correctly rounded, so below a million milliseconds (where 'g' turns to
// an exponent) the float is nearest to that decimal and no other decimal
// of three places or fewer lies within its rounding interval (an ulp
// there is below 1.2e-10): its shortest form is the decimal itself,
// trailing zeros dropped. Anything else goes to strconv.
func appendMillisFloat(b []byte, d time.Duration) []byte {
	us := d.Microseconds()
	if us < 0 || us >= 1e9 {
		return strconv.AppendFloat(b, ms(d), 'g', -1, 64)
	}
	b = appendInt(b, int(us/1000))
	frac := int(us % 1000)
	switch {
	case frac == 0:
		return b
	case frac%100 == 0:
		return append(b, '.', byte('0'+frac/100))
	case frac%10 == 0:
		return append(b, '.', byte('0'+frac/100), byte('0'+frac/10%10))
	}
	return append(b, '.', byte('0'+frac/100), byte('0'+frac/10%10), byte('0'+frac%10))
}

// appendLineStart opens a request's log line as slog's JSON handler
// does: {"time":"<RFC 3339, nanoseconds>","level":"INFO","msg":"request"
// — the keys, the message and a request line's two levels are
// constants, written as one copy each. The time is written by stamps.
func appendLineStart(b []byte, stamps *lineStamps, t time.Time, level slog.Level) []byte {
	b = append(b, `{"time":"`...)
	b = stamps.append(b, t)
	switch level {
	case slog.LevelInfo:
		return append(b, `","level":"INFO","msg":"request"`...)
	case slog.LevelWarn:
		return append(b, `","level":"WARN","msg":"request"`...)
	}
	b = append(b, `","level":"`...)
	b = append(b, level.String()...)
	return append(b, `","msg":"request"`...)
}

// plainMethod reports whether m is one of the methods gatehouse serves,
// whose text needs no escaping. Any other method a client sends is
// quoted as it is.
func plainMethod(m string) bool {
	switch m {
	case "POST", "GET", "DELETE", "PUT", "PATCH", "HEAD", "OPTIONS":
		return true
	}
	return false
}

// plainPath reports whether p is the path of one of gatehouse's model
// APIs, whose text needs no escaping: almost every line logs one of
// them. Any other path a client sends is quoted as it is.
func plainPath(p string) bool {
	switch p {
	case "/v1/chat/completions", "/v1/messages", "/v1/embeddings", "/v1/responses", "/v1/messages/count_tokens", "/v1/models":
		return true
	}
	return false
}

// routeMembers is the log line's member text of method m and path p,
// `,"method":"POST","path":"/v1/chat/completions"`, for the method and
// path of each of gatehouse's model APIs (nearly every line logs one of
// them): one constant copied where the two fields cost two keys, two
// values and their quotes. "" for any other method or path.
func routeMembers(m, p string) string {
	if m == "GET" {
		if p == "/v1/models" {
			return `,"method":"GET","path":"/v1/models"`
		}
		return ""
	}
	if m != "POST" {
		return ""
	}
	switch p {
	case "/v1/chat/completions":
		return `,"method":"POST","path":"/v1/chat/completions"`
	case "/v1/messages":
		return `,"method":"POST","path":"/v1/messages"`
	case "/v1/embeddings":
		return `,"method":"POST","path":"/v1/embeddings"`
	case "/v1/responses":
		return `,"method":"POST","path":"/v1/responses"`
	case "/v1/messages/count_tokens":
		return `,"method":"POST","path":"/v1/messages/count_tokens"`
	}
	return ""
}

// firstAttemptMembers are the line's attempt fields of a request the
// first attempt answered.
const firstAttemptMembers = `,"attempts":1,"billed_attempt":1`

// linePool recycles log lines and their buffers: the writer copies a
// line before Write returns (asynclog does). It holds the jsonLine, not
// only its buffer: one made for each line escaped to the heap.
var linePool = sync.Pool{New: func() any { return &jsonLine{b: make([]byte, 0, 512)} }}

// attrList collects the fields as slog attributes, for a server with no
// request-log writer (jsonLine.attrs).
type attrList []slog.Attr

func (a *attrList) addString(k, v string) { *a = append(*a, slog.String(memberName(k), v)) }

func (a *attrList) addPair(k1, v1, k2, v2 string) {
	*a = append(*a, slog.String(memberName(k1), v1), slog.String(memberName(k2), v2))
}

func (a *attrList) addInt(k string, v int) { *a = append(*a, slog.Int(memberName(k), v)) }

func (a *attrList) addMillis(k string, d time.Duration) {
	*a = append(*a, slog.Float64(memberName(k), ms(d)))
}

func (a *attrList) addBool(k string, v bool) { *a = append(*a, slog.Bool(memberName(k), v)) }
