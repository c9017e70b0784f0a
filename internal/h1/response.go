package h1

import (
	"context"
	"io"
	"net/http"
	"net/textproto"
	"strconv"
	"strings"
	"sync"
	"time"
)

// response is the http.ResponseWriter of one request. The body is held
// (up to bodyBufferSize) until the handler returns, flushes, or writes
// more: then the header goes out, with a Content-Length when the whole
// body is known, else chunked.
type response struct {
	c       *conn
	req     *http.Request
	reqBody *body // nil when the request had none
	cancel  context.CancelFunc

	header http.Header
	// continueMu orders a 100 Continue, written by a read of the body,
	// against the response's header, for a handler that reads in one
	// goroutine and answers in another (net/http's writeContinueMu).
	continueMu sync.Mutex

	status        int
	wroteHeader   bool  // WriteHeader ran (the status is fixed)
	committed     bool  // the header is on its way to the client
	contentLength int64 // from the handler's header or the whole body; -1: unknown
	written       int64 // body bytes the handler wrote
	chunking      bool
	trailers      []string // declared in a Trailer header, canonical
	hasTrailers   bool     // the handler's header has a Trailer field

	// What writeHead found in the handler's header, for commit.
	te                                         string // Transfer-Encoding
	connField                                  string // Connection
	handlerCL                                  bool   // a Content-Length
	haveType, haveDate, haveEncoding, haveConn bool

	body []byte // held body bytes (the connection's buffer); nil until the first write
	// fields are the lines the handler handed over (FieldWriter), in the
	// connection's field buffer; nil: none.
	fields      []byte
	typedFields bool // fields carry a Content-Type

	wants10KeepAlive  bool
	wantsClose        bool
	closeAfterReply   bool
	closeWrite        bool // half-close and wait before closing (unread body left)
	expectationFailed bool
	fullDuplex        bool
	deadlineSet       bool // the handler set a write deadline: cleared after

	// Notes of the request's fields (RequestNotes), taken as they were
	// checked.
	prefixed   bool // a field of the server's NotePrefix came
	fieldBytes int  // the fields' size as "Name: value\r\n" lines
}

// Header makes the map as big as the last response's on the connection:
// a client's requests on one connection tend to get answers with the same
// fields, and a map made for them does not grow as they are set (Go's map
// turns into a table at the 9th entry and doubles it at 7/8 full;
// gatehouse's answer to a limited key has 15 fields, so each answer grew
// its map twice).
func (w *response) Header() http.Header {
	if w.header == nil {
		w.header = make(http.Header, w.c.headerSize)
	}
	return w.header
}

// maxHeaderHint bounds the size a map is made at: one answer with a
// great many fields does not make every later map on its connection that
// big.
const maxHeaderHint = 32

func (w *response) WriteHeader(code int) {
	if w.wroteHeader {
		return
	}
	if code < 100 || code > 999 {
		panic("h1: invalid WriteHeader code " + strconv.Itoa(code))
	}
	if code >= 100 && code <= 199 && code != http.StatusSwitchingProtocols {
		w.writeInterim(code)
		return
	}
	if b := w.reqBody; b != nil && b.expect {
		// Answered before the body was read: no 100 Continue. Under the
		// lock, so that one being written now is finished first.
		w.continueMu.Lock()
		b.continueDue.Store(false)
		w.continueMu.Unlock()
	}
	w.wroteHeader = true
	w.status = code
	h := w.header
	if cl := get(h, "Content-Length"); cl != "" {
		if v, err := strconv.ParseInt(cl, 10, 64); err == nil && v >= 0 {
			w.contentLength = v
		} else {
			w.c.srv.logf("h1: invalid Content-Length of %q", cl)
			h.Del("Content-Length")
		}
	}
	w.writeHead()
}

// writeInterim sends a 1xx response at once (103 Early Hints and the
// like), with the header fields set so far.
func (w *response) writeInterim(code int) {
	bw := newBlockWriter(w.c.bufw.buffer())
	bw.statusLine(w.req.ProtoAtLeast(1, 1), code)
	for k, vv := range w.header {
		if k == "Content-Length" || k == "Transfer-Encoding" || strings.HasPrefix(k, http.TrailerPrefix) {
			continue
		}
		bw.field(k, vv)
	}
	bw.str("\r\n")
	bw.flush()
	_ = w.c.bufw.Flush()
}

// writeContinue sends 100 Continue: the handler began reading a body its
// client holds back until told to send it.
func (w *response) writeContinue() {
	w.continueMu.Lock()
	defer w.continueMu.Unlock()
	if !w.reqBody.continueDue.Swap(false) {
		return // answered, or sent, meanwhile
	}
	_, _ = w.c.bufw.WriteString("HTTP/1.1 100 Continue\r\n\r\n")
	_ = w.c.bufw.Flush()
}

func (w *response) Write(p []byte) (int, error) { return w.write(len(p), p, "") }

// WriteString saves a handler's io.WriteString the copy to a []byte.
func (w *response) WriteString(s string) (int, error) { return w.write(len(s), nil, s) }

// write takes the body's next bytes, p or s: held while they fit with
// what is held, else sent (the header first).
func (w *response) write(n int, p []byte, s string) (int, error) {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if n == 0 {
		return 0, nil
	}
	if !bodyAllowed(w.status) {
		return 0, http.ErrBodyNotAllowed
	}
	if w.body == nil {
		w.body = w.c.holdBody()
	}
	w.written += int64(n)
	if w.contentLength != -1 && w.written > w.contentLength {
		return 0, http.ErrContentLength
	}
	if len(w.body)+n > cap(w.body) {
		if err := w.send(false); err != nil {
			return 0, err
		}
		if n >= cap(w.body) {
			if p == nil {
				p = []byte(s)
			}
			w.writeBody(p)
			if w.c.werr != nil {
				return 0, w.c.werr
			}
			return n, nil
		}
	}
	if p != nil {
		w.body = append(w.body, p...)
	} else {
		w.body = append(w.body, s...)
	}
	return n, nil
}

// send writes the header if it has not gone out, then the held body.
func (w *response) send(final bool) error {
	if !w.committed {
		w.commit(final)
	}
	if len(w.body) > 0 {
		w.writeBody(w.body)
		w.body = w.body[:0]
	}
	return w.c.werr
}

// writeBody writes p as the body's next bytes (a chunk when chunking).
func (w *response) writeBody(p []byte) {
	if w.req.Method == "HEAD" {
		return
	}
	bw := w.c.bufw
	if w.chunking {
		var n [16]byte
		_, _ = bw.Write(strconv.AppendInt(n[:0], int64(len(p)), 16))
		_, _ = bw.WriteString("\r\n")
		_, _ = bw.Write(p)
		_, _ = bw.WriteString("\r\n")
		return
	}
	_, _ = bw.Write(p)
}

func (w *response) Flush() { _ = w.FlushError() }

// FlushError sends the header and what the body has so far (for
// http.ResponseController).
func (w *response) FlushError() error {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if err := w.send(false); err != nil {
		return err
	}
	err := w.c.bufw.Flush()
	// A handler that flushes is streaming: between its events the
	// connection holds no buffer (the next write takes them again), nor
	// a field buffer for a next answer that may be a stream's life away.
	w.body = nil
	w.c.releaseBody()
	w.c.bufw.release()
	w.c.releaseFields()
	return err
}

// SetReadDeadline and SetWriteDeadline are for http.ResponseController.
func (w *response) SetReadDeadline(t time.Time) error { return w.c.nc.SetReadDeadline(t) }

func (w *response) SetWriteDeadline(t time.Time) error {
	w.deadlineSet = true
	return w.c.nc.SetWriteDeadline(t)
}

// EnableFullDuplex lets the handler read the request body after it began
// the response (for http.ResponseController): the unread rest is then
// not drained when the header goes out.
func (w *response) EnableFullDuplex() error {
	w.fullDuplex = true
	return nil
}

// finish ends the response once the handler has returned.
func (w *response) finish() {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	_ = w.send(true)
	if w.chunking {
		bw := w.c.bufw
		_, _ = bw.WriteString("0\r\n")
		w.writeTrailers()
		_, _ = bw.WriteString("\r\n")
	}
	_ = w.c.bufw.Flush()
	w.c.r.abortPendingRead()
	if w.deadlineSet {
		_ = w.c.nc.SetWriteDeadline(time.Time{})
	}
}

// reuse reports whether the connection can carry another request.
func (w *response) reuse() bool {
	if w.closeAfterReply || w.c.werr != nil {
		return false
	}
	if w.req.Method != "HEAD" && w.contentLength != -1 && bodyAllowed(w.status) && w.contentLength != w.written {
		return false // short of what it announced: the client's framing is off
	}
	if b := w.reqBody; b != nil && !b.sawEOF {
		return false
	}
	return true
}

// writeHead writes the status line and the handler's header fields as
// WriteHeader finds them: what the handler changes after it does not go
// out (as with net/http, which copies the map to the same end). The
// fields that frame the body are written by commit, once the body's
// length is known or the handler flushes; so are those of the handler's
// fields that frame it, when they depend on that.
func (w *response) writeHead() {
	h := w.header
	w.c.headerSize = min(len(h), maxHeaderHint)
	for _, v := range h["Trailer"] {
		w.hasTrailers = true
		w.declareTrailers(v)
	}
	w.te = get(h, "Transfer-Encoding")
	w.handlerCL = get(h, "Content-Length") != ""
	w.connField = get(h, "Connection")
	_, w.haveType = h["Content-Type"]
	w.haveType = w.haveType || w.typedFields
	_, w.haveDate = h["Date"]
	w.haveEncoding = get(h, "Content-Encoding") != ""
	_, w.haveConn = h["Connection"]

	// The handler's fields left out of the block: as net/http's
	// writeHeader deletes them. Content-Length: not for a status with no
	// body, and not next to a Transfer-Encoding (other than identity);
	// Transfer-Encoding: never as the handler set it (commit writes
	// chunked when it chunks); Content-Type: not on 304; Connection:
	// written by commit unless it says close, since commit may close.
	hasTE := w.te != ""
	excl := exTransferEncoding
	if !bodyAllowed(w.status) {
		excl |= exContentLength
		if w.status == http.StatusNotModified {
			excl |= exContentType
		}
	}
	if w.contentLength != -1 && hasTE && w.te != "identity" {
		w.c.srv.logf("h1: WriteHeader called with both Transfer-Encoding of %q and a Content-Length of %d", w.te, w.contentLength)
		excl |= exContentLength
		w.contentLength = -1
	}
	if w.haveConn && !hasToken(w.connField, "close") {
		excl |= exConnection
	}

	bw := newBlockWriter(w.c.bufw.buffer())
	bw.statusLine(w.req.ProtoAtLeast(1, 1), w.status)
	for k, vv := range h {
		if excl.has(k) || w.hasTrailers && strings.HasPrefix(k, http.TrailerPrefix) {
			continue
		}
		bw.field(k, vv)
	}
	if w.fields != nil {
		bw.bytes(w.fields)
		w.keepFields()
	}
	bw.flush()
}

// commit decides the framing and the connection's fate, and writes the
// header fields that say them; final: the handler has returned and the
// held body is all of it.
func (w *response) commit(final bool) {
	w.committed = true
	isHEAD := w.req.Method == "HEAD"
	keepAlives := !w.c.srv.shutdown.Load()
	hasTE := w.te != ""

	var clen int64 = -1 // a Content-Length added here
	if final && !w.hasTrailers && !hasTE && bodyAllowed(w.status) && !w.handlerCL && (!isHEAD || len(w.body) > 0) {
		w.contentLength = int64(len(w.body))
		clen = w.contentLength
	}
	if w.wants10KeepAlive && keepAlives && w.handlerCL && w.connField == "keep-alive" {
		w.closeAfterReply = false
	}
	hasCL := w.contentLength != -1
	var connection string // a Connection field added here
	if w.wants10KeepAlive && (isHEAD || hasCL || !bodyAllowed(w.status)) {
		if !w.haveConn {
			connection = "keep-alive"
		}
	} else if !w.req.ProtoAtLeast(1, 1) || w.wantsClose {
		w.closeAfterReply = true
	}
	if w.connField == "close" || !keepAlives {
		w.closeAfterReply = true
	}
	if b := w.reqBody; b != nil && b.expect && !b.sawEOF {
		// The client may still hold its body back: it cannot be drained.
		w.closeAfterReply = true
	}
	w.drain()

	var contentType string
	if bodyAllowed(w.status) && !w.haveType && !hasTE && len(w.body) > 0 && !w.haveEncoding {
		contentType = http.DetectContentType(w.body)
	}
	var transferEncoding string
	switch {
	case isHEAD || !bodyAllowed(w.status) || hasCL:
	case w.req.ProtoAtLeast(1, 1):
		if hasTE && w.te == "identity" {
			w.closeAfterReply = true
		} else {
			w.chunking = true
			transferEncoding = "chunked"
		}
	default:
		// HTTP/1.0 with no length: the body ends when the connection does.
		w.closeAfterReply = true
	}
	if w.closeAfterReply && !hasToken(w.connField, "close") {
		connection = ""
		if w.req.ProtoAtLeast(1, 1) {
			connection = "close"
		}
	} else if w.haveConn && !hasToken(w.connField, "close") {
		// Held back by writeHead, and still true.
		writeField(w.c.bufw.buffer(), "Connection", w.header["Connection"])
	}

	bw := newBlockWriter(w.c.bufw.buffer())
	// Room for all of it but a detected content type (at most 40 bytes).
	bw.room(len("Content-Length: 18446744073709551615\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\nDate: Mon, 02 Jan 2006 15:04:05 GMT\r\n\r\n"))
	b := bw.b
	if clen >= 0 {
		b = append(b, "Content-Length: "...)
		b = strconv.AppendInt(b, clen, 10)
		b = append(b, '\r', '\n')
	}
	if contentType != "" {
		b = append(b, "Content-Type: "...)
		b = append(b, contentType...)
		b = append(b, '\r', '\n')
	}
	if connection != "" {
		b = append(b, "Connection: "...)
		b = append(b, connection...)
		b = append(b, '\r', '\n')
	}
	if transferEncoding != "" {
		b = append(b, "Transfer-Encoding: chunked\r\n"...)
	}
	if !w.haveDate {
		b = append(b, "Date: "...)
		b = append(b, w.c.srv.dateValue()...)
		b = append(b, '\r', '\n')
	}
	bw.b = append(b, '\r', '\n')
	bw.flush()
}

// drain reads and throws away what the handler left of the request body
// (up to postHandlerDrain), so the connection can carry the next request;
// a longer rest, or a body the handler closed early, closes it instead.
func (w *response) drain() {
	b := w.reqBody
	if b == nil || w.req.ContentLength == 0 || w.closeAfterReply || w.fullDuplex || b.sawEOF {
		return
	}
	switch {
	case b.err == io.ErrUnexpectedEOF && w.req.ContentLength > 0:
		// The client ended its side mid-body: nothing left to drain, and
		// the next read ends the connection (net/http says nothing more).
		return
	case b.err != nil:
		w.closeAfterReply = true
		return
	case b.closed:
		w.closeAfterReply, w.closeWrite = true, true
		return
	case b.remain >= postHandlerDrain:
		w.closeAfterReply, w.closeWrite = true, true
		return
	}
	_, err := io.CopyN(io.Discard, b, postHandlerDrain+1)
	switch err {
	case nil:
		w.closeAfterReply, w.closeWrite = true, true
	case io.EOF:
	default:
		w.closeAfterReply = true
	}
}

// declareTrailers notes the trailer names a Trailer header value
// announces.
func (w *response) declareTrailers(v string) {
	for f := range strings.SplitSeq(v, ",") {
		f = textproto.CanonicalMIMEHeaderKey(strings.Trim(f, " \t"))
		switch f {
		case "", "Transfer-Encoding", "Trailer", "Content-Length":
			continue
		}
		w.trailers = append(w.trailers, f)
	}
}

// writeTrailers writes the trailer fields: the declared names' values as
// the handler left them, and the http.TrailerPrefix fields.
func (w *response) writeTrailers() {
	bw := w.c.bufw.buffer()
	for _, k := range w.trailers {
		if vv, ok := w.header[k]; ok {
			writeField(bw, k, vv)
		}
	}
	for k, vv := range w.header {
		if name, ok := strings.CutPrefix(k, http.TrailerPrefix); ok && name != "" {
			writeField(bw, name, vv)
		}
	}
}

// exclusions are the framing fields of the handler's header that do not
// go out as they are (net/http's writeHeader deletes the same).
type exclusions uint8

const (
	exContentLength exclusions = 1 << iota
	exTransferEncoding
	exContentType
	exConnection
)

func (e exclusions) has(k string) bool {
	switch k {
	case "Content-Length":
		return e&exContentLength != 0
	case "Transfer-Encoding":
		return e&exTransferEncoding != 0
	case "Content-Type":
		return e&exContentType != 0
	case "Connection":
		return e&exConnection != 0
	}
	return false
}

// get is h.Get for a name already canonical: the same lookup without
// canonicalising the constant name again (five of them an answer).
func get(h http.Header, name string) string {
	if v := h[name]; len(v) > 0 {
		return v[0]
	}
	return ""
}

func bodyAllowed(status int) bool {
	return (status < 100 || status > 199) && status != http.StatusNoContent && status != http.StatusNotModified
}

// statusLine gathers the status line.
func (w *blockWriter) statusLine(is11 bool, code int) {
	w.room(len("HTTP/1.1 999 status code 999\r\n") + 64)
	b := w.b
	if is11 {
		b = append(b, "HTTP/1.1 "...)
	} else {
		b = append(b, "HTTP/1.0 "...)
	}
	b = strconv.AppendInt(b, int64(code), 10)
	if text := http.StatusText(code); text != "" {
		b = append(b, ' ')
		b = append(b, text...)
	} else {
		b = append(b, " status code "...)
		b = strconv.AppendInt(b, int64(code), 10)
	}
	w.b = append(b, '\r', '\n')
}
