package mockllm

import (
	"bytes"
	"encoding/json"
	"net"
	"net/http"
	"strings"

	"gatehouse/internal/llm"
)

// The upstream faults a gateway must survive beyond a slow or silent
// upstream, each set per request like the other overrides (plan.go):
//
//	truncate[=N]      the answer ends early: a non-streamed body is cut
//	                  halfway under the Content-Length of the whole body and
//	                  the connection closed; a stream sends half of its
//	                  event N+1 and then ends cleanly, without its
//	                  terminating event.
//	malformed[=N]     a syntactically broken event is sent before event
//	                  N+1 (bad JSON in an SSE data line, a broken NDJSON
//	                  line, an event-stream frame whose CRC is wrong), and
//	                  the stream then goes on as if nothing happened; a
//	                  non-streamed body is cut halfway under a Content-Length
//	                  that matches, so only the JSON is broken.
//	error_in_200[=N]  HTTP 200 whose body, or whose stream after N events,
//	                  is the provider's own error object: OpenAI's
//	                  {"error":…}, Anthropic's "event: error", Google's
//	                  error JSON, Ollama's {"error":…} line, Bedrock's
//	                  exception message.
//	huge=N            the reply text is N bytes, streamed or not; an
//	                  embedding answer is N bytes (its vectors as long as
//	                  fit, spaces for the rest), or its usual size when
//	                  that is more.
//	reset_after=N     as fail_after=N, but the connection is reset (TCP RST)
//	                  instead of closed: the client reads ECONNRESET. An
//	                  embedding answer, which has no chunks, is cut halfway
//	                  whatever N (so are fail_after and stall_after).
//
// N counts the events written after the headers (for truncate, malformed
// and error_in_200; 0 when omitted) or the content chunks (reset_after, as
// fail_after).

// fault is a write-level fault armed on a call.
type fault uint8

const (
	faultNone fault = iota
	faultTruncate
	faultMalformed
	faultErrorIn200
)

// maxHuge bounds huge=N, so a typo cannot exhaust the mock's memory.
const maxHuge = 1 << 30

// setFault parses the value of a fault directive: empty or true is 0,
// false switches the fault off.
func (p *plan) setFault(f fault, v string) error {
	switch strings.ToLower(v) {
	case "", "true":
		p.fault, p.faultAt = f, 0
		return nil
	case "false":
		if p.fault == f {
			p.fault = faultNone
		}
		return nil
	}
	n, err := parseInt(v, 0, 1<<20)
	if err == nil {
		p.fault, p.faultAt = f, n
	}
	return err
}

// armCut makes stall_after, fail_after and reset_after apply to an answer
// that has no chunks to count (embeddings): whatever N, half the body is
// sent under the whole one's Content-Length, then the call goes silent,
// closes or resets the connection, as a non-streamed chat answer does.
func (c *call) armCut(p *plan) {
	c.cut, c.cutAbort = p.stallAfter >= 0 || p.failAfter >= 0, p.failAfter >= 0
}

// hugeAnswer is an embedding answer of exactly N bytes under huge=N:
// build(d) writes the answer with d dimensions a vector, and hugeAnswer
// takes dimensions whose answer fills between 95% and 100% of N bytes,
// then fills the rest with spaces before the answer's closing brace (JSON
// allows them there). Without huge=N, or when the answer at dims already
// takes N bytes or more, it is build(dims).
//
// An answer's length grows with its dimensions almost in proportion (a
// float's text gets a little shorter as a unit vector's components get
// smaller), so a secant step from the usual answer usually lands in the
// window at the first large build, and rarely needs a second: a 4 MB
// answer costs about what one did when huge=N only meant "at least".
func (p *plan) hugeAnswer(dims int, build func(dims int) []byte) []byte {
	best := build(dims)
	if p.huge <= len(best) {
		return best
	}
	low, target := p.huge-p.huge/20, p.huge-p.huge/40
	loDims, loLen := dims, len(best)
	hiDims, hiLen := 0, 0 // no answer over N yet
	for range 30 {
		var d int
		if hiDims == 0 {
			// Upward from the largest answer that fits, as if its length
			// were all dimensions: that over-estimates the step by a few
			// percent, so this aims lower.
			d = loDims + int(int64(max(loDims, 1))*int64(p.huge-p.huge/25-loLen)/int64(max(loLen, 1)))
		} else {
			d = loDims + int(int64(hiDims-loDims)*int64(target-loLen)/int64(hiLen-loLen))
		}
		if hiDims != 0 {
			d = min(d, hiDims-1)
		}
		d = max(d, loDims+1)
		if hiDims != 0 && d >= hiDims {
			break
		}
		b := build(d)
		if len(b) > p.huge {
			hiDims, hiLen = d, len(b)
			continue
		}
		best, loDims, loLen = b, d, len(b)
		if loLen >= low {
			break
		}
	}
	end := bytes.LastIndexByte(best, '}')
	out := make([]byte, 0, p.huge)
	out = append(out, best[:end]...)
	for range p.huge - len(best) {
		out = append(out, ' ')
	}
	return append(out, best[end:]...)
}

// arm makes the call's writes carry out p's fault.
func (c *call) arm(p *plan) {
	c.fault, c.faultAt, c.reset = p.fault, p.faultAt, p.reset
}

// strike runs in write when the armed stream fault is due, with the event
// about to be written. It reports whether the handler may go on.
func (c *call) strike(b []byte) bool {
	f := c.fault
	c.fault = faultNone
	switch f {
	case faultMalformed:
		if !c.write(c.malformedEvent()) {
			return false
		}
		return c.write(b)
	case faultErrorIn200:
		ok := c.write(c.errorEvent())
		if ok {
			c.outcome = outcomeError
		}
		return false
	case faultTruncate:
		if c.write(b[:len(b)/2]) {
			c.outcome = outcomeError
		}
		return false
	}
	return c.write(b)
}

// wholeFault replaces a successful non-streamed answer when a fault is
// armed; it reports whether it answered.
func (c *call) wholeFault(status int, body []byte) bool {
	h := c.w.Header()
	switch {
	case status >= 400:
		return false
	case c.fault == faultErrorIn200:
		c.fault = faultNone
		c.writeWhole(http.StatusOK, c.errorBody())
		c.outcome = outcomeError
		return true
	case c.fault == faultMalformed:
		c.fault = faultNone
		c.writeWhole(http.StatusOK, body[:len(body)/2])
		c.outcome = outcomeError
		return true
	case c.fault == faultTruncate:
		c.fault = faultNone
		h["Content-Length"] = []string{itoa(len(body))}
		c.w.WriteHeader(status)
		if c.write(body[:len(body)/2]) {
			c.breakOff(true)
		}
		return true
	}
	return false
}

// breakOff ends a response on purpose: abort cuts the connection (the
// client reads an unexpected EOF, or ECONNRESET after reset_after),
// otherwise the response goes silent until the client gives up.
func (c *call) breakOff(abort bool) {
	if !abort {
		c.block()
		return
	}
	c.outcome = outcomeError
	if c.reset {
		c.resetConn()
	}
	panic(http.ErrAbortHandler)
}

// resetConn takes the connection over and closes it with SO_LINGER 0, so
// the kernel sends RST instead of FIN. What was written so far is flushed
// first: the client sees the bytes, then the reset.
func (c *call) resetConn() {
	conn, _, err := c.rc.Hijack()
	if err != nil {
		return // HTTP/2: the abort panic resets the stream instead
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}

// geminiArray reports whether a Gemini stream is a JSON array (no alt=sse).
func (c *call) geminiArray() bool {
	return c.r.URL.Query().Get("alt") != "sse"
}

const faultMessage = "mockllm injected fault: the model failed while generating."

// malformedEvent is a broken event in the call's stream framing.
func (c *call) malformedEvent() []byte {
	switch c.dialect {
	case "anthropic":
		return []byte("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"brok\n\n")
	case "gemini":
		if c.geminiArray() {
			return []byte(",\r\n{\n  \"candidates\": [\n    {\n      \"content\": {\"parts\": [{\"text\": \"brok")
		}
		return []byte("data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"brok\r\n\r\n")
	case "ollama":
		return []byte("{\"model\":\"" + c.model + "\",\"created_at\":\"2024-\n")
	case "bedrock":
		b := appendEvent(nil, "contentBlockDelta", []byte(`{"contentBlockIndex":0,"delta":{"text":"brok"},"p":"ab"}`))
		b[len(b)-1] ^= 0xff // the message CRC no longer matches
		return b
	}
	if c.responsesAPI() {
		return []byte("event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"brok\n\n")
	}
	return []byte("data: {\"id\":\"chatcmpl-broken\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"brok\n\n")
}

// errorEvent is the provider's error as its streams carry one.
func (c *call) errorEvent() []byte {
	switch c.dialect {
	case "anthropic":
		return []byte("event: error\ndata: " + string(c.errorBody()) + "\n\n")
	case "gemini":
		if c.geminiArray() {
			return append(append([]byte(",\r\n"), c.errorBody()...), ']')
		}
		var flat bytes.Buffer
		_ = json.Compact(&flat, c.errorBody())
		return append(append([]byte("data: "), googleSpacing(flat.Bytes())...), "\r\n\r\n"...)
	case "ollama":
		return append(c.errorBody(), '\n')
	case "bedrock":
		return appendException(nil, "modelStreamErrorException", faultMessage)
	}
	if c.responsesAPI() {
		b := append([]byte(`event: error`+"\n"+`data: {"type":"error","code":"server_error","message":`), llm.AppendQuote(nil, faultMessage)...)
		return append(b, ",\"param\":null,\"sequence_number\":"+itoa(c.writes)+"}\n\n"...)
	}
	return append(append([]byte("data: "), c.errorBody()...), "\n\n"...)
}

// errorBody is the provider's error object for a failed generation.
func (c *call) errorBody() []byte {
	switch c.dialect {
	case "anthropic":
		b := append([]byte(`{"type":"error","error":{"type":"api_error","message":`), llm.AppendQuote(nil, faultMessage)...)
		b = append(b, `},"request_id":`...)
		return append(llm.AppendQuote(b, c.reqID), '}')
	case "gemini":
		e := &gemError{code: http.StatusInternalServerError, status: gemStatus(500), message: faultMessage}
		return e.body()
	case "ollama":
		return append(llm.AppendQuote([]byte(`{"error":`), faultMessage), '}')
	case "bedrock":
		return append(llm.AppendQuote([]byte(`{"message":`), faultMessage), '}')
	}
	e := &apiError{status: http.StatusInternalServerError, typ: "server_error", message: faultMessage}
	return e.append(nil)
}

func (c *call) responsesAPI() bool {
	return strings.HasSuffix(c.r.URL.Path, "/responses")
}

// hugeReply is a reply text of n bytes: words of a few letters, so it is
// also many tokens.
func hugeReply(n int) string {
	const word = "lorem ipsum dolor sit amet "
	var b strings.Builder
	b.Grow(n)
	for b.Len()+len(word) <= n {
		b.WriteString(word)
	}
	b.WriteString(strings.Repeat("x", n-b.Len()))
	return b.String()
}
