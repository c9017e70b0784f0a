package h1

import "net/http"

// FieldWriter is implemented by the engine's http.ResponseWriter: a
// handler that sets the same fields on every answer formats them itself,
// once, as header lines, and hands them over here instead of through
// the http.Header map. A field in the map costs a map assignment (and
// the map's growth), an iteration step and the engine's checks of its
// name and value; a handed-over line costs a copy.
//
// The lines are trusted: each is "Name: value\r\n" with a plain token
// as name and a value of printable ASCII (or HTAB), which the caller
// guarantees (constant names, values it formatted itself). A value that
// carries a client's or an upstream's bytes belongs in the map, which
// the engine checks.
//
// The lines go out in the response's header block, after the map's
// fields, and only there: not in a 1xx interim response, not in the
// trailers, and the map never sees them (Header().Get does not find
// them, Header().Del does not remove them), and they go out whatever the
// status. A field is in one place, the lines or the map, never both.
// The lines carry no field that frames the body (Content-Length,
// Transfer-Encoding, Connection, Trailer) nor Date: the engine decides
// those from the map. Content-Type may be among them, said so by typed,
// so the engine sniffs none. Lines handed over after the header was
// written are dropped, as changes to the map are.
type FieldWriter interface {
	// FieldBuffer returns an empty buffer with room to format lines
	// into (the connection's, reused from answer to answer and pooled
	// while a stream runs: not to be touched once the header is out), as
	// bufio.Writer.AvailableBuffer does: append to it, then hand the
	// result to AppendFields.
	FieldBuffer() []byte
	// AppendFields adds lines to those the header block will carry;
	// typed: a Content-Type field is among them.
	AppendFields(lines []byte, typed bool)
}

var _ FieldWriter = (*response)(nil)

// FieldWriterOf finds w's FieldWriter, through the wrappers that unwrap
// as http.ResponseController's do; nil when there is none (net/http's
// server, a recorder), and a handler's fields then go into the map.
// A wrapper that keeps its own header map (to capture or rewrite
// fields) must not unwrap to the engine, or must be a FieldWriter
// itself: lines handed past it never reach its map.
func FieldWriterOf(w http.ResponseWriter) FieldWriter {
	if r, ok := w.(*response); ok {
		return r // the engine's own, unwrapped: see RequestNotesOf
	}
	return unwrapTo[FieldWriter](w)
}

// unwrapTo finds the first of w and the writers it unwraps to (as
// http.ResponseController unwraps them) that is a T; T's zero value
// when none is.
func unwrapTo[T any](w http.ResponseWriter) T {
	for {
		if v, ok := w.(T); ok {
			return v
		}
		u, ok := w.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			var none T
			return none
		}
		w = u.Unwrap()
	}
}

// fieldBufferSize is the room a connection's field buffer starts with:
// a limited key's JSON answer hands over about 400 bytes, its stream
// about 600 (the stream's own three fields with them); one that does not
// fit costs a second buffer and a copy.
const fieldBufferSize = 768

// maxFieldBuffer bounds the buffer a connection keeps between answers.
const maxFieldBuffer = 4 << 10

func (w *response) FieldBuffer() []byte {
	if w.fields == nil {
		if w.c.fieldBuf == nil {
			w.c.fieldBuf = fieldPool.Get().(*[]byte)
		}
		w.fields = (*w.c.fieldBuf)[:0]
	}
	return w.fields[len(w.fields):len(w.fields)]
}

func (w *response) AppendFields(lines []byte, typed bool) {
	if w.wroteHeader || len(lines) == 0 {
		return
	}
	w.typedFields = w.typedFields || typed
	if w.fields == nil {
		w.FieldBuffer()
	}
	n := len(w.fields)
	if len(lines) <= cap(w.fields)-n && &w.fields[:n+1][n] == &lines[0] {
		// Formatted in FieldBuffer's room: already in place.
		w.fields = w.fields[:n+len(lines)]
		return
	}
	w.fields = append(w.fields, lines...)
}

// keepFields gives the field buffer back to the connection for its next
// answer, once the header block has carried the lines.
func (w *response) keepFields() {
	if w.fields != nil && cap(w.fields) <= maxFieldBuffer {
		*w.c.fieldBuf = w.fields[:0]
	}
	w.fields = nil
}

// RequestNotes is implemented by the engine's http.ResponseWriter: what
// the engine learnt of the request's header fields while it checked
// them, for a handler that would otherwise walk the header map again to
// learn it. The notes tell of the fields as they were read: a handler
// that adds fields to the request's map must not rely on them.
type RequestNotes interface {
	// Prefixed reports whether the request carried a field whose name
	// begins with prefix, in any case. known is false, and the handler
	// must look itself, when the engine did not look for prefix (it is
	// not exactly the server's NotePrefix): a server set up without the
	// prefix never makes its handler miss a field.
	Prefixed(prefix string) (has, known bool)
	// FieldBytes is the size of the request's header fields as lines
	// "Name: value\r\n", one for each value, names as parsed: the Host
	// field, which http.ReadRequest takes out of the map, is not among
	// them.
	FieldBytes() int
}

var _ RequestNotes = (*response)(nil)

// RequestNotesOf finds w's RequestNotes as FieldWriterOf finds its
// FieldWriter; nil when there is none (net/http's server, a recorder).
// The engine's own writer, unwrapped, is told by its type alone: asking
// whether w has an interface's methods is a look-up in the runtime,
// which caches the answer only now and then (once in about 1,024), so
// a process's first few thousand requests would each pay for it.
func RequestNotesOf(w http.ResponseWriter) RequestNotes {
	if r, ok := w.(*response); ok {
		return r
	}
	return unwrapTo[RequestNotes](w)
}

func (w *response) Prefixed(prefix string) (has, known bool) {
	if prefix == "" || prefix != w.c.srv.NotePrefix {
		return false, false
	}
	return w.prefixed, true
}

func (w *response) FieldBytes() int { return w.fieldBytes }
