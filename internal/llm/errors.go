package llm

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"
)

// ErrorKind classifies why a request failed. The kind decides the status
// code, whether another deployment may be tried, and the metric label; the
// message is what the client reads.
type ErrorKind string

// Error kinds. Their string values appear in logs and metrics.
const (
	KindBadRequest       ErrorKind = "bad_request"
	KindAuth             ErrorKind = "auth"
	KindPermission       ErrorKind = "permission"
	KindNotFound         ErrorKind = "not_found"
	KindNotImplemented   ErrorKind = "not_implemented" // a feature this deployment has not set up (501)
	KindTooLarge         ErrorKind = "too_large"
	KindMediaType        ErrorKind = "unsupported_media_type"
	KindRateLimit        ErrorKind = "rate_limit"
	KindBudget           ErrorKind = "budget"
	KindUpstreamStatus   ErrorKind = "upstream_status"
	KindUpstreamTimeout  ErrorKind = "upstream_timeout"
	KindUpstreamConnect  ErrorKind = "upstream_connect"
	KindUpstreamProtocol ErrorKind = "upstream_protocol"
	// KindUpstreamTLS: the TLS handshake with the provider failed (an
	// untrusted or wrong certificate, a server that does not speak TLS,
	// a refused handshake). The request was not sent, so another
	// deployment may take it; the deployment's breaker counts it, since
	// its next handshake fails the same way until someone fixes it.
	KindUpstreamTLS ErrorKind = "upstream_tls"
	KindUnavailable ErrorKind = "unavailable"
	KindInternal    ErrorKind = "internal"
	KindCanceled    ErrorKind = "canceled"
)

// Error is a failure the gateway reports to a client. Message, Type, Code
// and Param are safe to show; Cause is logged but never sent.
type Error struct {
	Kind       ErrorKind
	Status     int
	Message    string
	Type       string // OpenAI error type, e.g. invalid_request_error
	Code       string // OpenAI error code, e.g. model_not_found
	Param      string
	RetryAfter time.Duration // sent as Retry-After when > 0
	Cause      error
}

func (e *Error) Error() string {
	if e.Cause != nil {
		return fmt.Sprintf("%s: %s: %v", e.Kind, e.Message, e.Cause)
	}
	return fmt.Sprintf("%s: %s", e.Kind, e.Message)
}

func (e *Error) Unwrap() error { return e.Cause }

// AsError returns err as a gateway *Error, wrapping anything else as an
// internal error whose cause stays private.
func AsError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return &Error{Kind: KindInternal, Status: http.StatusInternalServerError,
		Type: "server_error", Message: "internal gateway error", Cause: err}
}

// BadRequest builds a 400 invalid_request_error.
func BadRequest(param, code, format string, args ...any) *Error {
	return &Error{Kind: KindBadRequest, Status: http.StatusBadRequest, Type: "invalid_request_error",
		Code: code, Param: param, Message: fmt.Sprintf(format, args...)}
}

// ModelNotFound is the 404 OpenAI sends for a model that does not exist.
func ModelNotFound(model string) *Error {
	return &Error{Kind: KindNotFound, Status: http.StatusNotFound, Type: "invalid_request_error",
		Code: "model_not_found", Param: "model",
		Message: fmt.Sprintf("The model '%s' does not exist or you do not have access to it.", model)}
}

// AppendOpenAI appends e as OpenAI's error body:
// {"error":{"message":…,"type":…,"param":…,"code":…}}.
func (e *Error) AppendOpenAI(b []byte) []byte {
	typ := e.Type
	if typ == "" {
		typ = DefaultErrorType(e.Status)
	}
	b = append(b, `{"error":{"message":`...)
	b = AppendQuote(b, e.Message)
	b = append(b, `,"type":`...)
	b = AppendQuote(b, typ)
	b = append(b, `,"param":`...)
	b = appendNullable(b, e.Param)
	b = append(b, `,"code":`...)
	b = appendNullable(b, e.Code)
	return append(b, "}}"...)
}

// WriteOpenAI writes e to w as an OpenAI error response.
func (e *Error) WriteOpenAI(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	if e.RetryAfter > 0 {
		h.Set("Retry-After", strconv.FormatInt(int64((e.RetryAfter+time.Second-1)/time.Second), 10))
	}
	status := e.Status
	if status == 0 {
		status = http.StatusInternalServerError
	}
	w.WriteHeader(status)
	_, _ = w.Write(e.AppendOpenAI(make([]byte, 0, 128+len(e.Message))))
}

// DefaultErrorType is OpenAI's error type for a status, for errors that
// do not name one.
func DefaultErrorType(status int) string {
	switch {
	case status == http.StatusUnauthorized:
		return "authentication_error"
	case status == http.StatusForbidden:
		return "permission_error"
	case status == http.StatusTooManyRequests:
		return "rate_limit_error"
	case status >= 500:
		return "server_error"
	}
	return "invalid_request_error"
}

func appendNullable(b []byte, s string) []byte {
	if s == "" {
		return append(b, "null"...)
	}
	return AppendQuote(b, s)
}

// plainWord reports whether the eight bytes of v are all ASCII that a
// JSON string holds as it is: none at 0x80 or above, none below 0x20,
// no '"' and no '\\'. Each test is the classic bit trick on the bytes as
// one word — (v - 0x01…) & ^v & 0x80… is not zero exactly when a byte of
// v is zero — so a run of plain text costs a few instructions a word
// instead of four compares a byte.
func plainWord(v uint64) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	quote, backslash := v^(ones*'"'), v^(ones*'\\')
	// v - 0x20… borrows into a byte's top bit exactly when some byte is
	// below 0x20, given that no byte has its top bit set (v & highs).
	special := (v-ones*0x20)&^v | (quote-ones)&^quote | (backslash-ones)&^backslash
	return (special|v)&highs == 0
}

// word reads the eight bytes of w (at least eight long) as one
// little-endian word: the compiler makes it a single load.
func word(w string) uint64 {
	w = w[:8]
	return uint64(w[0]) | uint64(w[1])<<8 | uint64(w[2])<<16 | uint64(w[3])<<24 |
		uint64(w[4])<<32 | uint64(w[5])<<40 | uint64(w[6])<<48 | uint64(w[7])<<56
}

// AppendQuote appends s as a JSON string. Unlike strconv.Quote it produces
// JSON escapes, and it leaves valid UTF-8 unescaped but for U+2028 and
// U+2029; its output is byte for byte what log/slog's JSON handler writes
// for s.
func AppendQuote(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		// Eight bytes at a time while none needs a look (plainWord):
		// IDs, paths and prose are almost all such bytes.
		for i+8 <= len(s) && plainWord(word(s[i:])) {
			i += 8
		}
		if i >= len(s) {
			break
		}
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < 0x80 {
			i++
			continue
		}
		if c < 0x80 {
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i++
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			// Valid JSON either way, but JavaScript before ES2019 ends a
			// line at them, and log/slog and encoding/json escape them:
			// the request log line stays byte-identical to slog's.
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
