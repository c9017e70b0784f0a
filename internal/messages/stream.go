package messages

import (
	"strconv"

	"gatehouse/internal/llm"
)

// Stream translates a backend's OpenAI chunks into Anthropic's event
// sequence: message_start and a ping, then content_block_start / _delta /
// _stop for each block in turn, then message_delta and message_stop.
//
// Every event is produced from the chunk that causes it, so the caller
// can write and flush it at once. The only thing held back is the end:
// message_delta must carry the real output_tokens, and OpenAI-style
// backends report usage in a chunk after the one with finish_reason, so
// message_delta and message_stop wait for that usage chunk (or the end of
// the stream). Content is never held.
//
// A Stream serves one response and is not safe for concurrent use.
type Stream struct {
	id, model string
	// InputTokens, when set before the first chunk, is reported in
	// message_start; the real count follows in message_delta.
	InputTokens int
	// UsageCost, when set, prices the upstream's reported usage for
	// message_delta's usage object ("cost", USD), so a client that never
	// reads HTTP trailers still learns what the stream cost.
	UsageCost func(llm.Usage) string

	started bool
	open    blockKind // the block being streamed, if any
	next    int       // index of the next block
	tools   []int     // OpenAI tool-call index → Anthropic block index (-1: none yet)
	tool    int       // OpenAI index of the open tool block
	finish  string
	matched string
	refused bool
	called  bool
	usage   *llm.Usage
	done    bool // message_stop is out
	// chunk is the last upstream chunk decoded, its choices reused by
	// the next.
	chunk llm.StreamChunk
}

type blockKind uint8

const (
	blockNone blockKind = iota
	blockText
	blockThinking
	blockTool
)

// NewStream starts a translation for the message id, reporting model
// until the backend names its own.
func NewStream(id, model string) *Stream {
	return &Stream{id: id, model: model}
}

// chunk is the part of an OpenAI chunk the translation reads, plus vLLM's
// stop_reason (see completion).
// Chunk appends the events one upstream chunk causes to b (possibly
// none). An error means the backend broke the protocol; the caller ends
// the stream with it.
func (s *Stream) Chunk(b []byte, c llm.Chunk) ([]byte, error) {
	if s.done {
		return b, nil
	}
	ch := &s.chunk
	if err := llm.DecodeStreamChunk(c.Data, ch); err != nil {
		return b, protocolError("the backend sent a stream chunk that is not valid JSON: %v", err)
	}
	if !s.started {
		if ch.Model != "" {
			s.model = ch.Model
		}
		b = s.start(b, c.Usage)
	}
	if c.Usage != nil {
		u := *c.Usage
		s.usage = &u
	}
	for i := range ch.Choices {
		it := &ch.Choices[i]
		if it.Index != 0 {
			continue // one message is all an Anthropic request asks for
		}
		var err error
		if b, err = s.delta(b, &it.Delta); err != nil {
			return b, err
		}
		if it.FinishReason != nil && *it.FinishReason != "" {
			s.finish = *it.FinishReason
			s.matched = stopString(it.StopReason)
			b = s.closeBlock(b)
		}
	}
	if s.finish != "" && s.usage != nil {
		b = s.end(b)
	}
	return b, nil
}

// End appends what closes a stream that ended cleanly: anything still
// open, and message_delta/message_stop if they were waiting for usage
// that never came.
func (s *Stream) End(b []byte) []byte {
	if !s.started {
		b = s.start(b, nil)
	}
	if s.done {
		return b
	}
	b = s.closeBlock(b)
	return s.end(b)
}

// Error appends a mid-stream failure as Anthropic's error event.
func (s *Stream) Error(b []byte, e *llm.Error) []byte {
	s.done = true
	return llm.AppendEvent(b, "error", AppendError(nil, e, ""))
}

func (s *Stream) start(b []byte, u *llm.Usage) []byte {
	s.started = true
	var usage llm.Usage
	if u != nil {
		usage = *u
	} else {
		usage.PromptTokens = s.InputTokens
	}
	d := make([]byte, 0, 256)
	d = append(d, `{"type":"message_start","message":{"id":`...)
	d = llm.AppendQuote(d, s.id)
	d = append(d, `,"type":"message","role":"assistant","model":`...)
	d = llm.AppendQuote(d, s.model)
	d = append(d, `,"content":[],"stop_reason":null,"stop_sequence":null,"usage":`...)
	d = appendUsage(d, usage, true)
	d = append(d, "}}"...)
	b = llm.AppendEvent(b, "message_start", d)
	return llm.AppendEvent(b, "ping", []byte(`{"type":"ping"}`))
}

func (s *Stream) delta(b []byte, d *llm.Delta) ([]byte, error) {
	if d.ReasoningContent != "" {
		b = s.ensure(b, blockThinking, nil)
		b = s.blockDelta(b, `{"type":"thinking_delta","thinking":`, d.ReasoningContent)
	}
	if d.ReasoningSignature != "" {
		b = s.ensure(b, blockThinking, nil)
		b = s.blockDelta(b, `{"type":"signature_delta","signature":`, d.ReasoningSignature)
	}
	if d.Content != nil && *d.Content != "" {
		b = s.ensure(b, blockText, nil)
		b = s.blockDelta(b, `{"type":"text_delta","text":`, *d.Content)
	}
	if d.Refusal != nil && *d.Refusal != "" {
		s.refused = true
		b = s.ensure(b, blockText, nil)
		b = s.blockDelta(b, `{"type":"text_delta","text":`, *d.Refusal)
	}
	for i := range d.ToolCalls {
		tc := &d.ToolCalls[i]
		if tc.Index < 0 || tc.Index > 1024 {
			return b, protocolError("the backend sent a tool call with index %d", tc.Index)
		}
		for len(s.tools) <= tc.Index {
			s.tools = append(s.tools, -1)
		}
		switch {
		case s.tools[tc.Index] < 0:
			s.called = true
			b = s.ensure(b, blockTool, tc)
			s.tools[tc.Index] = s.next - 1
		case s.open != blockTool || s.tool != tc.Index:
			// Anthropic streams one block at a time; a backend that
			// interleaves calls cannot be relayed without buffering.
			return b, protocolError("the backend interleaved the arguments of parallel tool calls, which the Messages stream cannot carry")
		}
		if tc.Function.Arguments != "" {
			b = s.blockDelta(b, `{"type":"input_json_delta","partial_json":`, tc.Function.Arguments)
		}
	}
	return b, nil
}

// ensure opens a block of kind k unless one is open already; a tool call
// always opens its own block.
func (s *Stream) ensure(b []byte, k blockKind, tc *llm.ToolCallDelta) []byte {
	if s.open == k && k != blockTool {
		return b
	}
	b = s.closeBlock(b)
	d := make([]byte, 0, 128)
	d = append(d, `{"type":"content_block_start","index":`...)
	d = strconv.AppendInt(d, int64(s.next), 10)
	switch k {
	case blockText:
		d = append(d, `,"content_block":{"type":"text","text":""}}`...)
	case blockThinking:
		d = append(d, `,"content_block":{"type":"thinking","thinking":"","signature":""}}`...)
	case blockTool:
		d = append(d, `,"content_block":{"type":"tool_use","id":`...)
		d = llm.AppendQuote(d, toolID(tc.ID, s.id, tc.Index))
		d = append(d, `,"name":`...)
		d = llm.AppendQuote(d, tc.Function.Name)
		d = append(d, `,"input":{}}}`...)
		s.tool = tc.Index
	}
	s.open = k
	s.next++
	return llm.AppendEvent(b, "content_block_start", d)
}

func (s *Stream) blockDelta(b []byte, prefix, text string) []byte {
	d := make([]byte, 0, 64+len(text))
	d = append(d, `{"type":"content_block_delta","index":`...)
	d = strconv.AppendInt(d, int64(s.next-1), 10)
	d = append(d, `,"delta":`...)
	d = append(d, prefix...)
	d = llm.AppendQuote(d, text)
	d = append(d, "}}"...)
	return llm.AppendEvent(b, "content_block_delta", d)
}

func (s *Stream) closeBlock(b []byte) []byte {
	if s.open == blockNone {
		return b
	}
	s.open = blockNone
	d := make([]byte, 0, 48)
	d = append(d, `{"type":"content_block_stop","index":`...)
	d = strconv.AppendInt(d, int64(s.next-1), 10)
	d = append(d, '}')
	return llm.AppendEvent(b, "content_block_stop", d)
}

func (s *Stream) end(b []byte) []byte {
	s.done = true
	reason, seq := stopReason(s.finish, s.matched, s.called, s.refused)
	d := make([]byte, 0, 192)
	d = append(d, `{"type":"message_delta","delta":{"stop_reason":`...)
	d = llm.AppendQuote(d, reason)
	d = append(d, `,"stop_sequence":`...)
	d = appendNullable(d, seq)
	d = append(d, `},"usage":`...)
	if s.usage != nil {
		d = appendUsage(d, *s.usage, true)
		if s.UsageCost != nil {
			d = append(d[:len(d)-1], `,"cost":`...)
			d = append(d, s.UsageCost(*s.usage)...)
			d = append(d, '}')
		}
	} else {
		d = appendUsage(d, llm.Usage{}, false)
	}
	d = append(d, '}')
	b = llm.AppendEvent(b, "message_delta", d)
	return llm.AppendEvent(b, "message_stop", []byte(`{"type":"message_stop"}`))
}
