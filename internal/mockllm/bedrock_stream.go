package mockllm

import (
	"encoding/binary"
	"hash/crc32"
	"net/http"
	"strings"
	"time"

	"gatehouse/internal/llm"
)

// The AWS event-stream framing ConverseStream answers in
// (application/vnd.amazon.eventstream), written from its documented
// layout: every message is
//
//	total length (uint32) | headers length (uint32) | prelude CRC32
//	headers | payload | message CRC32
//
// big-endian, CRC32 being IEEE over everything before it. A header is a
// name length (uint8), the name, a value type (7 = string), a value length
// (uint16) and the value.

var hdrAmzEventStream = []string{"application/vnd.amazon.eventstream"}

const eventHeaderString = 7

// appendEventMessage appends one framed message.
func appendEventMessage(b []byte, headers [][2]string, payload []byte) []byte {
	start := len(b)
	b = append(b, make([]byte, 12)...) // prelude, filled in below
	hs := len(b)
	for _, h := range headers {
		b = append(b, byte(len(h[0])))
		b = append(b, h[0]...)
		b = append(b, eventHeaderString)
		b = binary.BigEndian.AppendUint16(b, uint16(len(h[1])))
		b = append(b, h[1]...)
	}
	headersLen := len(b) - hs
	b = append(b, payload...)
	total := len(b) - start + 4
	binary.BigEndian.PutUint32(b[start:], uint32(total))
	binary.BigEndian.PutUint32(b[start+4:], uint32(headersLen))
	binary.BigEndian.PutUint32(b[start+8:], crc32.ChecksumIEEE(b[start:start+8]))
	return binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(b[start:]))
}

// appendEvent appends a ConverseStream event of the given type.
func appendEvent(b []byte, eventType string, payload []byte) []byte {
	return appendEventMessage(b, [][2]string{
		{":event-type", eventType}, {":content-type", "application/json"}, {":message-type", "event"},
	}, payload)
}

// appendException appends an exception message, as Bedrock sends a
// throttling or model error that happens after the stream started.
func appendException(b []byte, exceptionType, message string) []byte {
	payload := append([]byte(`{"message":`), llm.AppendQuote(nil, message)...)
	return appendEventMessage(b, [][2]string{
		{":exception-type", exceptionType}, {":content-type", "application/json"}, {":message-type", "exception"},
	}, append(payload, '}'))
}

// padding is the "p" member Bedrock adds to every event so that payload
// sizes do not reveal the text; its length varies with the event.
const padding = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0"

func appendPadding(b []byte, n int) []byte {
	b = append(b, `"p":"`...)
	b = append(b, padding[:1+n%(len(padding)-1)]...)
	return append(b, '"')
}

// exceptionType is the stream exception name for a status: the
// lower-camel-case member of ConverseStreamOutput.
func exceptionType(status int) string {
	t := bedrockInjected(status, "").typ
	return strings.ToLower(t[:1]) + t[1:]
}

// converseStream writes the ConverseStream answer: messageStart, the
// content block(s) in deltas paced like the OpenAI stream, messageStop and
// metadata with usage. fail_after cuts the connection after that many
// deltas — or, when exception is set, sends the injected error_status as
// an exception event.
func (c *call) converseStream(x *brExchange, p *plan, exception bool) {
	if !c.wait(p.ttft) {
		return
	}
	h := c.w.Header()
	h["Content-Type"] = hdrAmzEventStream
	h["X-Amzn-Requestid"] = []string{c.reqID}
	c.w.WriteHeader(http.StatusOK)

	var b, payload []byte
	payload = append(payload[:0], '{')
	payload = appendPadding(payload, 3)
	payload = append(payload, `,"role":"assistant"}`...)
	if !c.write(appendEvent(b[:0], "messageStart", payload)) {
		return
	}
	var pieces []string
	var weights []int // tokens per piece, for pacing
	block := 0
	if x.toolID != "" {
		pieces = argPieces(x.toolArgs, p.chunks)
		for range pieces {
			weights = append(weights, 1)
		}
		payload = append(payload[:0], `{"contentBlockIndex":0,`...)
		payload = appendPadding(payload, 5)
		payload = append(payload, `,"start":{"toolUse":{"name":`...)
		payload = llm.AppendQuote(payload, x.toolName)
		payload = append(payload, `,"toolUseId":`...)
		payload = llm.AppendQuote(payload, x.toolID)
		payload = append(payload, `}}}`...)
		if !c.write(appendEvent(b[:0], "contentBlockStart", payload)) {
			return
		}
	} else {
		tokens := x.completionTokens()
		n := min(p.chunks, tokens)
		for i := range n {
			lo, hi := tokens*i/n, tokens*(i+1)/n
			pieces = append(pieces, x.reply[x.cuts[lo]:x.cuts[hi]])
			weights = append(weights, hi-lo)
		}
	}
	for i := 0; ; i++ {
		if i == p.failAfter || (i == len(pieces) && p.failAfter > len(pieces)) {
			if exception {
				c.outcome = outcomeError
				c.write(appendException(b[:0], exceptionType(p.errorStatus), bedrockInjected(p.errorStatus, "").message))
				return
			}
			c.breakOff(true)
		}
		if i == p.stallAfter || (i == len(pieces) && p.stallAfter > len(pieces)) {
			c.breakOff(false)
			return
		}
		if i == len(pieces) {
			break
		}
		if i > 0 && p.tps > 0 && !c.wait(time.Duration(float64(weights[i])/p.tps*float64(time.Second))) {
			return
		}
		payload = append(payload[:0], `{"contentBlockIndex":`...)
		payload = appendInt(payload, int64(block))
		if x.toolID != "" {
			payload = append(payload, `,"delta":{"toolUse":{"input":`...)
			payload = llm.AppendQuote(payload, pieces[i])
			payload = append(payload, `}},`...)
		} else {
			payload = append(payload, `,"delta":{"text":`...)
			payload = llm.AppendQuote(payload, pieces[i])
			payload = append(payload, `},`...)
		}
		payload = appendPadding(payload, len(pieces[i]))
		b = appendEvent(b[:0], "contentBlockDelta", append(payload, '}'))
		if !c.write(b) {
			return
		}
	}
	payload = append(payload[:0], `{"contentBlockIndex":0,`...)
	payload = appendPadding(payload, 7)
	if !c.write(appendEvent(b[:0], "contentBlockStop", append(payload, '}'))) {
		return
	}
	payload = append(payload[:0], '{')
	payload = appendPadding(payload, 11)
	payload = append(payload, `,"stopReason":`...)
	payload = llm.AppendQuote(payload, x.finish)
	if !c.write(appendEvent(b[:0], "messageStop", append(payload, '}'))) {
		return
	}
	out := x.completionTokens()
	if x.toolID != "" {
		out = len(pieces)
	}
	payload = append(payload[:0], `{"metrics":{"latencyMs":`...)
	payload = appendInt(payload, time.Since(c.received).Milliseconds())
	payload = append(payload, `},`...)
	payload = appendPadding(payload, 13)
	payload = append(payload, `,"usage":`...)
	payload = appendBedrockUsage(payload, x.promptTokens, out)
	if c.write(appendEvent(b[:0], "metadata", append(payload, '}'))) {
		c.outcome = outcomeCompleted
	}
}
