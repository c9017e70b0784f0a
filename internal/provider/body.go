package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"gatehouse/internal/llm"
)

// MaxResponseBytes bounds a non-streamed upstream body the gateway holds
// when the deployment sets no bound of its own.
const MaxResponseBytes = 64 << 20

// ResponseLimit is the most bytes of a non-streamed upstream body the
// gateway holds for d: d.MaxResponseBytes, or MaxResponseBytes when unset.
func (d *Deployment) ResponseLimit() int64 {
	if d.MaxResponseBytes > 0 {
		return d.MaxResponseBytes
	}
	return MaxResponseBytes
}

// ReadBody reads a whole upstream body, refusing more than limit bytes:
// a larger one is a 502 naming the limit, and the rest is not read. A
// Content-Length over the limit is refused before any of the body is
// read, so an announced enormous answer costs the gateway nothing.
//
// A body of known length is read into one buffer of that length and a
// byte, allocated once: net/http hands the last bytes and io.EOF over
// together, so the spare byte is never grown into. (bytes.Buffer's
// ReadFrom would grow even an exactly presized buffer to keep 512 bytes
// free for the read that finds the end: a second allocation and a copy
// of every answer.) The buffer has llm.SpliceRoom more past that byte,
// so that the gateway writes an answer's cost into it in place
// (llm.SetUsageCostOwned) rather than copying the answer.
func ReadBody(resp *http.Response, limit int64) ([]byte, error) {
	defer resp.Body.Close()
	if resp.ContentLength > limit {
		return nil, tooLarge(limit, resp.ContentLength)
	}
	size := 512
	if resp.ContentLength > 0 {
		size = int(resp.ContentLength) + 1 + llm.SpliceRoom
	}
	buf, err := readAll(resp.Body, make([]byte, 0, size), limit+1)
	if err != nil {
		return nil, err
	}
	if int64(len(buf)) > limit {
		return nil, tooLarge(limit, -1)
	}
	return buf, nil
}

// readAll appends r's bytes to buf until io.EOF or until buf holds max
// bytes, growing buf only when it is full.
func readAll(r io.Reader, buf []byte, max int64) ([]byte, error) {
	for int64(len(buf)) < max {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		free := buf[len(buf):cap(buf)]
		if left := max - int64(len(buf)); int64(len(free)) > left {
			free = free[:left]
		}
		n, err := r.Read(free)
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
	}
	return buf, nil
}

// CodeResponseTooLarge is the error code of an upstream answer over the
// deployment's bound. The same request on the same deployment would come
// back just as large, so the router moves on without retrying it there.
const CodeResponseTooLarge = "upstream_response_too_large"

// tooLarge is the 502 for a body over limit bytes; announced is its
// Content-Length, or -1 when it was found by reading.
func tooLarge(limit, announced int64) *llm.Error {
	cause := fmt.Errorf("upstream response larger than %d bytes", limit)
	if announced >= 0 {
		cause = fmt.Errorf("upstream response of %d bytes (Content-Length), the limit is %d", announced, limit)
	}
	return &llm.Error{Kind: llm.KindUpstreamProtocol, Status: http.StatusBadGateway, Type: "server_error",
		Code: CodeResponseTooLarge, Message: "The provider's response is larger than the gateway's limit of " + strconv.FormatInt(limit, 10) + " bytes.",
		Cause: cause}
}

// RetryAfter reads how long a provider asked us to wait, from Retry-After
// (seconds or an HTTP date) or OpenAI's retry-after-ms.
func RetryAfter(h http.Header, now time.Time) time.Duration {
	if ms := h.Get("retry-after-ms"); ms != "" {
		if v, err := strconv.ParseFloat(ms, 64); err == nil && v > 0 {
			return time.Duration(v * float64(time.Millisecond))
		}
	}
	v := h.Get("Retry-After")
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		if s <= 0 {
			return 0
		}
		return time.Duration(s * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// StatusError builds the gateway error for a provider's non-2xx answer,
// keeping its status, message, type and code. It understands OpenAI's
// {"error":{…}} and the common variants other servers send.
func StatusError(provider string, resp *http.Response, body []byte) *llm.Error {
	e := &llm.Error{Kind: llm.KindUpstreamStatus, Status: resp.StatusCode,
		RetryAfter: RetryAfter(resp.Header, time.Now())}
	var wire struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
		Detail  json.RawMessage `json:"detail"`
	}
	if json.Unmarshal(body, &wire) == nil {
		var obj struct {
			Message string          `json:"message"`
			Type    string          `json:"type"`
			Code    json.RawMessage `json:"code"`
			Param   string          `json:"param"`
		}
		switch {
		case llm.KindOf(wire.Error) == llm.KindObject && json.Unmarshal(wire.Error, &obj) == nil:
			e.Message, e.Type, e.Param = obj.Message, obj.Type, obj.Param
			e.Code = rawCode(obj.Code)
		case llm.KindOf(wire.Error) == llm.KindString:
			e.Message, _ = llm.UnquoteString(wire.Error)
		case wire.Message != "":
			e.Message = wire.Message
		case llm.KindOf(wire.Detail) == llm.KindString:
			e.Message, _ = llm.UnquoteString(wire.Detail)
		}
	}
	if e.Message == "" {
		snippet := bytes.TrimSpace(body)
		if len(snippet) > 512 {
			snippet = snippet[:512]
		}
		e.Message = fmt.Sprintf("provider %q answered %d: %s", provider, resp.StatusCode, snippet)
	}
	if resp.StatusCode < 400 {
		// A 1xx/3xx is not something a client of an API can act on.
		e.Status, e.Type, e.Code = http.StatusBadGateway, "server_error", "upstream_error"
		if resp.StatusCode >= 300 {
			// Not followed: see Registry.Deployment's client.
			e.Message = fmt.Sprintf("provider %q answered with a redirect (%d), which the gateway does not follow: check its base_url", provider, resp.StatusCode)
		}
	}
	e.Cause = fmt.Errorf("provider %q status %d", provider, resp.StatusCode)
	return e
}

func rawCode(raw json.RawMessage) string {
	switch llm.KindOf(raw) {
	case llm.KindString:
		s, _ := llm.UnquoteString(raw)
		return s
	case llm.KindNumber:
		return string(raw)
	}
	return ""
}

// NewRequest builds an upstream request carrying the caller's ctx (so a
// client hang-up cancels it), the deployment's configured headers, and
// Accept; with a body it is JSON. Adapters add their own credentials.
func NewRequest(ctx context.Context, d *Deployment, method, url string, body []byte, accept string) (*http.Request, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	r, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return nil, fmt.Errorf("provider %q: build request: %w", d.Provider, err)
	}
	h := r.Header
	for k, v := range d.Header {
		h[k] = v
	}
	// Stored under their canonical names directly: Header.Set would
	// canonicalise the constant names again on every request.
	if body != nil {
		h[HeaderContentType] = []string{"application/json"}
	}
	h[HeaderAccept] = []string{accept}
	return r, nil
}

// Canonical names of the headers every upstream request carries, for
// adapters to set directly (see NewRequest).
const (
	HeaderContentType   = "Content-Type"
	HeaderAccept        = "Accept"
	HeaderAuthorization = "Authorization"
)
