package mockllm

import (
	"net/http"
	"time"

	"gatehouse/internal/llm"
)

// respStream writes the server-sent events of a streamed response: each
// an "event:" line naming its type and a "data:" line whose object starts
// with the same type and a sequence number counting from 0. The Responses
// stream ends with its terminal event; it has no [DONE].
type respStream struct {
	c      *call
	x      *respExchange
	p      *plan
	b      []byte
	seq    int64
	chunks int // content deltas sent, what stall_after and fail_after count
}

// begin starts an event in s.b; fields are appended after it and send
// closes it.
func (s *respStream) begin(typ string) {
	s.b = append(s.b[:0], "event: "...)
	s.b = append(s.b, typ...)
	s.b = append(s.b, "\ndata: {\"type\":\""...)
	s.b = append(s.b, typ...)
	s.b = append(s.b, `","sequence_number":`...)
	s.b = appendInt(s.b, s.seq)
}

// beginItem starts an event about output item i: item_id, output_index.
func (s *respStream) beginItem(typ string, i int) {
	s.begin(typ)
	s.b = append(s.b, `,"item_id":`...)
	s.b = llm.AppendQuote(s.b, s.x.items[i].id)
	s.b = append(s.b, `,"output_index":`...)
	s.b = appendInt(s.b, int64(i))
}

// send closes the event and writes it; false means the client is gone.
func (s *respStream) send() bool {
	s.b = append(s.b, "}\n\n"...)
	s.seq++
	return s.c.write(s.b)
}

func (s *respStream) sendResponse(typ, status string) bool {
	s.begin(typ)
	s.b = append(s.b, `,"response":`...)
	s.b = s.x.appendResponse(s.b, status)
	return s.send()
}

// sendItem announces output item i (done=false) or finishes it.
func (s *respStream) sendItem(i int, done bool) bool {
	typ := "response.output_item.added"
	if done {
		typ = "response.output_item.done"
	}
	s.begin(typ)
	s.b = append(s.b, `,"output_index":`...)
	s.b = appendInt(s.b, int64(i))
	s.b = append(s.b, `,"item":`...)
	s.b = s.x.appendItem(s.b, &s.x.items[i], done)
	return s.send()
}

// streamResponse streams the answer in the order OpenAI documents:
// response.created and response.in_progress, the events of each output
// item, then response.completed (or response.incomplete) carrying the
// whole response with its usage.
func (c *call) streamResponse(x *respExchange, p *plan) {
	if !c.wait(p.ttft) || !c.read(p, x.inputTokens) {
		return
	}
	h := c.w.Header()
	h["Content-Type"] = hdrEventStream
	h["Cache-Control"] = hdrNoCache
	c.setCommonHeaders(h)
	c.w.WriteHeader(http.StatusOK)

	bp := c.s.bufs.Get().(*[]byte)
	defer c.s.putBuf(bp)
	s := &respStream{c: c, x: x, p: p, b: (*bp)[:0]}
	defer func() { *bp = s.b }()
	if !s.sendResponse("response.created", "in_progress") || !s.sendResponse("response.in_progress", "in_progress") {
		return
	}
	for i := range x.items {
		var ok bool
		switch x.items[i].typ {
		case "reasoning":
			ok = s.reasoning(i)
		case "message":
			ok = s.message(i)
		default:
			ok = s.functionCall(i)
		}
		if !ok {
			return
		}
	}
	// Directives past the last content delta break the stream before
	// its terminal event.
	if p.failAfter >= 0 || p.stallAfter >= 0 {
		c.breakOff(p.failAfter >= 0)
		return
	}
	typ := "response.completed"
	if x.incomplete {
		typ = "response.incomplete"
	}
	if s.sendResponse(typ, x.status()) {
		c.outcome = outcomeCompleted
	}
}

// reasoning streams a reasoning item, with its summary when one was asked
// for. The reasoning is generated before the item is done.
func (s *respStream) reasoning(i int) bool {
	o := &s.x.items[i]
	if !s.sendItem(i, false) {
		return false
	}
	if !s.c.generate(s.p, s.x.reasoningTokens) {
		return false
	}
	if o.text != "" {
		s.beginItem("response.reasoning_summary_part.added", i)
		s.b = append(s.b, `,"summary_index":0,"part":`...)
		s.b = appendSummaryPart(s.b, "")
		if !s.send() {
			return false
		}
		s.beginItem("response.reasoning_summary_text.delta", i)
		s.b = append(s.b, `,"summary_index":0,"delta":`...)
		s.b = llm.AppendQuote(s.b, o.text)
		if !s.send() {
			return false
		}
		s.beginItem("response.reasoning_summary_text.done", i)
		s.b = append(s.b, `,"summary_index":0,"text":`...)
		s.b = llm.AppendQuote(s.b, o.text)
		if !s.send() {
			return false
		}
		s.beginItem("response.reasoning_summary_part.done", i)
		s.b = append(s.b, `,"summary_index":0,"part":`...)
		s.b = appendSummaryPart(s.b, o.text)
		if !s.send() {
			return false
		}
	}
	return s.sendItem(i, true)
}

// message streams a message item: its output_text part opened, the text
// in deltas, then the part and the item closed.
func (s *respStream) message(i int) bool {
	o := &s.x.items[i]
	if !s.sendItem(i, false) {
		return false
	}
	s.beginItem("response.content_part.added", i)
	s.b = append(s.b, `,"content_index":0,"part":`...)
	s.b = appendOutputText(s.b, "")
	if !s.send() || !s.deltas(i, "response.output_text.delta") {
		return false
	}
	s.beginItem("response.output_text.done", i)
	s.b = append(s.b, `,"content_index":0,"text":`...)
	s.b = llm.AppendQuote(s.b, o.text)
	s.b = append(s.b, `,"logprobs":[]`...)
	if !s.send() {
		return false
	}
	s.beginItem("response.content_part.done", i)
	s.b = append(s.b, `,"content_index":0,"part":`...)
	s.b = appendOutputText(s.b, o.text)
	return s.send() && s.sendItem(i, true)
}

// functionCall streams a function_call item: announced with empty
// arguments, which then arrive in deltas.
func (s *respStream) functionCall(i int) bool {
	o := &s.x.items[i]
	if !s.sendItem(i, false) || !s.deltas(i, "response.function_call_arguments.delta") {
		return false
	}
	s.beginItem("response.function_call_arguments.done", i)
	s.b = append(s.b, `,"arguments":`...)
	s.b = llm.AppendQuote(s.b, o.text)
	return s.send() && s.sendItem(i, true)
}

// deltas sends item i's text in at most p.chunks deltas of whole tokens,
// paced at p.tps after the first, and breaks the stream where stall_after
// or fail_after say.
func (s *respStream) deltas(i int, typ string) bool {
	o, p := &s.x.items[i], s.p
	tokens := o.tokens()
	n := min(p.chunks, tokens)
	for k := range n {
		if s.chunks == p.failAfter || s.chunks == p.stallAfter {
			s.c.breakOff(s.chunks == p.failAfter)
			return false
		}
		lo, hi := tokens*k/n, tokens*(k+1)/n
		if s.chunks > 0 && p.tps > 0 && !s.c.wait(time.Duration(float64(hi-lo)/p.tps*float64(time.Second))) {
			return false
		}
		if !s.c.generate(p, hi-lo) {
			return false
		}
		s.beginItem(typ, i)
		if o.typ == "message" {
			s.b = append(s.b, `,"content_index":0`...)
		}
		s.b = append(s.b, `,"delta":`...)
		s.b = llm.AppendQuote(s.b, o.text[o.cuts[lo]:o.cuts[hi]])
		if o.typ == "message" {
			s.b = append(s.b, `,"logprobs":[]`...)
		}
		if !s.send() {
			return false
		}
		s.chunks++
	}
	return true
}
