package responses

import (
	"strconv"

	"gatehouse/internal/llm"
)

// Stream translates a backend's OpenAI chunks into the Responses API's
// event stream: response.created and response.in_progress, then for each
// output item its added event, its deltas and its done events, then
// response.completed (or response.incomplete, response.failed) with the
// whole response. Every event carries its sequence_number.
//
// Each event is produced from the chunk that causes it, so the caller can
// write and flush it at once. Only the end waits: the final event carries
// the usage, which OpenAI-style backends send in a chunk after the one
// with finish_reason.
//
// A Stream serves one response and is not safe for concurrent use.
type Stream struct {
	b builder
	// UsageCost, when set, prices the usage for the final event's usage
	// object ("cost", USD).
	UsageCost func(llm.Usage) string
	// OnComplete, when set, is given the finished response (the final
	// event's response object, and the output items with their reasoning
	// proofs) before the final event is written: a stored response is
	// then readable by the time the client has read the stream.
	OnComplete func(*Encoded)

	seq     int
	started bool
	text    *output         // the open message item, if any
	reason  *output         // the open reasoning item, if any
	calls   map[int]*output // chat tool-call index → its item
	index   map[*output]int // item → output_index
	finish  string
	done    bool
	cut     bool // the stream broke: items close as incomplete
	// chunk is the last upstream chunk decoded, its choices reused by
	// the next.
	chunk llm.StreamChunk
}

// NewStream starts a translation for r.
func NewStream(r *Request, m Meta) *Stream {
	return &Stream{b: builder{req: r, meta: m, status: StatusInProgress}}
}

// event appends one event; body is the event's fields after "type" and
// "sequence_number", without braces.
func (s *Stream) event(b []byte, typ string, body func(d []byte) []byte) []byte {
	d := make([]byte, 0, 128)
	d = append(d, `{"type":"`...)
	d = append(d, typ...)
	d = append(d, `","sequence_number":`...)
	d = strconv.AppendInt(d, int64(s.seq), 10)
	s.seq++
	d = body(append(d, ','))
	d = append(d, '}')
	return llm.AppendEvent(b, typ, d)
}

func (s *Stream) snapshot(b []byte, typ string) []byte {
	return s.event(b, typ, func(d []byte) []byte {
		d = append(d, `"response":`...)
		return s.b.appendResponse(d)
	})
}

// Chunk appends the events one upstream chunk causes (possibly none).
func (s *Stream) Chunk(b []byte, c llm.Chunk) ([]byte, error) {
	if s.done {
		return b, nil
	}
	ch := &s.chunk
	if err := llm.DecodeStreamChunk(c.Data, ch); err != nil {
		return b, protocolError("the backend sent a stream chunk that is not valid JSON: %v", err)
	}
	if ch.Model != "" {
		s.b.meta.Model = ch.Model
	}
	if !s.started {
		b = s.start(b)
	}
	if c.Usage != nil {
		u := *c.Usage
		s.b.usage = &u
	}
	for i := range ch.Choices {
		it := &ch.Choices[i]
		if it.Index != 0 {
			continue // one answer is all a Responses request asks for
		}
		var err error
		if b, err = s.delta(b, &it.Delta); err != nil {
			return b, err
		}
		if it.FinishReason != nil && *it.FinishReason != "" {
			s.finish = *it.FinishReason
			b = s.closeAll(b)
		}
	}
	if s.finish != "" && s.b.usage != nil {
		b = s.end(b)
	}
	return b, nil
}

// End appends what closes a stream that ended cleanly.
func (s *Stream) End(b []byte) []byte {
	if !s.started {
		b = s.start(b)
	}
	if s.done {
		return b
	}
	b = s.closeAll(b)
	return s.end(b)
}

// Error appends a failure after the start: the open items close as
// incomplete, then response.failed, the terminal event of a response
// that could not be finished, carries the error.
func (s *Stream) Error(b []byte, e *llm.Error) []byte {
	if !s.started {
		b = s.start(b)
	}
	s.done = true
	s.cut = true
	b = s.closeAll(b) // what was written so far, as incomplete items
	s.b.status = StatusFailed
	code := e.Code
	if code == "" {
		code = "server_error"
	}
	s.b.failure = &llm.Error{Code: code, Message: e.Message}
	return s.snapshot(b, "response.failed")
}

func (s *Stream) start(b []byte) []byte {
	s.started = true
	s.calls = map[int]*output{}
	s.index = map[*output]int{}
	b = s.snapshot(b, "response.created")
	return s.snapshot(b, "response.in_progress")
}

func (s *Stream) delta(b []byte, d *llm.Delta) ([]byte, error) {
	if d.ReasoningContent != "" || d.ReasoningSignature != "" {
		b = s.openReasoning(b)
		if d.ReasoningContent != "" {
			s.reason.text.WriteString(d.ReasoningContent)
			if s.reason.summary {
				b = s.event(b, "response.reasoning_summary_text.delta", func(e []byte) []byte {
					e = s.summaryRef(e, s.reason)
					e = append(e, `,"delta":`...)
					return llm.AppendQuote(e, d.ReasoningContent)
				})
			} else {
				b = s.textDelta(b, "response.reasoning_text.delta", s.reason, d.ReasoningContent)
			}
		}
		s.reason.signature.WriteString(d.ReasoningSignature)
	}
	if d.Content != nil && *d.Content != "" {
		b = s.openMessage(b)
		if s.text.text.Len() == 0 {
			b = s.partAdded(b, s.text, false)
		}
		s.text.text.WriteString(*d.Content)
		b = s.textDelta(b, "response.output_text.delta", s.text, *d.Content)
	}
	if d.Refusal != nil && *d.Refusal != "" {
		b = s.openMessage(b)
		if s.text.refusal.Len() == 0 {
			b = s.partAdded(b, s.text, true)
		}
		s.text.refusal.WriteString(*d.Refusal)
		b = s.event(b, "response.refusal.delta", func(e []byte) []byte {
			e = s.itemRef(e, s.text, s.refusalIndex(s.text))
			e = append(e, `,"delta":`...)
			return llm.AppendQuote(e, *d.Refusal)
		})
	}
	for i := range d.ToolCalls {
		tc := &d.ToolCalls[i]
		if tc.Index < 0 || tc.Index > 1024 {
			return b, protocolError("the backend sent a tool call with index %d", tc.Index)
		}
		o := s.calls[tc.Index]
		if o == nil {
			b = s.closeMessage(b)
			b = s.closeReasoning(b)
			o = s.b.add(kindCall)
			o.callID, o.name = tc.ID, tc.Function.Name
			if o.callID == "" {
				o.callID = "call_" + s.b.suffix() + "_" + strconv.Itoa(tc.Index)
			}
			s.calls[tc.Index] = o
			b = s.added(b, o)
		}
		if a := tc.Function.Arguments; a != "" {
			o.args.WriteString(a)
			b = s.event(b, "response.function_call_arguments.delta", func(e []byte) []byte {
				e = s.itemRef(e, o, -1)
				e = append(e, `,"delta":`...)
				return llm.AppendQuote(e, a)
			})
		}
	}
	return b, nil
}

// itemRef writes item_id and output_index, and content_index when ≥ 0.
func (s *Stream) itemRef(e []byte, o *output, content int) []byte {
	e = append(e, `"item_id":`...)
	e = llm.AppendQuote(e, o.id)
	e = append(e, `,"output_index":`...)
	e = strconv.AppendInt(e, int64(s.index[o]), 10)
	if content >= 0 {
		e = append(e, `,"content_index":`...)
		e = strconv.AppendInt(e, int64(content), 10)
	}
	return e
}

func (s *Stream) textDelta(b []byte, typ string, o *output, text string) []byte {
	return s.event(b, typ, func(e []byte) []byte {
		e = s.itemRef(e, o, 0)
		e = append(e, `,"delta":`...)
		e = llm.AppendQuote(e, text)
		if o.kind == kindMessage {
			e = append(e, `,"logprobs":[]`...)
		}
		return e
	})
}

// refusalIndex is the content index of a message's refusal part: after
// its text part when it has one.
func (s *Stream) refusalIndex(o *output) int {
	if o.text.Len() > 0 {
		return 1
	}
	return 0
}

func (s *Stream) added(b []byte, o *output) []byte {
	s.index[o] = len(s.b.items) - 1
	return s.event(b, "response.output_item.added", func(e []byte) []byte {
		e = append(e, `"output_index":`...)
		e = strconv.AppendInt(e, int64(s.index[o]), 10)
		e = append(e, `,"item":`...)
		return appendItem(e, o, false)
	})
}

func (s *Stream) itemDone(b []byte, o *output) []byte {
	o.done, o.cut = true, s.cut
	return s.event(b, "response.output_item.done", func(e []byte) []byte {
		e = append(e, `"output_index":`...)
		e = strconv.AppendInt(e, int64(s.index[o]), 10)
		e = append(e, `,"item":`...)
		return appendItem(e, o, s.b.req.IncludeEncrypted)
	})
}

func (s *Stream) openReasoning(b []byte) []byte {
	if s.reason != nil {
		return b
	}
	b = s.closeMessage(b)
	s.reason = s.b.add(kindReasoning)
	b = s.added(b, s.reason)
	if s.reason.summary {
		return s.event(b, "response.reasoning_summary_part.added", func(e []byte) []byte {
			e = s.summaryRef(e, s.reason)
			return append(e, `,"part":{"type":"summary_text","text":""}`...)
		})
	}
	return s.event(b, "response.content_part.added", func(e []byte) []byte {
		e = s.itemRef(e, s.reason, 0)
		return append(e, `,"part":{"type":"reasoning_text","text":""}`...)
	})
}

// summaryRef writes item_id, output_index and summary_index (always 0:
// the reasoning is one summary part).
func (s *Stream) summaryRef(e []byte, o *output) []byte {
	e = s.itemRef(e, o, -1)
	return append(e, `,"summary_index":0`...)
}

func (s *Stream) closeReasoning(b []byte) []byte {
	o := s.reason
	if o == nil {
		return b
	}
	s.reason = nil
	if o.summary {
		b = s.event(b, "response.reasoning_summary_text.done", func(e []byte) []byte {
			e = s.summaryRef(e, o)
			e = append(e, `,"text":`...)
			return llm.AppendQuote(e, o.text.String())
		})
		b = s.event(b, "response.reasoning_summary_part.done", func(e []byte) []byte {
			e = s.summaryRef(e, o)
			e = append(e, `,"part":{"type":"summary_text","text":`...)
			e = llm.AppendQuote(e, o.text.String())
			return append(e, '}')
		})
		return s.itemDone(b, o)
	}
	b = s.event(b, "response.reasoning_text.done", func(e []byte) []byte {
		e = s.itemRef(e, o, 0)
		e = append(e, `,"text":`...)
		return llm.AppendQuote(e, o.text.String())
	})
	b = s.event(b, "response.content_part.done", func(e []byte) []byte {
		e = s.itemRef(e, o, 0)
		e = append(e, `,"part":{"type":"reasoning_text","text":`...)
		e = llm.AppendQuote(e, o.text.String())
		return append(e, '}')
	})
	return s.itemDone(b, o)
}

// openMessage opens the message item, and its part for what comes next.
func (s *Stream) openMessage(b []byte) []byte {
	if s.text == nil {
		b = s.closeReasoning(b)
		s.text = s.b.add(kindMessage)
		b = s.added(b, s.text)
	}
	return b
}

// partAdded announces a message's part as its first delta comes: the
// text part, or (rarely) a refusal part.
func (s *Stream) partAdded(b []byte, o *output, refusal bool) []byte {
	return s.event(b, "response.content_part.added", func(e []byte) []byte {
		idx := 0
		if refusal {
			idx = s.refusalIndex(o)
		}
		e = s.itemRef(e, o, idx)
		if refusal {
			return append(e, `,"part":{"type":"refusal","refusal":""}`...)
		}
		return append(e, `,"part":{"type":"output_text","annotations":[],"logprobs":[],"text":""}`...)
	})
}

func (s *Stream) closeMessage(b []byte) []byte {
	o := s.text
	if o == nil {
		return b
	}
	s.text = nil
	if o.text.Len() > 0 || o.refusal.Len() == 0 {
		b = s.event(b, "response.output_text.done", func(e []byte) []byte {
			e = s.itemRef(e, o, 0)
			e = append(e, `,"text":`...)
			e = llm.AppendQuote(e, o.text.String())
			return append(e, `,"logprobs":[]`...)
		})
		b = s.event(b, "response.content_part.done", func(e []byte) []byte {
			e = s.itemRef(e, o, 0)
			e = append(e, `,"part":`...)
			return appendTextPart(e, o.text.String())
		})
	}
	if o.refusal.Len() > 0 {
		idx := s.refusalIndex(o)
		b = s.event(b, "response.refusal.done", func(e []byte) []byte {
			e = s.itemRef(e, o, idx)
			e = append(e, `,"refusal":`...)
			return llm.AppendQuote(e, o.refusal.String())
		})
		b = s.event(b, "response.content_part.done", func(e []byte) []byte {
			e = s.itemRef(e, o, idx)
			e = append(e, `,"part":`...)
			return appendRefusalPart(e, o.refusal.String())
		})
	}
	return s.itemDone(b, o)
}

// closeAll finishes every open item in output order.
func (s *Stream) closeAll(b []byte) []byte {
	b = s.closeReasoning(b)
	b = s.closeMessage(b)
	for _, o := range s.b.items {
		if o.kind != kindCall || o.done {
			continue
		}
		b = s.event(b, "response.function_call_arguments.done", func(e []byte) []byte {
			e = s.itemRef(e, o, -1)
			e = append(e, `,"name":`...)
			e = llm.AppendQuote(e, o.name)
			e = append(e, `,"arguments":`...)
			return llm.AppendQuote(e, o.args.String())
		})
		b = s.itemDone(b, o)
	}
	return b
}

func (s *Stream) end(b []byte) []byte {
	s.done = true
	if len(s.b.items) == 0 {
		// An empty answer is still a message, as the whole response says.
		o := s.b.add(kindMessage)
		s.text = o
		b = s.added(b, o)
		b = s.partAdded(b, o, false)
		b = s.closeMessage(b)
	}
	s.b.finish(s.finish)
	if s.b.usage == nil {
		s.b.usage = &llm.Usage{}
	} else if s.UsageCost != nil {
		s.b.cost = s.UsageCost(*s.b.usage)
	}
	if s.OnComplete != nil {
		s.OnComplete(&Encoded{ID: s.b.meta.ID, Body: s.b.appendResponse(nil), Output: s.b.appendOutput(nil, true), Status: s.b.status})
	}
	typ := "response.completed"
	switch s.b.status {
	case StatusIncomplete:
		typ = "response.incomplete"
	case StatusFailed:
		typ = "response.failed"
	}
	return s.snapshot(b, typ)
}
