package bedrock

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"

	"gatehouse/internal/llm"
	"gatehouse/internal/provider"
)

// Stream decodes ConverseStream's application/vnd.amazon.eventstream
// body: binary messages whose ":event-type" header names the event and
// whose payload is its JSON.
func (a *Adapter) Stream(resp *http.Response, d *provider.Deployment, _ *llm.ChatRequest) (llm.Stream, error) {
	body := &bodyReader{r: resp.Body}
	s := &eventStream{
		body:    body,
		r:       bufio.NewReader(body),
		dec:     eventstream.NewDecoder(),
		name:    d.Provider,
		token:   a.token(d),
		tools:   map[int]int{},
		id:      completionID(resp.Header),
		created: time.Now().Unix(),
		model:   d.Model,
	}
	return &provider.ChunkStream{Body: resp.Body, Decode: s.decode}, nil
}

// eventStream is the decoding state of one ConverseStream.
type eventStream struct {
	body    *bodyReader
	r       io.Reader
	dec     *eventstream.Decoder
	buf     []byte
	name    string
	token   string // the bearer token, redacted from the messages relayed
	id      string
	created int64
	model   string
	// tools maps a contentBlockIndex that is a toolUse block onto the
	// index of the tool call in OpenAI's message.
	tools   map[int]int
	stopped bool // messageStop arrived
	usage   bool // metadata with usage arrived
}

// The events' payloads.
type (
	blockStartEvent struct {
		ContentBlockIndex int `json:"contentBlockIndex"`
		Start             struct {
			ToolUse *struct {
				ToolUseID string `json:"toolUseId"`
				Name      string `json:"name"`
			} `json:"toolUse"`
		} `json:"start"`
	}
	blockDeltaEvent struct {
		ContentBlockIndex int `json:"contentBlockIndex"`
		Delta             struct {
			Text    *string `json:"text"`
			ToolUse *struct {
				Input string `json:"input"`
			} `json:"toolUse"`
			ReasoningContent *struct {
				Text      string `json:"text"`
				Signature string `json:"signature"`
			} `json:"reasoningContent"`
		} `json:"delta"`
	}
	messageStopEvent struct {
		StopReason string `json:"stopReason"`
	}
	metadataEvent struct {
		Usage *tokenUsage `json:"usage"`
	}
)

// exceptionStatus is the HTTP status Bedrock documents for each
// exception a ConverseStream can carry.
var exceptionStatus = map[string]int{
	"throttlingException": http.StatusTooManyRequests,
	"validationException": http.StatusBadRequest,
	// Documented as 424, but it is the model's stream breaking, which
	// Bedrock says to retry: a 502 lets another deployment take over.
	"modelStreamErrorException":     http.StatusBadGateway,
	"internalServerException":       http.StatusInternalServerError,
	"serviceUnavailableException":   http.StatusServiceUnavailable,
	"modelTimeoutException":         http.StatusRequestTimeout,
	"accessDeniedException":         http.StatusForbidden,
	"resourceNotFoundException":     http.StatusNotFound,
	"modelNotReadyException":        http.StatusTooManyRequests,
	"serviceQuotaExceededException": http.StatusTooManyRequests,
}

func (s *eventStream) decode(emit func(*llm.ChatChunk)) error {
	msg, err := s.dec.Decode(s.r, s.buf)
	if err != nil {
		if errors.Is(err, io.EOF) && s.stopped {
			return io.EOF
		}
		if s.body != nil && s.body.err != nil {
			// The connection failed (a timeout, a reset), not the framing:
			// the caller's classification says which.
			return s.body.err
		}
		if errors.Is(err, io.EOF) {
			return io.ErrUnexpectedEOF // the stream ended before messageStop
		}
		return provider.ProtocolError(s.name, "a malformed event-stream message", err)
	}
	s.buf = msg.Payload[:0]
	switch header(msg, ":message-type") {
	case "event":
	case "exception":
		return s.exception(header(msg, ":exception-type"), msg.Payload)
	case "error":
		return &llm.Error{Kind: llm.KindUpstreamStatus, Status: http.StatusBadGateway, Type: "server_error",
			Code: header(msg, ":error-code"), Message: redact(header(msg, ":error-message"), s.token),
			Cause: fmt.Errorf("provider %q: stream error %s", s.name, header(msg, ":error-code"))}
	default:
		return provider.ProtocolError(s.name, "an event-stream message of unknown type", nil)
	}
	return s.event(header(msg, ":event-type"), msg.Payload, emit)
}

func (s *eventStream) event(kind string, payload []byte, emit func(*llm.ChatChunk)) error {
	bad := func(err error) error { return provider.ProtocolError(s.name, "a malformed "+kind+" event", err) }
	switch kind {
	case "messageStart":
		emit(s.chunk(llm.Delta{Role: llm.RoleAssistant, Content: llm.Str("")}, nil))
	case "contentBlockStart":
		var ev blockStartEvent
		if err := json.Unmarshal(payload, &ev); err != nil {
			return bad(err)
		}
		if tu := ev.Start.ToolUse; tu != nil {
			i := len(s.tools)
			s.tools[ev.ContentBlockIndex] = i
			emit(s.chunk(llm.Delta{ToolCalls: []llm.ToolCallDelta{{Index: i, ID: tu.ToolUseID, Type: "function",
				Function: llm.FunctionCallDelta{Name: tu.Name}}}}, nil))
		}
	case "contentBlockDelta":
		var ev blockDeltaEvent
		if err := json.Unmarshal(payload, &ev); err != nil {
			return bad(err)
		}
		switch d := ev.Delta; {
		case d.Text != nil:
			emit(s.chunk(llm.Delta{Content: d.Text}, nil))
		case d.ToolUse != nil:
			i, ok := s.tools[ev.ContentBlockIndex]
			if !ok {
				return bad(fmt.Errorf("toolUse delta for block %d, which did not start as a toolUse", ev.ContentBlockIndex))
			}
			emit(s.chunk(llm.Delta{ToolCalls: []llm.ToolCallDelta{{Index: i, Function: llm.FunctionCallDelta{Arguments: d.ToolUse.Input}}}}, nil))
		case d.ReasoningContent != nil:
			if d.ReasoningContent.Text != "" || d.ReasoningContent.Signature != "" {
				emit(s.chunk(llm.Delta{ReasoningContent: d.ReasoningContent.Text, ReasoningSignature: d.ReasoningContent.Signature}, nil))
			}
		}
	case "contentBlockStop":
	case "messageStop":
		var ev messageStopEvent
		if err := json.Unmarshal(payload, &ev); err != nil {
			return bad(err)
		}
		s.stopped = true
		finish := finishReason(ev.StopReason)
		emit(s.chunk(llm.Delta{}, &finish))
	case "metadata":
		var ev metadataEvent
		if err := json.Unmarshal(payload, &ev); err != nil {
			return bad(err)
		}
		if ev.Usage != nil && !s.usage {
			s.usage = true
			emit(&llm.ChatChunk{ID: s.id, Created: s.created, Model: s.model, Usage: ev.Usage.wire()})
		}
	default:
		// Events added to the API later (citations, guardrail traces …)
		// carry nothing an OpenAI client can use.
	}
	return nil
}

func (s *eventStream) chunk(d llm.Delta, finish *string) *llm.ChatChunk {
	return &llm.ChatChunk{ID: s.id, Created: s.created, Model: s.model,
		Choices: []llm.ChunkChoice{{Delta: d, FinishReason: finish}}}
}

// exception turns an exception event into the gateway error it stands
// for, keeping Bedrock's status and message.
func (s *eventStream) exception(kind string, payload []byte) error {
	var body struct {
		Message string `json:"message"`
	}
	_ = json.Unmarshal(payload, &body)
	status, ok := exceptionStatus[kind]
	if !ok {
		status = http.StatusBadGateway
	}
	msg := body.Message
	if msg == "" {
		msg = fmt.Sprintf("provider %q stream failed with %s", s.name, kind)
	}
	e := &llm.Error{Kind: llm.KindUpstreamStatus, Status: status, Code: kind, Message: redact(msg, s.token),
		Cause: fmt.Errorf("provider %q: %s in stream", s.name, kind)}
	if status >= 500 {
		e.Type = "server_error"
	}
	return e
}

func header(m eventstream.Message, name string) string {
	v := m.Headers.Get(name)
	if v == nil {
		return ""
	}
	if s, ok := v.(eventstream.StringValue); ok {
		return string(s)
	}
	return v.String()
}

// bodyReader keeps the last error reading the upstream body other than
// io.EOF, so a message cut by the connection is told from a malformed one.
type bodyReader struct {
	r   io.Reader
	err error
}

func (b *bodyReader) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err != nil && err != io.EOF {
		b.err = err
	}
	return n, err
}
