package ollama

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"

	"gatehouse/internal/llm"
	"gatehouse/internal/provider"
)

// chatResponse is one /api/chat answer: the whole reply, or one line of a
// stream (the last with done:true and the counts).
type chatResponse struct {
	Model           string          `json:"model"`
	CreatedAt       string          `json:"created_at"`
	Message         responseMessage `json:"message"`
	Done            bool            `json:"done"`
	DoneReason      string          `json:"done_reason"`
	PromptEvalCount int             `json:"prompt_eval_count"`
	EvalCount       int             `json:"eval_count"`
	Error           json.RawMessage `json:"error"`
}

type responseMessage struct {
	Role      string     `json:"role"`
	Content   string     `json:"content"`
	Thinking  string     `json:"thinking"`
	ToolCalls []toolCall `json:"tool_calls"`
}

// maxLine bounds one NDJSON line; a line is one token or a tool call.
const maxLine = 8 << 20

// Completion translates a non-streamed answer into a chat.completion.
func (Adapter) Completion(resp *http.Response, d *provider.Deployment, _ *llm.ChatRequest) (*llm.Completion, error) {
	body, err := provider.ReadBody(resp, d.ResponseLimit())
	if err != nil {
		return nil, err
	}
	var r chatResponse
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, provider.ProtocolError(d.Provider, "a chat response that is not JSON", err)
	}
	if r.Error != nil {
		return nil, streamError(d, r.Error)
	}
	calls := make([]llm.ToolCallJSON, 0, len(r.Message.ToolCalls))
	for i, tc := range r.Message.ToolCalls {
		calls = append(calls, llm.ToolCallJSON{ID: callID(tc, i), Type: "function",
			Function: llm.FunctionCall{Name: tc.Function.Name, Arguments: argumentText(tc.Function.Arguments)}})
	}
	msg := llm.ResponseMessage{Role: llm.RoleAssistant, Content: llm.Str(r.Message.Content), ToolCalls: calls,
		ReasoningContent: r.Message.Thinking}
	if len(calls) > 0 && r.Message.Content == "" {
		msg.Content = nil // as OpenAI sends a message that only calls tools
	}
	usage := llm.Usage{PromptTokens: r.PromptEvalCount, CompletionTokens: r.EvalCount}
	return llm.NewCompletion(&llm.ChatCompletion{
		ID:      newID(),
		Created: created(r.CreatedAt),
		Model:   modelName(r.Model, d),
		Choices: []llm.Choice{{Message: msg, FinishReason: finishReason(r.DoneReason, len(calls) > 0)}},
		Usage:   usage.Wire(),
	})
}

// Stream translates the NDJSON stream into chat.completion.chunks: a role
// chunk, content / reasoning / tool-call deltas, a chunk with the finish
// reason and a trailing usage-only chunk built from the final counts.
func (Adapter) Stream(resp *http.Response, d *provider.Deployment, _ *llm.ChatRequest) (llm.Stream, error) {
	s := &stream{d: d, r: bufio.NewReaderSize(resp.Body, 4096), id: newID()}
	return &provider.ChunkStream{Body: resp.Body, Decode: s.decode}, nil
}

type stream struct {
	d       *provider.Deployment
	r       *bufio.Reader
	id      string
	created int64
	model   string
	started bool // the role has been sent
	calls   int  // tool calls sent so far
	ended   bool
}

func (s *stream) decode(emit func(*llm.ChatChunk)) error {
	if s.ended {
		return io.EOF
	}
	line, err := s.line()
	if err != nil {
		return err
	}
	var r chatResponse
	if err := json.Unmarshal(line, &r); err != nil {
		return provider.ProtocolError(s.d.Provider, "a malformed stream line", err)
	}
	if r.Error != nil {
		return streamError(s.d, r.Error)
	}
	if !s.started {
		s.created, s.model = created(r.CreatedAt), modelName(r.Model, s.d)
	}
	delta := llm.Delta{ReasoningContent: r.Message.Thinking}
	if r.Message.Content != "" {
		delta.Content = llm.Str(r.Message.Content)
	}
	for _, tc := range r.Message.ToolCalls {
		delta.ToolCalls = append(delta.ToolCalls, llm.ToolCallDelta{Index: s.calls, ID: callID(tc, s.calls), Type: "function",
			Function: llm.FunctionCallDelta{Name: tc.Function.Name, Arguments: argumentText(tc.Function.Arguments)}})
		s.calls++
	}
	hasDelta := delta.Content != nil || delta.ReasoningContent != "" || len(delta.ToolCalls) > 0
	if !s.started {
		delta.Role = llm.RoleAssistant
		if delta.Content == nil && len(delta.ToolCalls) == 0 {
			delta.Content = llm.Str("") // OpenAI's first chunk carries the role and empty content
		}
		hasDelta, s.started = true, true
	}
	if hasDelta {
		emit(s.chunk(delta, nil))
	}
	if !r.Done {
		return nil
	}
	s.ended = true
	finish := finishReason(r.DoneReason, s.calls > 0)
	emit(s.chunk(llm.Delta{}, &finish))
	usage := llm.Usage{PromptTokens: r.PromptEvalCount, CompletionTokens: r.EvalCount}
	emit(&llm.ChatChunk{ID: s.id, Created: s.created, Model: s.model, Usage: usage.Wire()})
	return nil
}

func (s *stream) chunk(delta llm.Delta, finish *string) *llm.ChatChunk {
	return &llm.ChatChunk{ID: s.id, Created: s.created, Model: s.model,
		Choices: []llm.ChunkChoice{{Delta: delta, FinishReason: finish}}}
}

// line returns the next non-empty line. A stream that ends before the
// done:true line was cut off.
func (s *stream) line() ([]byte, error) {
	var buf []byte
	for {
		part, err := s.r.ReadSlice('\n')
		if len(buf)+len(part) > maxLine {
			return nil, provider.ProtocolError(s.d.Provider, "a stream line longer than the gateway accepts", bufio.ErrBufferFull)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			buf = append(buf, part...)
			continue
		}
		if buf != nil {
			part = append(buf, part...)
			buf = nil
		}
		if t := bytes.TrimSpace(part); len(t) > 0 {
			if err != nil && err != io.EOF {
				return nil, err
			}
			return t, nil
		}
		if err == io.EOF {
			return nil, io.ErrUnexpectedEOF
		}
		if err != nil {
			return nil, err
		}
	}
}

// streamError is an {"error":"…"} that arrives with a 200: a failure after
// the answer began (the status line was already sent).
func streamError(d *provider.Deployment, raw json.RawMessage) *llm.Error {
	body := append(append([]byte(`{"error":`), raw...), '}')
	return provider.StatusError(d.Provider, &http.Response{StatusCode: http.StatusBadGateway, Header: http.Header{}}, body)
}

// finishReason maps done_reason. Ollama says "stop" when it ends on tool
// calls; OpenAI clients need "tool_calls" to run them. A reason with no
// OpenAI equivalent is passed on as it is rather than passed off as stop.
func finishReason(reason string, calledTools bool) string {
	switch reason {
	case "", "stop", "load", "unload":
		if calledTools {
			return llm.FinishToolCalls
		}
		return llm.FinishStop
	case "length":
		return llm.FinishLength
	}
	return reason
}

// callID keeps Ollama's id (sent since 0.12.10) and makes one up for
// servers that send none.
func callID(tc toolCall, n int) string {
	if tc.ID != "" {
		return tc.ID
	}
	return "call_" + strconv.Itoa(n)
}

// argumentText turns Ollama's arguments object back into the JSON text
// OpenAI's tool calls carry.
func argumentText(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || llm.KindOf(raw) == llm.KindNull {
		return "{}"
	}
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return string(raw)
	}
	return b.String()
}

func created(at string) int64 {
	if t, err := time.Parse(time.RFC3339Nano, at); err == nil {
		return t.Unix()
	}
	return time.Now().Unix()
}

func modelName(m string, d *provider.Deployment) string {
	if m != "" {
		return m
	}
	return d.Model
}

// newID makes a chat.completion id; Ollama's answers have none.
func newID() string {
	return fmt.Sprintf("chatcmpl-%016x%08x", rand.Uint64(), rand.Uint32())
}
