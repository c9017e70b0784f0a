package anthropic

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"gatehouse/internal/llm"
	"gatehouse/internal/provider"
)

// Stream translates Anthropic's event stream (message_start, content
// blocks, message_delta, message_stop, with ping and error events between)
// into chat.completion.chunk objects. Usage always arrives in Anthropic's
// streams, so it is reported once, in a trailing usage-only chunk that the
// relay withholds from clients that did not ask for it.
func (a Adapter) Stream(resp *http.Response, d *provider.Deployment, req *llm.ChatRequest) (llm.Stream, error) {
	s := &eventStream{sse: llm.NewReader(resp.Body), provider: d.Provider, created: a.now().Unix(), blocks: map[int]*blockState{}}
	if p, err := req.Params(); err == nil {
		s.jsonTool = jsonToolName(p)
	}
	return &provider.ChunkStream{Body: resp.Body, Decode: s.decode}, nil
}

// Kinds of content block, as the stream translates them.
const (
	blockIgnored = iota // redacted thinking, server tools: nothing an OpenAI client can take
	blockText
	blockTool
	blockJSON // the response_format tool: its input is the content
	blockThinking
)

type blockState struct {
	kind  int
	tool  int             // blockTool: the OpenAI tool call index
	input json.RawMessage // the input content_block_start carried
	delta bool            // input_json_delta pieces arrived
}

type eventStream struct {
	sse      *llm.Reader
	provider string
	jsonTool string
	created  int64

	id, model string
	started   bool
	blocks    map[int]*blockState // by Anthropic's content block index
	tools     int
	sawJSON   bool // the response_format tool was called
	stop      string
	usage     wireUsage
}

// event is the union of the stream events' payloads.
type event struct {
	Type         string          `json:"type"`
	Message      messageResponse `json:"message"`
	Index        int             `json:"index"`
	ContentBlock responseBlock   `json:"content_block"`
	Delta        struct {
		Type        string `json:"type"`
		Text        string `json:"text"`
		PartialJSON string `json:"partial_json"`
		Thinking    string `json:"thinking"`
		Signature   string `json:"signature"`
		StopReason  string `json:"stop_reason"`
	} `json:"delta"`
	Usage *wireUsage `json:"usage"`
	Error struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
}

func (s *eventStream) decode(emit func(*llm.ChatChunk)) error {
	ev, err := s.sse.Next()
	if err == io.EOF {
		return io.ErrUnexpectedEOF // the stream ended without message_stop
	}
	if err != nil {
		return err
	}
	if len(ev.Data) == 0 {
		return nil
	}
	var e event
	if err := json.Unmarshal(ev.Data, &e); err != nil {
		return provider.ProtocolError(s.provider, "a malformed stream event", err)
	}
	if !s.started && e.Type != "message_start" && e.Type != "ping" && e.Type != "error" {
		return provider.ProtocolError(s.provider, fmt.Sprintf("a %q event before message_start", e.Type), nil)
	}
	switch e.Type {
	case "message_start":
		s.started = true
		s.id, s.model = e.Message.ID, e.Message.Model
		e.Message.Usage.merge(&s.usage)
		emit(s.chunk(llm.Delta{Role: llm.RoleAssistant, Content: llm.Str("")}, nil))
	case "content_block_start":
		s.blockStart(e.Index, &e.ContentBlock, emit)
	case "content_block_delta":
		s.blockDelta(&e, emit)
	case "content_block_stop":
		if b := s.blocks[e.Index]; b != nil && (b.kind == blockTool || b.kind == blockJSON) && !b.delta {
			// A call whose input came whole in content_block_start (or
			// not at all): its arguments go out now.
			s.emitInput(b, compactInput(b.input), emit)
		}
	case "message_delta":
		if e.Delta.StopReason != "" {
			s.stop = e.Delta.StopReason
		}
		if e.Usage != nil {
			e.Usage.merge(&s.usage)
		}
	case "message_stop":
		finish := finishReason(s.stop, s.sawJSON && s.tools == 0)
		emit(s.chunk(llm.Delta{}, &finish))
		u := s.usage.usage()
		emit(&llm.ChatChunk{ID: s.id, Created: s.created, Model: s.model, Usage: u.Wire()})
		return io.EOF
	case "error":
		typ := e.Error.Type
		return &llm.Error{Kind: llm.KindUpstreamStatus, Status: statusForType(typ), Type: typ, Message: e.Error.Message,
			Cause: fmt.Errorf("provider %q: error event in stream: %s", s.provider, typ)}
	}
	// ping, and event types added after this code was written, carry
	// nothing a chat completion needs.
	return nil
}

func (s *eventStream) chunk(delta llm.Delta, finish *string) *llm.ChatChunk {
	return &llm.ChatChunk{ID: s.id, Created: s.created, Model: s.model,
		Choices: []llm.ChunkChoice{{Delta: delta, FinishReason: finish}}}
}

func (s *eventStream) blockStart(index int, cb *responseBlock, emit func(*llm.ChatChunk)) {
	b := &blockState{}
	s.blocks[index] = b
	switch cb.Type {
	case "text":
		b.kind = blockText
		if cb.Text != "" {
			emit(s.chunk(llm.Delta{Content: llm.Str(cb.Text)}, nil))
		}
	case "thinking":
		b.kind = blockThinking
		if cb.Thinking != "" || cb.Signature != "" {
			emit(s.chunk(llm.Delta{ReasoningContent: cb.Thinking, ReasoningSignature: cb.Signature}, nil))
		}
	case "tool_use":
		b.input = cb.Input
		if s.jsonTool != "" && cb.Name == s.jsonTool {
			b.kind = blockJSON
			s.sawJSON = true
			return
		}
		b.kind, b.tool = blockTool, s.tools
		s.tools++
		// The call's identity goes first; its arguments follow in pieces.
		emit(s.chunk(llm.Delta{ToolCalls: []llm.ToolCallDelta{{Index: b.tool, ID: cb.ID, Type: "function",
			Function: llm.FunctionCallDelta{Name: cb.Name}}}}, nil))
	}
}

func (s *eventStream) blockDelta(e *event, emit func(*llm.ChatChunk)) {
	b := s.blocks[e.Index]
	if b == nil {
		return
	}
	switch e.Delta.Type {
	case "text_delta":
		if e.Delta.Text != "" {
			emit(s.chunk(llm.Delta{Content: llm.Str(e.Delta.Text)}, nil))
		}
	case "input_json_delta":
		if e.Delta.PartialJSON != "" {
			b.delta = true
			s.emitInput(b, e.Delta.PartialJSON, emit)
		}
	case "thinking_delta":
		if e.Delta.Thinking != "" {
			emit(s.chunk(llm.Delta{ReasoningContent: e.Delta.Thinking}, nil))
		}
	case "signature_delta":
		if e.Delta.Signature != "" {
			emit(s.chunk(llm.Delta{ReasoningSignature: e.Delta.Signature}, nil))
		}
	}
}

// emitInput sends a piece of tool input: argument text for a tool call,
// content for the response_format tool.
func (s *eventStream) emitInput(b *blockState, piece string, emit func(*llm.ChatChunk)) {
	switch b.kind {
	case blockTool:
		emit(s.chunk(llm.Delta{ToolCalls: []llm.ToolCallDelta{{Index: b.tool,
			Function: llm.FunctionCallDelta{Arguments: piece}}}}, nil))
	case blockJSON:
		emit(s.chunk(llm.Delta{Content: llm.Str(piece)}, nil))
	}
}
