package h1

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/net/http/httpguts"
)

// A connection's state, for Shutdown: it closes only connections that
// are waiting for a request, and a connection takes a request only by
// moving out of the waiting state first.
const (
	stateNew    int32 = iota // no request read yet
	stateActive              // reading a request or running its handler
	stateIdle                // waiting for the next request
	stateClosed              // closed by Shutdown
)

// postHandlerDrain is how much of a request body the handler left unread
// is read and thrown away to keep the connection: net/http's figure
// (about a socket buffer). A longer rest closes the connection instead.
const postHandlerDrain = 256 << 10

// bodyBufferSize is how much of a response body is held before the
// header goes out: a body that fits when the handler returns is sent
// with a Content-Length, a longer one chunked. net/http holds the same.
const bodyBufferSize = 2048

// conn is one connection and the requests it carries, served one after
// another.
type conn struct {
	srv     *Server
	nc      net.Conn
	state   atomic.Int32
	started time.Time // accepted

	remoteAddr string
	tlsState   *tls.ConnectionState
	ctx        context.Context // the connection's (its values; never canceled); each request's derives from it

	r    connReader
	bufr *bufio.Reader // nil while a handler runs with its request read (watchForHangUp)
	bufw *lazyWriter   // &out
	out  lazyWriter
	werr error // the first write error; the connection is not reused after one

	lastMethod string
	// headerSize is the field count of the last response's header map:
	// the next one is made that big (see response.Header).
	headerSize int
	handedOver bool                  // given to Server.HTTP2: not closed here
	body       *[bodyBufferSize]byte // a response's held body, reused request after request; nil: none held
	fieldBuf   *[]byte               // the lines a handler hands over (FieldWriter), reused request after request; nil: none held
}

func (c *conn) serve() {
	defer c.srv.forget(c)
	var inFlight *response
	defer func() {
		if err := recover(); err != nil && err != http.ErrAbortHandler {
			const size = 64 << 10
			buf := make([]byte, size)
			buf = buf[:runtime.Stack(buf, false)]
			c.srv.logf("h1: panic serving %v: %v\n%s", c.remoteAddr, err, buf)
		}
		if inFlight != nil {
			inFlight.cancel()
			c.r.abortPendingRead()
		}
		c.close()
	}()
	if ra := c.nc.RemoteAddr(); ra != nil {
		c.remoteAddr = ra.String()
	}
	ctx := context.WithValue(context.Background(), http.LocalAddrContextKey, c.nc.LocalAddr())
	if f := c.srv.ConnContext; f != nil {
		ctx = f(ctx, c.nc)
	}
	// No cancel of the connection's own: every request's context is
	// canceled when its handler returns (serveRequest), on a hang-up (the
	// background read) or a panic (above), all before the connection
	// ends, so a cancel here would cancel nothing, and as the parent of
	// every request's context it would cost each request a children map
	// and a Done channel, held for as long as a stream runs.
	c.ctx = ctx

	if d := c.srv.ReadHeaderTimeout; d > 0 {
		_ = c.nc.SetReadDeadline(time.Now().Add(d))
	}
	c.r.c = c
	c.r.cond.L = &c.r.mu
	c.r.setReadLimit(int64(c.srv.maxHeaderBytes()) + 4096)
	c.takeReader()
	c.out.under = connWriter{c}
	c.bufw = &c.out

	if !c.handOver() {
		return
	}
	for {
		if _, err := c.bufr.Peek(1); err != nil {
			return
		}
		if !c.state.CompareAndSwap(stateNew, stateActive) && !c.state.CompareAndSwap(stateIdle, stateActive) {
			return // closed by Shutdown
		}
		w, err := c.readRequest()
		if c.srv.shutdown.Load() {
			// As net/http: a request read while shutting down is not
			// served; the client retries it elsewhere.
			return
		}
		if err != nil {
			c.refuse(err)
			return
		}
		inFlight = w
		c.serveRequest(w)
		inFlight = nil
		if !w.reuse() {
			if w.closeWrite {
				c.closeWriteAndWait()
			}
			return
		}
		if c.srv.shutdown.Load() {
			return
		}
		c.state.Store(stateIdle)
		if c.srv.shutdown.Load() { // Shutdown may have swept before the store
			return
		}
		if d := c.srv.idleTimeout(); d > 0 {
			_ = c.nc.SetReadDeadline(time.Now().Add(d))
		} else {
			_ = c.nc.SetReadDeadline(time.Time{})
		}
		if _, err := c.bufr.Peek(4); err != nil {
			return
		}
		if d := c.srv.ReadHeaderTimeout; d > 0 {
			_ = c.nc.SetReadDeadline(time.Now().Add(d))
		} else {
			_ = c.nc.SetReadDeadline(time.Time{})
		}
	}
}

// serveRequest runs the handler and finishes the response.
func (c *conn) serveRequest(w *response) {
	req := w.req
	c.r.setCancel(w.cancel)
	if req.Body == http.NoBody {
		c.watchForHangUp()
	}
	c.srv.Handler.ServeHTTP(w, req)
	w.cancel()
	w.finish()
	c.takeReader()
}

// watchForHangUp starts the background read once the handler has all of
// its request, and gives the read buffer back to its pool while the
// handler runs when it holds nothing of a next request: a stream does
// not keep 4 KiB for its whole life only to notice its client leaving
// (the background read needs one byte, which it keeps for the next
// request). Called by the handler's goroutine, or the one reading the
// body for it, before the handler returns.
func (c *conn) watchForHangUp() {
	c.r.startBackgroundRead()
	if c.bufr != nil && c.bufr.Buffered() == 0 {
		c.bufr.Reset(nil)
		readerPool.Put(c.bufr)
		c.bufr = nil
	}
}

// takeReader gives the connection a read buffer again after a handler
// ran without one.
func (c *conn) takeReader() {
	if c.bufr == nil {
		c.bufr = readerPool.Get().(*bufio.Reader)
		c.bufr.Reset(&c.r)
	}
}

// readRequest reads the next request with net/http's parser and makes
// the checks net/http's server makes on top of it.
func (c *conn) readRequest() (*response, error) {
	// What the connection's buffer holds already was read under the
	// bound too.
	c.r.setReadLimit(int64(c.srv.maxHeaderBytes()) + 4096 - int64(c.bufr.Buffered()))
	if c.lastMethod == "POST" {
		// RFC 9112 §2.2: a stray CRLF after a POST body is tolerated.
		peek, _ := c.bufr.Peek(4)
		n := 0
		for n < len(peek) && (peek[n] == '\r' || peek[n] == '\n') {
			n++
		}
		_, _ = c.bufr.Discard(n)
	}
	// The header section as buffered now, for the rare request whose Host
	// field ReadRequest leaves in doubt (hostField); Peek copies nothing.
	head, _ := c.bufr.Peek(c.bufr.Buffered())
	req, err := http.ReadRequest(c.bufr)
	if err != nil {
		if c.r.hitReadLimit() {
			return nil, errTooLarge
		}
		return nil, err
	}
	if !supported(req) {
		return nil, statusError{http.StatusHTTPVersionNotSupported, "unsupported protocol version"}
	}
	c.lastMethod = req.Method
	c.r.setReadLimit(-1)

	// ReadRequest has taken the Host field out of the map (into
	// req.Host, unless the target is in absolute form): net/http's
	// server checks the field itself. req.Host is the field's value but
	// when it is empty (no field, or an empty one) or the target is
	// absolute; then the field is looked up in the bytes it came in.
	h2Upgrade := req.Method == "PRI" && len(req.Header) == 0 && req.URL.Path == "*" && req.Proto == "HTTP/2.0"
	host, haveHost := req.Host, req.Host != ""
	if req.Host == "" || req.URL.Host != "" {
		if present, value, known := hostField(head); known {
			host, haveHost = value, present
		}
	}
	if req.ProtoAtLeast(1, 1) && !haveHost && !h2Upgrade && req.Method != "CONNECT" {
		return nil, statusError{http.StatusBadRequest, "missing required Host header"}
	}
	if haveHost && !httpguts.ValidHostHeader(host) {
		return nil, statusError{http.StatusBadRequest, "malformed Host header"}
	}
	// The walk that checks the fields also takes the notes a handler
	// asks for (RequestNotes): one walk of the map instead of three.
	prefix := c.srv.NotePrefix
	prefixed, fieldBytes := false, 0
	for k, vv := range req.Header {
		if !httpguts.ValidHeaderFieldName(k) {
			return nil, statusError{http.StatusBadRequest, "invalid header name"}
		}
		for _, v := range vv {
			if !httpguts.ValidHeaderFieldValue(v) {
				return nil, statusError{http.StatusBadRequest, "invalid header value"}
			}
			fieldBytes += len(k) + len(": ") + len(v) + len("\r\n")
		}
		// The first byte, in either case, before the whole prefix: most
		// names are as long as a short prefix, and few share its start.
		if !prefixed && prefix != "" && len(k) >= len(prefix) && k[0]|0x20 == prefix[0]|0x20 &&
			strings.EqualFold(k[:len(prefix)], prefix) {
			prefixed = true
		}
	}
	_ = c.nc.SetReadDeadline(time.Time{}) // the header's deadline is over; the guard bounds bodies

	ctx, cancel := context.WithCancel(c.ctx)
	req = req.WithContext(ctx)
	req.RemoteAddr = c.remoteAddr
	req.TLS = c.tlsState
	w := &response{c: c, req: req, cancel: cancel, contentLength: -1,
		wants10KeepAlive: req.ProtoMajor == 1 && req.ProtoMinor == 0 && hasToken(req.Header.Get("Connection"), "keep-alive"),
		wantsClose:       req.Close || hasToken(req.Header.Get("Connection"), "close"),
		closeAfterReply:  h2Upgrade,
		prefixed:         prefixed, fieldBytes: fieldBytes,
	}
	if req.Body != http.NoBody {
		b := &body{ReadCloser: req.Body, w: w, remain: req.ContentLength}
		if expectsContinue(req) {
			if req.ProtoAtLeast(1, 1) && req.ContentLength != 0 {
				b.expect = true
				b.continueDue.Store(true)
			}
		} else if req.Header.Get("Expect") != "" {
			w.expectationFailed = true
		}
		req.Body = b
		w.reqBody = b
	} else if req.Header.Get("Expect") != "" && !expectsContinue(req) {
		w.expectationFailed = true
	}
	if w.expectationFailed {
		// As net/http: refused before the handler runs, and the
		// connection closed after.
		w.Header().Set("Connection", "close")
		w.WriteHeader(http.StatusExpectationFailed)
		w.finish()
		return nil, errAnswered
	}
	return w, nil
}

// hostField finds the Host field in the header section at the start of
// head: whether it is there and its value; known is false when head does
// not hold the whole section (it was read in more than one go).
func hostField(head []byte) (present bool, value string, known bool) {
	first := true
	for len(head) > 0 {
		i := bytes.IndexByte(head, '\n')
		if i < 0 {
			return false, "", false
		}
		line := bytes.TrimSuffix(head[:i], []byte("\r"))
		head = head[i+1:]
		if first {
			first = false
			continue
		}
		if len(line) == 0 {
			return present, value, true
		}
		if len(line) >= 5 && line[4] == ':' && strings.EqualFold(string(line[:4]), "host") {
			present, value = true, strings.Trim(string(line[5:]), " \t")
		}
	}
	return false, "", false
}

// supported is whether the request's version is one this server speaks:
// HTTP/1.x, and the "PRI * HTTP/2.0" line net/http lets through to the
// handler.
func supported(r *http.Request) bool {
	return r.ProtoMajor == 1 || r.ProtoMajor == 2 && r.ProtoMinor == 0 && r.Method == "PRI" && r.RequestURI == "*"
}

func expectsContinue(r *http.Request) bool {
	return hasToken(r.Header.Get("Expect"), "100-continue")
}

var (
	errTooLarge = errors.New("h1: request header fields too large")
	errAnswered = errors.New("h1: answered before the handler")
)

// statusError is a request refused with a status and a reason, both
// shown to the client (net/http's wording).
type statusError struct {
	code int
	text string
}

func (e statusError) Error() string { return http.StatusText(e.code) + ": " + e.text }

// refuse answers a request that could not be read, in plain text as
// net/http does, or says nothing when the client went away.
func (c *conn) refuse(err error) {
	const errorHeaders = "\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n"
	var se statusError
	switch {
	case err == errAnswered:
	case err == errTooLarge:
		const publicErr = "431 Request Header Fields Too Large"
		_, _ = io.WriteString(c.nc, "HTTP/1.1 "+publicErr+errorHeaders+publicErr)
		c.closeWriteAndWait()
	case strings.HasPrefix(err.Error(), "unsupported transfer encoding"):
		_, _ = io.WriteString(c.nc, "HTTP/1.1 501 Not Implemented"+errorHeaders+"Unsupported transfer encoding")
	case commonNetReadError(err):
	case errors.As(err, &se):
		_, _ = fmt.Fprintf(c.nc, "HTTP/1.1 %d %s: %s%s%d %s: %s", se.code, http.StatusText(se.code), se.text, errorHeaders, se.code, http.StatusText(se.code), se.text)
	default:
		const publicErr = "400 Bad Request"
		_, _ = io.WriteString(c.nc, "HTTP/1.1 "+publicErr+errorHeaders+publicErr)
	}
}

// commonNetReadError is whether err is the client going away or timing
// out rather than a malformed request: nothing is answered then.
func commonNetReadError(err error) bool {
	if err == io.EOF {
		return true
	}
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		return true
	}
	oe, ok := err.(*net.OpError)
	return ok && oe.Op == "read"
}

// closeWriteAndWait half-closes the connection after a response that left
// request bytes unread, and reads (and throws away) what the client still
// sends for a moment, so that closing does not reset the connection
// before the client has read the answer.
func (c *conn) closeWriteAndWait() {
	_ = c.bufw.Flush()
	if cw, ok := c.nc.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
	_ = c.nc.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
	_, _ = io.CopyN(io.Discard, c.nc, 1<<20)
}

func (c *conn) close() {
	if c.bufw != nil {
		_ = c.bufw.Flush()
		c.out.drop()
		c.bufw = nil
	}
	c.releaseBody()
	c.releaseFields()
	if !c.handedOver {
		_ = c.nc.Close()
	}
	if c.bufr != nil && !c.r.busy() {
		c.bufr.Reset(nil)
		readerPool.Put(c.bufr)
		c.bufr = nil
	}
}

// connWriter is the writer under the connection's bufio.Writer: it keeps
// the first error, and a write error cancels the running request (its
// client is gone).
type connWriter struct{ c *conn }

func (w connWriter) Write(p []byte) (int, error) {
	n, err := w.c.nc.Write(p)
	if err != nil && w.c.werr == nil {
		w.c.werr = err
		w.c.r.cancelRequest()
	}
	return n, err
}

// hasToken reports whether v holds token (ASCII, compared without case)
// between boundaries: the value's ends, spaces, tabs or commas. That is
// net/http's server's reading, looser than a comma-separated list: it
// takes "0 close" in a Connection field for close, and the engine must
// answer as net/http does (FuzzDifferential).
func hasToken(v, token string) bool {
	for i := 0; i+len(token) <= len(v); i++ {
		if i > 0 && !tokenBoundary(v[i-1]) {
			continue
		}
		if end := i + len(token); end < len(v) && !tokenBoundary(v[end]) {
			continue
		}
		if strings.EqualFold(v[i:i+len(token)], token) {
			return true
		}
	}
	return false
}

func tokenBoundary(c byte) bool { return c == ' ' || c == ',' || c == '\t' }

// http2Preface is the part of the HTTP/2 client preface that tells it
// from an HTTP/1.x request line (what net/http's own check reads).
const http2Preface = "PRI * HTTP/2.0"

// handOver gives the connection to Server.HTTP2 when it is not HTTP/1.x,
// and reports whether it stays here. It also notes the TLS state of an
// HTTP/1.1 connection over TLS, for Request.TLS.
func (c *conn) handOver() bool {
	switch tc := c.nc.(type) {
	case *tls.Conn:
		// The handshake, unless the listener did it (framing.ListenTLS
		// does), under the header deadline already set.
		if err := tc.HandshakeContext(c.ctx); err != nil {
			var re tls.RecordHeaderError
			if errors.As(err, &re) && re.Conn != nil {
				_, _ = io.WriteString(re.Conn, "HTTP/1.0 400 Bad Request\r\n\r\nClient sent an HTTP request to an HTTPS server.\n")
			}
			return false
		}
		st := tc.ConnectionState()
		if st.NegotiatedProtocol == "h2" {
			return c.toHTTP2(nil)
		}
		c.tlsState = &st
		return true
	case interface{ ConnectionState() tls.ConnectionState }:
		st := tc.ConnectionState()
		c.tlsState = &st
		return true
	}
	if !c.srv.H2C {
		return true
	}
	for n := 1; ; n++ {
		if _, err := c.bufr.Peek(n); err != nil {
			return true // the request loop sees the error
		}
		b, _ := c.bufr.Peek(c.bufr.Buffered())
		if len(b) >= len(http2Preface) {
			if string(b[:len(http2Preface)]) == http2Preface {
				return c.toHTTP2(b)
			}
			return true
		}
		if !strings.HasPrefix(http2Preface, string(b)) {
			return true
		}
		n = len(b)
	}
}

// toHTTP2 hands the connection over, with read (the bytes taken from it
// already) replayed first; false: it is no longer this server's.
func (c *conn) toHTTP2(read []byte) bool {
	if c.srv.HTTP2 == nil {
		return false
	}
	_ = c.nc.SetReadDeadline(time.Time{})
	nc := c.nc
	if len(read) > 0 {
		nc = &replayConn{Conn: nc, rest: append([]byte(nil), read...)}
	}
	c.handedOver = true
	c.state.Store(stateClosed)
	c.srv.HTTP2(nc)
	return false
}

// replayConn is a connection whose first reads return bytes read from it
// before.
type replayConn struct {
	net.Conn
	rest []byte
}

func (r *replayConn) Read(p []byte) (int, error) {
	if len(r.rest) > 0 {
		n := copy(p, r.rest)
		r.rest = r.rest[n:]
		return n, nil
	}
	return r.Conn.Read(p)
}
