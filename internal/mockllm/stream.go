package mockllm

import (
	"net/http"
	"time"

	"gatehouse/internal/llm"
)

// stream writes the reply as chat.completion.chunk server-sent events:
// a role chunk, the content chunks, a chunk with finish_reason, with
// include_usage a usage chunk whose choices are empty, and [DONE].
//
// It is the benchmark hot path, so every event is appended into one
// reused buffer after a prefix (id, created, model …) built once per
// request: no encoding/json and no allocation per chunk.
func (c *call) stream(x *exchange, p *plan, b []byte) []byte {
	if !c.wait(p.ttft) || !c.read(p, x.promptTokens) {
		return b
	}
	b, prefix := c.startChunks(x, b)

	b = append(b, `{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}]`...)
	if !c.write(endChunk(b, x)) {
		return b
	}

	tokens := x.completionTokens()
	n := min(p.chunks, tokens)
	for i := 0; ; i++ {
		if i == p.failAfter || (i == n && p.failAfter > n) {
			c.breakOff(true)
		}
		if i == p.stallAfter || (i == n && p.stallAfter > n) {
			c.breakOff(false)
			return b
		}
		if i == n {
			break
		}
		lo, hi := tokens*i/n, tokens*(i+1)/n
		// The first content chunk leaves with the role chunk: TTFT is the
		// time to the first token, and pacing starts after it.
		if i > 0 && p.tps > 0 && !c.wait(time.Duration(float64(hi-lo)/p.tps*float64(time.Second))) {
			return b
		}
		if !c.generate(p, hi-lo) {
			return b
		}
		b = append(b[:prefix], `{"index":0,"delta":{"content":`...)
		b = llm.AppendQuote(b, x.reply[x.cuts[lo]:x.cuts[hi]])
		b = append(b, `},"logprobs":null,"finish_reason":null}]`...)
		if !c.write(endChunk(b, x)) {
			return b
		}
	}

	b = append(b[:prefix], `{"index":0,"delta":{},"logprobs":null,"finish_reason":"`...)
	b = append(b, x.finish...)
	b = append(b, `"}]`...)
	if !c.write(endChunk(b, x)) {
		return b
	}
	if x.includeUsage {
		b = append(b[:prefix], `],"usage":`...)
		b = appendUsage(b, x.promptTokens, tokens)
		b = append(b, "}\n\n"...)
		if !c.write(b) {
			return b
		}
	}
	if c.write(done) {
		c.outcome = outcomeCompleted
	}
	return b
}

var done = []byte("data: [DONE]\n\n")

// endChunk closes a chunk event. With include_usage every chunk carries
// "usage":null, as OpenAI documents, so clients can rely on the key.
func endChunk(b []byte, x *exchange) []byte {
	if x.includeUsage {
		b = append(b, `,"usage":null`...)
	}
	return append(b, "}\n\n"...)
}

// startChunks sends the headers of an OpenAI stream and appends to b the
// part every chunk of this reply shares (data: {"id":…,"choices":[),
// returning its length: chunks are built by appending after it.
func (c *call) startChunks(x *exchange, b []byte) ([]byte, int) {
	h := c.w.Header()
	h["Content-Type"] = hdrEventStream
	h["Cache-Control"] = hdrNoCache
	c.setCommonHeaders(h)
	c.w.WriteHeader(http.StatusOK)

	b = append(b, `data: {"id":"`...)
	b = appendCompletionID(b)
	b = append(b, `","object":"chat.completion.chunk","created":`...)
	b = appendInt(b, time.Now().Unix())
	b = append(b, `,"model":`...)
	b = llm.AppendQuote(b, x.model)
	b = append(b, `,"service_tier":"`+serviceTier+`","system_fingerprint":"`+systemFingerprint+`","choices":[`...)
	return b, len(b)
}
