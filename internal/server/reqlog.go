package server

import (
	"log/slog"
	"strconv"
	"sync"
	"time"

	"gatehouse/internal/llm"
)

// fieldSink receives the fields of a request's log line (logFields), so
// the one list of fields feeds both the hand-written JSON line and slog.
type fieldSink interface {
	addString(key, v string)
	// addQuoted adds v, whose JSON form q may hold already (see
	// llm.AppendQuoted): the names of a key or a deployment, made once.
	addQuoted(key, v string, q llm.Quoted)
	addInt(key string, v int)
	addFloat(key string, v float64)
	addBool(key string, v bool)
}

// jsonLine appends fields to a JSON object in the making, as slog's JSON
// handler would encode them.
type jsonLine struct{ b []byte }

func (l *jsonLine) key(k string) {
	l.b = append(l.b, ',', '"')
	l.b = append(l.b, k...)
	l.b = append(l.b, '"', ':')
}

func (l *jsonLine) addString(k, v string) { l.key(k); l.b = llm.AppendQuote(l.b, v) }
func (l *jsonLine) addQuoted(k, v string, q llm.Quoted) {
	l.key(k)
	l.b = llm.AppendQuoted(l.b, q, v)
}
func (l *jsonLine) addInt(k string, v int) {
	l.key(k)
	l.b = strconv.AppendInt(l.b, int64(v), 10)
}
func (l *jsonLine) addFloat(k string, v float64) {
	l.key(k)
	l.b = strconv.AppendFloat(l.b, v, 'g', -1, 64) // as slog: 12.5, 1e+06
}
func (l *jsonLine) addBool(k string, v bool) { l.key(k); l.b = strconv.AppendBool(l.b, v) }

// appendLineStart opens a log line as slog's JSON handler does:
// {"time":"<RFC 3339, nanoseconds>","level":"INFO","msg":"…" — the keys
// are constants, so they need no escaping. The time is written by
// stamps.
func appendLineStart(b []byte, stamps *lineStamps, t time.Time, level slog.Level, msg string) []byte {
	b = append(b, `{"time":"`...)
	b = stamps.append(b, t)
	b = append(b, `","level":"`...)
	b = append(b, level.String()...)
	b = append(b, `","msg":`...)
	return llm.AppendQuote(b, msg)
}

// linePool recycles the buffers of log lines: the writer copies a line
// before Write returns (asynclog does).
var linePool = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// attrList collects the fields as slog attributes, for a server with no
// request-log writer.
type attrList []slog.Attr

func (a *attrList) addString(k, v string) { *a = append(*a, slog.String(k, v)) }
func (a *attrList) addQuoted(k, v string, _ llm.Quoted) {
	*a = append(*a, slog.String(k, v))
}
func (a *attrList) addInt(k string, v int)       { *a = append(*a, slog.Int(k, v)) }
func (a *attrList) addFloat(k string, v float64) { *a = append(*a, slog.Float64(k, v)) }
func (a *attrList) addBool(k string, v bool)     { *a = append(*a, slog.Bool(k, v)) }
