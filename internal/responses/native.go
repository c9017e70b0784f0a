package responses

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"gatehouse/internal/llm"
)

// This file serves backends that speak the Responses API themselves
// (OpenAI, Azure OpenAI, servers configured with responses_api): the
// client's body goes to them with a targeted rewrite, and their answer
// comes back as it is — only read, for usage, the store and the cache.

// NativeBody is the body for a backend that speaks the Responses API: the
// client's, with the deployment's model, and, when the request continues
// a stored response, the conversation in place of previous_response_id
// (the backend has never seen the gateway's stored responses). Every
// other member is copied as the client wrote it.
func (r *Request) NativeBody(model string, prior []byte) ([]byte, error) {
	var input []byte
	if r.PreviousID != "" {
		items, err := nativeItems(prior)
		if err != nil {
			return nil, err
		}
		input = Conversation(items, r.Input)
	}
	out := make([]byte, 0, len(r.Body)+len(input)+len(model))
	out = append(out, '{')
	first, sawInput := true, false
	member := func(key string, v []byte) {
		if !first {
			out = append(out, ',')
		}
		first = false
		out = llm.AppendQuote(out, key)
		out = append(out, ':')
		out = append(out, v...)
	}
	err := llm.EachField(r.Body, func(key string, v []byte, _ int) bool {
		switch {
		case key == "model":
			member(key, llm.AppendQuote(nil, model))
		case key == "previous_response_id" && input != nil:
		case key == "input" && input != nil:
			if !sawInput {
				member(key, input)
				sawInput = true
			}
		default:
			member(key, v)
		}
		return true
	})
	if err != nil {
		return nil, err
	}
	if input != nil && !sawInput {
		member("input", input)
	}
	return append(out, '}'), nil
}

// nativeItems prepares stored items for a backend that speaks the
// Responses API: item ids go (they name items the backend may not have
// kept), and so does reasoning without its encrypted content, which the
// backend could only look up by id.
func nativeItems(items []byte) ([]byte, error) {
	if len(items) == 0 {
		return nil, nil
	}
	var raw []map[string]json.RawMessage
	if err := json.Unmarshal(items, &raw); err != nil {
		return nil, err
	}
	kept := raw[:0]
	for _, it := range raw {
		delete(it, "id")
		if string(it["type"]) == `"reasoning"` {
			ec, ok := it["encrypted_content"]
			if !ok || llm.KindOf(ec) != llm.KindString {
				continue
			}
		}
		kept = append(kept, it)
	}
	return json.Marshal(kept)
}

// ParseUsage decodes the Responses API's usage object.
func ParseUsage(raw []byte) (llm.Usage, bool) {
	if llm.KindOf(raw) != llm.KindObject {
		return llm.Usage{}, false
	}
	var w struct {
		Input  int `json:"input_tokens"`
		Output int `json:"output_tokens"`
		Total  int `json:"total_tokens"`
		InD    *struct {
			Cached int `json:"cached_tokens"`
		} `json:"input_tokens_details"`
		OutD *struct {
			Reasoning int `json:"reasoning_tokens"`
		} `json:"output_tokens_details"`
	}
	if err := json.Unmarshal(raw, &w); err != nil {
		return llm.Usage{}, false
	}
	u := llm.Usage{PromptTokens: w.Input, CompletionTokens: w.Output, TotalTokens: w.Total}
	if w.InD != nil {
		u.CachedTokens = w.InD.Cached
	}
	if w.OutD != nil {
		u.ReasoningTokens = w.OutD.Reasoning
	}
	return u, true
}

// UsageOf reads the usage of a response object.
func UsageOf(resp []byte) (llm.Usage, bool) {
	var u llm.Usage
	ok := false
	_ = llm.EachField(resp, func(key string, v []byte, _ int) bool {
		if key == "usage" {
			u, ok = ParseUsage(v)
		}
		return true
	})
	return u, ok
}

// field returns a top-level member of a JSON object, nil when absent.
func field(obj []byte, name string) []byte {
	var out []byte
	_ = llm.EachField(obj, func(key string, v []byte, _ int) bool {
		if key == name {
			out = v
		}
		return true
	})
	return out
}

// stringField returns a top-level string member, "" when absent.
func stringField(obj []byte, name string) string {
	s, _ := llm.UnquoteString(field(obj, name))
	return s
}

// ResponseID returns a response object's id.
func ResponseID(resp []byte) string { return stringField(resp, "id") }

// OutputOf returns a response object's output array, "[]" when absent.
func OutputOf(resp []byte) []byte {
	if o := field(resp, "output"); llm.KindOf(o) == llm.KindArray {
		return compact(o)
	}
	return []byte("[]")
}

// ReadNative checks a backend's non-streamed answer: a JSON object with
// an id, which is relayed as it is. One walk finds the id, an error
// object and the usage, and validates the whole body on the way (the
// body is relayed as it came, so it must be whole: one cut short under a
// matching Content-Length still starts with a response id).
func ReadNative(body []byte, provider string) (llm.Usage, bool, error) {
	var id, errObj, usage []byte
	err := llm.EachField(body, func(key string, v []byte, _ int) bool {
		switch key {
		case "id":
			id = v
		case "error":
			errObj = v
		case "usage":
			usage = v
		}
		return true
	})
	if s, _ := llm.UnquoteString(id); s == "" || errors.Is(err, llm.ErrNotObject) {
		// A 200 carrying OpenAI's {"error":{…}} failed upstream: the
		// provider's words reach the client, as a 502 that moves on.
		if llm.KindOf(errObj) == llm.KindObject && stringField(errObj, "message") != "" {
			return llm.Usage{}, false, &llm.Error{Kind: llm.KindUpstreamStatus, Status: http.StatusBadGateway, Type: "server_error",
				Code: stringField(errObj, "code"), Message: stringField(errObj, "message"),
				Cause: fmt.Errorf("provider %q: error object in a 200", provider)}
		}
		return llm.Usage{}, false, protocolError("provider %q sent a Responses API answer that is not a response object", provider)
	}
	if err != nil {
		return llm.Usage{}, false, protocolError("provider %q sent a Responses API answer that is not valid JSON", provider)
	}
	u, ok := ParseUsage(usage)
	return u, ok, nil
}

// NativeStream reads a backend's Responses event stream: each event is
// one chunk (its data, as sent), and the terminal event's usage is the
// chunk's usage. It ends cleanly only after a terminal event.
type NativeStream struct {
	body     io.Closer
	sse      *llm.Reader
	terminal bool
	typ      string // the last event's type and sequence_number, for the encoder
	seq      int
	// Text collects what the answer wrote (text, arguments, reasoning),
	// up to a bound, to count it if the stream breaks before its usage.
	Text strings.Builder
}

// textBound caps NativeStream.Text; beyond it the count is a floor.
const textBound = 64 << 10

// NewNativeStream reads the event stream of resp; the stream owns its body.
func NewNativeStream(resp *http.Response) *NativeStream {
	return &NativeStream{body: resp.Body, sse: llm.NewReader(resp.Body)}
}

// Close closes the upstream body.
func (s *NativeStream) Close() error { return s.body.Close() }

// Pending reports whether the next event is already buffered.
func (s *NativeStream) Pending() bool { return s.sse.HasEvent() }

// Next returns the next event as a chunk.
func (s *NativeStream) Next() (llm.Chunk, error) {
	for {
		if s.terminal {
			return llm.Chunk{}, io.EOF
		}
		ev, err := s.sse.Next()
		if err != nil {
			if err == io.EOF {
				return llm.Chunk{}, io.ErrUnexpectedEOF // no terminal event: the answer broke off
			}
			return llm.Chunk{}, err
		}
		data := ev.Data
		if string(data) == "[DONE]" {
			return llm.Chunk{}, io.ErrUnexpectedEOF
		}
		if len(bytes.TrimSpace(data)) == 0 {
			continue
		}
		// Each event is relayed as it came: a broken one would reach the
		// client as an event its SDK cannot parse. The walk that reads
		// the event's fields validates it too.
		f, err := readEvent(data)
		if err != nil {
			return llm.Chunk{}, protocolError("the backend sent a malformed stream event")
		}
		c := llm.Chunk{Data: data}
		s.typ, s.seq = f.typ, f.seq
		switch f.typ {
		case "response.completed", "response.incomplete", "response.failed":
			s.terminal = true
			if u, ok := UsageOf(f.response); ok {
				c.Usage = &u
			}
		case "response.output_text.delta", "response.function_call_arguments.delta", "response.reasoning_text.delta",
			"response.reasoning_summary_text.delta", "response.refusal.delta":
			if s.Text.Len() < textBound {
				d, _ := llm.UnquoteString(f.delta)
				s.Text.WriteString(d)
			}
		case "error":
			s.terminal = true
			code, _ := llm.UnquoteString(f.code)
			msg, _ := llm.UnquoteString(f.message)
			return c, &llm.Error{Kind: llm.KindUpstreamStatus, Status: http.StatusBadGateway, Type: "server_error",
				Code: code, Message: "the backend failed: " + msg,
				Cause: &upstreamEvent{data: data}}
		case "":
			return c, protocolError("the backend sent a Responses event without a type")
		}
		return c, nil
	}
}

// event is what NativeStream reads of one event: its type and
// sequence_number, and the raw members a type needs (nil when absent).
type event struct {
	typ                            string
	seq                            int // -1 when absent
	response, delta, code, message []byte
}

// readEvent reads an event's fields in one walk over its data, which
// also validates the whole event: a nil error means it is one
// well-formed JSON object (or another JSON value, reported as having no
// type).
func readEvent(data []byte) (event, error) {
	ev := event{seq: -1}
	err := llm.EachField(data, func(key string, v []byte, _ int) bool {
		switch key {
		case "type":
			ev.typ, _ = llm.UnquoteString(v)
		case "sequence_number":
			if n, err := strconv.Atoi(string(v)); err == nil {
				ev.seq = n
			}
		case "response":
			ev.response = v
		case "delta":
			ev.delta = v
		case "code":
			ev.code = v
		case "message":
			ev.message = v
		}
		return true
	})
	if errors.Is(err, llm.ErrNotObject) {
		err = nil // valid JSON without members: no type, refused as such
	}
	return ev, err
}

// eventHead reads an event's type and sequence_number, for an encoder
// given events without their stream. OpenAI writes them first, so the
// scan stops there rather than walk a whole response object for two
// fields.
func eventHead(data []byte) (typ string, seq int) {
	seq = -1
	_ = llm.EachField(data, func(key string, v []byte, _ int) bool {
		switch key {
		case "type":
			typ, _ = llm.UnquoteString(v)
		case "sequence_number":
			if n, err := strconv.Atoi(string(v)); err == nil {
				seq = n
			}
		}
		return typ == "" || seq < 0
	})
	return typ, seq
}

// upstreamEvent is the backend's own error event: relayed as the client
// would have had it from the backend.
type upstreamEvent struct{ data []byte }

func (e *upstreamEvent) Error() string { return "the backend sent an error event: " + string(e.data) }

// UpstreamErrorEvent returns the data of the backend's error event, if
// err is one.
func UpstreamErrorEvent(err error) ([]byte, bool) {
	var ue *upstreamEvent
	if errors.As(err, &ue) {
		return ue.data, true
	}
	return nil, false
}

// NativeEncoder writes a backend's Responses events to the client as they
// came, adding only the gateway's price to the terminal event's usage.
type NativeEncoder struct {
	// UsageCost, when set, prices the terminal event's usage ("cost").
	UsageCost func(llm.Usage) string
	// OnComplete, when set, gets the terminal event's response object
	// before the event is written.
	OnComplete func(resp []byte)
	// Stream, when set, is the stream the chunks come from: the encoder
	// takes each event's type from it instead of reading it again.
	Stream  *NativeStream
	lastSeq int // the last event's sequence_number, for an error event of the gateway's own
}

// Chunk appends one event.
func (e *NativeEncoder) Chunk(b []byte, c llm.Chunk) ([]byte, error) {
	typ, seq := "", -1
	if e.Stream != nil {
		typ, seq = e.Stream.typ, e.Stream.seq
	} else {
		typ, seq = eventHead(c.Data)
	}
	if seq >= 0 {
		e.lastSeq = seq
	}
	data := c.Data
	if c.Usage != nil {
		if e.UsageCost != nil {
			data = setResponseCost(data, e.UsageCost(*c.Usage))
		}
		if e.OnComplete != nil {
			e.OnComplete(field(data, "response"))
		}
	}
	return llm.AppendEvent(b, typ, data), nil
}

// End appends nothing: the backend's terminal event closed the stream.
func (e *NativeEncoder) End(b []byte) []byte { return b }

// Error appends a failure as the Responses stream's error event (the
// backend's own, when it sent one).
func (e *NativeEncoder) Error(b []byte, err *llm.Error) []byte {
	if data, ok := UpstreamErrorEvent(err.Cause); ok {
		return llm.AppendEvent(b, "error", data)
	}
	d := append([]byte(`{"type":"error","sequence_number":`), strconv.Itoa(e.lastSeq+1)...)
	d = append(d, `,"code":`...)
	code := err.Code
	if code == "" {
		code = "server_error"
	}
	d = llm.AppendQuote(d, code)
	d = append(d, `,"message":`...)
	d = llm.AppendQuote(d, err.Message)
	d = append(d, `,"param":null}`...)
	return llm.AppendEvent(b, "error", d)
}

// setResponseCost puts the gateway's price into the usage of the
// response an event carries, leaving the rest byte for byte.
func setResponseCost(data []byte, cost string) []byte {
	var start, end int
	_ = llm.EachField(data, func(key string, v []byte, off int) bool {
		if key == "response" {
			start, end = off, off+len(v)
		}
		return true
	})
	if end == 0 {
		return data
	}
	resp, ok := llm.SetUsageCost(data[start:end], cost)
	if !ok {
		return data
	}
	out := make([]byte, 0, len(data)+len(cost)+8)
	out = append(out, data[:start]...)
	out = append(out, resp...)
	return append(out, data[end:]...)
}

// ToChat re-expresses a Responses backend's answer as a chat.completion,
// the form the cache keeps every answer in; a hit is then served to a
// Responses or a chat client alike. ok is false for an answer not worth
// keeping (failed, or with items only OpenAI's servers produce).
func ToChat(resp []byte) ([]byte, bool) {
	var r struct {
		ID         string `json:"id"`
		Model      string `json:"model"`
		CreatedAt  int64  `json:"created_at"`
		Status     string `json:"status"`
		Incomplete *struct {
			Reason string `json:"reason"`
		} `json:"incomplete_details"`
		Output []item          `json:"output"`
		Usage  json.RawMessage `json:"usage"`
	}
	if err := json.Unmarshal(resp, &r); err != nil {
		return nil, false
	}
	msg := llm.ResponseMessage{Role: llm.RoleAssistant}
	var text, refusal, reasoning, signature strings.Builder
	for _, it := range r.Output {
		switch it.Type {
		case "message":
			parts, _ := partsOf(orNull(it.Content), "")
			for _, p := range parts {
				if p.Type == "refusal" {
					refusal.WriteString(p.Text)
				} else if p.Type == llm.PartText {
					text.WriteString(p.Text)
				}
			}
		case "function_call":
			args := ""
			if it.Arguments != nil {
				args = *it.Arguments
			}
			msg.ToolCalls = append(msg.ToolCalls, llm.ToolCallJSON{ID: it.CallID, Type: "function",
				Function: llm.FunctionCall{Name: it.Name, Arguments: args}})
		case "reasoning":
			content, _ := partsOf(orNull(it.Content), "")
			t := joinText(content)
			if t == "" {
				t = joinSummary(it.Summary)
			}
			reasoning.WriteString(t)
			if it.EncryptedContent != nil {
				signature.WriteString(*it.EncryptedContent)
			}
		default:
			return nil, false // a built-in tool's item: not a chat answer
		}
	}
	if text.Len() > 0 || refusal.Len() == 0 {
		s := text.String()
		msg.Content = &s
	}
	if refusal.Len() > 0 {
		s := refusal.String()
		msg.Refusal = &s
	}
	msg.ReasoningContent, msg.ReasoningSignature = reasoning.String(), signature.String()
	finish := llm.FinishStop
	switch {
	case r.Status == StatusFailed || r.Status == StatusInProgress:
		return nil, false
	case r.Status == StatusIncomplete && r.Incomplete != nil && r.Incomplete.Reason == "content_filter":
		finish = llm.FinishContentFilter
	case r.Status == StatusIncomplete:
		finish = llm.FinishLength
	case len(msg.ToolCalls) > 0:
		finish = llm.FinishToolCalls
	}
	c := llm.ChatCompletion{ID: r.ID, Object: "chat.completion", Created: r.CreatedAt, Model: r.Model,
		Choices: []llm.Choice{{Message: msg, FinishReason: finish, Logprobs: json.RawMessage("null")}}}
	if u, ok := ParseUsage(r.Usage); ok {
		c.Usage = u.Wire()
	}
	b, err := json.Marshal(c)
	return b, err == nil
}
