package server

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/url"
	"os"
	"path"
	"strconv"
	"strings"
	"time"

	"gatehouse/internal/framing"
	"gatehouse/internal/h1"
	"gatehouse/internal/llm"
)

// Guard is what the listener enforces on every request before it is
// routed: limits net/http either lacks or answers in plain text.
type Guard struct {
	// MaxHeaderBytes bounds the request line and header fields; a larger
	// request gets 431 in its dialect. net/http (whose MaxHeaderBytes
	// should be the same) refuses in plain text what is over it by more
	// than its 4 KiB of slack. 0: no check here.
	MaxHeaderBytes int64
	// BodyReadTimeout is the longest wait for the next bytes of a body;
	// 0: none. It is lifted once the body has been read to its end, so it
	// never cuts a response short.
	BodyReadTimeout time.Duration
}

// Guarded is Handler behind the guard: requests with an ambiguous length
// (framing.Ambiguous: needs framing.Listen and framing.ConnContext on the
// http.Server), headers over the limit, and bodies trickled slower than
// the body timeout are refused in the dialect of their path.
func (s *Server) Guarded(g Guard) http.Handler {
	h := s.Handler()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The checks are a call of their own, not part of this frame: a
		// stream's handler runs under this frame for the stream's whole
		// life (see openStream).
		if s.guard(g, w, r) {
			h.ServeHTTP(w, r)
		}
	})
}

// guard checks r before it is routed: false means it was refused (and
// answered).
func (s *Server) guard(g Guard, w http.ResponseWriter, r *http.Request) bool {
	if framing.Ambiguous(r) {
		// RFC 9112 §6.1: a proxy in front may have framed this by its
		// Content-Length; what follows on the connection cannot be
		// trusted, so it is closed after the answer.
		w.Header().Set("Connection", "close")
		s.refuse(w, r, &llm.Error{Kind: llm.KindBadRequest, Status: http.StatusBadRequest, Type: "invalid_request_error",
			Code: "ambiguous_length", Message: "The request has both Content-Length and Transfer-Encoding; send one of them."})
		return false
	}
	if p := r.URL.Path; p == "" || p[0] != '/' {
		// "OPTIONS *" and the like: ServeMux would answer them with a
		// bare 400.
		s.refuse(w, r, &llm.Error{Kind: llm.KindBadRequest, Status: http.StatusBadRequest, Type: "invalid_request_error",
			Code: "invalid_request_target", Message: "The request target must be a path such as /v1/chat/completions."})
		return false
	} else if !canonical(p) {
		// ServeMux would redirect to the cleaned path, and a client
		// following a redirect may resend a POST as a GET.
		s.refuse(w, r, notFound(r))
		return false
	}
	if g.MaxHeaderBytes > 0 && headerBytes(w, r) > g.MaxHeaderBytes {
		w.Header().Set("Connection", "close")
		s.refuse(w, r, headersTooLarge(g.MaxHeaderBytes))
		return false
	}
	if g.BodyReadTimeout > 0 && r.Body != nil && r.Body != http.NoBody && r.ContentLength != 0 {
		b := &slowBody{ReadCloser: r.Body, rc: http.NewResponseController(w), timeout: g.BodyReadTimeout, fresh: true}
		// Set now, not at the first Read: a body the handler never
		// reads is read (and thrown away) by net/http after it, and
		// must not be trickled forever either.
		b.extend()
		r.Body = b
	}
	return true
}

func headersTooLarge(limit int64) *llm.Error {
	return &llm.Error{Kind: llm.KindTooLarge, Status: http.StatusRequestHeaderFieldsTooLarge, Type: "invalid_request_error",
		Code: "headers_too_large", Message: "The request headers are larger than the gateway's limit of " + strconv.FormatInt(limit, 10) + " bytes."}
}

// HeaderRefusal is the framing.Refusal for a limit of maxHeaderBytes: the
// same 431 headers_too_large the guard answers, in the dialect of the
// request target's path, for header sections too long for net/http to
// hand to the guard at all (it reads a few KiB past its limit, then
// answers in plain text).
func (s *Server) HeaderRefusal(maxHeaderBytes int64) framing.Refusal {
	return func(target string) []byte {
		p, _, _ := strings.Cut(target, "?")
		w := &bufferedResponse{h: http.Header{}}
		w.h.Set("Connection", "close")
		s.refuse(w, &http.Request{URL: &url.URL{Path: p}}, headersTooLarge(maxHeaderBytes))
		resp := &http.Response{StatusCode: w.status, ProtoMajor: 1, ProtoMinor: 1, Header: w.h, Close: true,
			ContentLength: int64(w.body.Len()), Body: io.NopCloser(&w.body)}
		var out bytes.Buffer
		_ = resp.Write(&out)
		return out.Bytes()
	}
}

// bufferedResponse keeps an answer written through http.ResponseWriter.
type bufferedResponse struct {
	h      http.Header
	status int
	body   bytes.Buffer
}

func (b *bufferedResponse) Header() http.Header { return b.h }

func (b *bufferedResponse) WriteHeader(status int) {
	if b.status == 0 {
		b.status = status
	}
}

func (b *bufferedResponse) Write(p []byte) (int, error) {
	b.WriteHeader(http.StatusOK)
	return b.body.Write(p)
}

// refuse answers a request the guard stops, in the dialect of its path.
func (s *Server) refuse(w http.ResponseWriter, r *http.Request, e *llm.Error) {
	d := dialectOpenAI
	if p := path.Clean(r.URL.Path); p == "/v1/messages" || strings.HasPrefix(p, "/v1/messages/") {
		d = dialectAnthropic
	}
	writeError(w, d, e, s.stamp(w, s.now()))
}

// canonical reports whether p is a clean path: no "//", "." or ".."
// segments (a trailing slash is fine).
func canonical(p string) bool {
	c := path.Clean(p)
	if strings.HasSuffix(p, "/") && c != "/" {
		c += "/"
	}
	return c == p
}

// headerBytes is the size of r's request line and header fields as sent
// over HTTP/1.1 (net/http has parsed them, so this is a reconstruction:
// the Host field lives in r.Host). Gatehouse's engine summed the fields
// as it checked them (h1.RequestNotes); on net/http's server they are
// summed here.
func headerBytes(w http.ResponseWriter, r *http.Request) int64 {
	n := len(r.Method) + 1 + len(r.RequestURI) + 1 + len(r.Proto) + 2
	if r.Host != "" {
		n += len("Host: ") + len(r.Host) + 2
	}
	if notes := h1.RequestNotesOf(w); notes != nil {
		n += notes.FieldBytes()
	} else {
		n += fieldBytes(r.Header)
	}
	return int64(n + 2)
}

// fieldBytes is the size of h's fields as "Name: value\r\n" lines, one
// for each value.
func fieldBytes(h http.Header) int {
	n := 0
	for k, vs := range h {
		for _, v := range vs {
			n += len(k) + 2 + len(v) + 2
		}
	}
	return n
}

// errBodyTimeout is what a body read gets when the client sent nothing
// for the body timeout.
var errBodyTimeout = errors.New("the client sent no body bytes within the body read timeout")

// slowBody moves the connection's read deadline forward before every read
// of a request body, and lifts it at the body's end.
type slowBody struct {
	io.ReadCloser
	rc      *http.ResponseController
	timeout time.Duration
	done    bool
	// fresh: the deadline the guard set when it wrapped the body still
	// stands for the first read, which comes a moment later, before
	// anything has been waited for. A small body then costs two deadline
	// changes (set, lifted at its end, usually in the same read), not
	// three; each is a timer change in the runtime's poller.
	fresh bool
}

func (b *slowBody) extend() {
	_ = b.rc.SetReadDeadline(time.Now().Add(b.timeout)) // ErrNotSupported: nothing to enforce it with
}

func (b *slowBody) Read(p []byte) (int, error) {
	if b.done {
		return b.ReadCloser.Read(p)
	}
	if b.fresh {
		b.fresh = false
	} else {
		b.extend()
	}
	n, err := b.ReadCloser.Read(p)
	switch {
	case err == io.EOF:
		b.done = true
		// Lifted: net/http goes on reading in the background to notice a
		// client that hangs up, and a long stream must not time that out.
		_ = b.rc.SetReadDeadline(time.Time{})
	case errors.Is(err, os.ErrDeadlineExceeded):
		err = errBodyTimeout
	}
	return n, err
}
