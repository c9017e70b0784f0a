package messages

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"

	"gatehouse/internal/llm"
)

// completion is OpenAI's chat.completion plus the one non-standard field
// worth reading: vLLM's choices[].stop_reason, the stop string that
// ended the turn, which is what Anthropic's stop_sequence reports.
type completion struct {
	Model   string           `json:"model"`
	Choices []completionItem `json:"choices"`
	Usage   *llm.WireUsage   `json:"usage"`
}

type completionItem struct {
	llm.Choice
	StopReason json.RawMessage `json:"stop_reason"`
}

// EncodeMessage re-expresses a backend's chat.completion body as an
// Anthropic message. id is the message id to report (msg_…); model is
// used when the body names none. The slot says where the usage object
// went, so the gateway's cost goes in without walking the message again.
//
// Tool arguments that are not valid JSON are an upstream failure (502),
// not a silent "{}": a coding agent would otherwise run the tool with no
// arguments.
func EncodeMessage(body []byte, id, model string) ([]byte, llm.UsageSlot, error) {
	var c completion
	if err := json.Unmarshal(body, &c); err != nil {
		return nil, llm.UsageSlot{}, protocolError("the backend's response is not a valid chat completion: %v", err)
	}
	if len(c.Choices) == 0 {
		return nil, llm.UsageSlot{}, protocolError("the backend's response has no choices")
	}
	ch := &c.Choices[0]
	msg := &ch.Message
	if c.Model != "" {
		model = c.Model
	}
	b := make([]byte, 0, 256+len(body))
	b = append(b, `{"id":`...)
	b = llm.AppendQuote(b, id)
	b = append(b, `,"type":"message","role":"assistant","model":`...)
	b = llm.AppendQuote(b, model)
	b = append(b, `,"content":[`...)
	n := 0
	sep := func() {
		if n > 0 {
			b = append(b, ',')
		}
		n++
	}
	if msg.ReasoningContent != "" || msg.ReasoningSignature != "" {
		sep()
		b = append(b, `{"type":"thinking","thinking":`...)
		b = llm.AppendQuote(b, msg.ReasoningContent)
		b = append(b, `,"signature":`...)
		b = llm.AppendQuote(b, msg.ReasoningSignature)
		b = append(b, '}')
	}
	refused := msg.Refusal != nil && *msg.Refusal != ""
	for _, text := range []*string{msg.Content, msg.Refusal} {
		if text != nil && *text != "" {
			sep()
			b = append(b, `{"type":"text","text":`...)
			b = llm.AppendQuote(b, *text)
			b = append(b, '}')
		}
	}
	for i, tc := range msg.ToolCalls {
		input, err := toolInput(tc.Function.Arguments)
		if err != nil {
			return nil, llm.UsageSlot{}, protocolError("the backend's call of tool %q has arguments that are not a JSON object: %v", tc.Function.Name, err)
		}
		sep()
		b = append(b, `{"type":"tool_use","id":`...)
		b = llm.AppendQuote(b, toolID(tc.ID, id, i))
		b = append(b, `,"name":`...)
		b = llm.AppendQuote(b, tc.Function.Name)
		b = append(b, `,"input":`...)
		b = append(b, input...)
		b = append(b, '}')
	}
	reason, seq := stopReason(ch.FinishReason, stopString(ch.StopReason), len(msg.ToolCalls) > 0, refused)
	b = append(b, `],"stop_reason":`...)
	b = llm.AppendQuote(b, reason)
	b = append(b, `,"stop_sequence":`...)
	b = appendNullable(b, seq)
	b = append(b, `,"usage":`...)
	var u llm.Usage
	if c.Usage != nil {
		u = c.Usage.Usage()
	}
	slot := llm.UsageSlot{Start: len(b)} // an object with members and no cost
	b = appendUsage(b, u, true)
	slot.End = len(b)
	return append(b, '}'), slot, nil
}

// toolInput turns OpenAI's argument text into an input object; models
// calling a function without parameters often send "".
func toolInput(args string) ([]byte, error) {
	if len(bytes.TrimSpace([]byte(args))) == 0 {
		return []byte("{}"), nil
	}
	if llm.KindOf([]byte(args)) != llm.KindObject {
		return nil, fmt.Errorf("%.80q", args)
	}
	var c bytes.Buffer
	if err := json.Compact(&c, []byte(args)); err != nil {
		return nil, fmt.Errorf("%w (%.80q)", err, args)
	}
	return c.Bytes(), nil
}

// toolID keeps the backend's call id (the client hands it back in its
// tool_result, and it goes upstream again as tool_call_id); a backend
// that sends none gets one unique within the message.
func toolID(id, msgID string, i int) string {
	if id != "" {
		return id
	}
	return "toolu_" + msgID + "_" + strconv.Itoa(i)
}

// stopString reads vLLM's stop_reason when it is the matched stop string
// (it is a token id, a number, when an end token stopped the model).
func stopString(raw json.RawMessage) string {
	if llm.KindOf(raw) != llm.KindString {
		return ""
	}
	s, _ := llm.UnquoteString(raw)
	return s
}

// stopReason maps OpenAI's finish_reason onto Anthropic's stop_reason.
// A turn that called tools is tool_use whatever the backend said (some
// report "stop"), because agents loop on exactly that value.
func stopReason(finish, matched string, calledTools, refused bool) (reason, sequence string) {
	switch finish {
	case llm.FinishStop, "":
		switch {
		case calledTools:
			return "tool_use", ""
		case refused:
			return "refusal", ""
		case matched != "":
			return "stop_sequence", matched
		}
		return "end_turn", ""
	case llm.FinishLength:
		return "max_tokens", ""
	case llm.FinishToolCalls, "function_call":
		return "tool_use", ""
	case llm.FinishContentFilter:
		return "refusal", ""
	}
	return finish, ""
}

// appendUsage writes Anthropic's usage object. Anthropic counts cached
// prompt tokens apart from input_tokens; OpenAI counts them inside
// prompt_tokens. OpenAI reports no cache writes, so that is 0.
func appendUsage(b []byte, u llm.Usage, withInput bool) []byte {
	b = append(b, '{')
	if withInput {
		b = append(b, `"input_tokens":`...)
		b = strconv.AppendInt(b, int64(max(u.PromptTokens-u.CachedTokens, 0)), 10)
		b = append(b, `,"cache_creation_input_tokens":0,"cache_read_input_tokens":`...)
		b = strconv.AppendInt(b, int64(u.CachedTokens), 10)
		b = append(b, ',')
	}
	b = append(b, `"output_tokens":`...)
	b = strconv.AppendInt(b, int64(u.CompletionTokens), 10)
	return append(b, '}')
}

func appendNullable(b []byte, s string) []byte {
	if s == "" {
		return append(b, "null"...)
	}
	return llm.AppendQuote(b, s)
}

func protocolError(format string, args ...any) *llm.Error {
	return &llm.Error{Kind: llm.KindUpstreamProtocol, Status: http.StatusBadGateway, Type: "server_error",
		Code: "upstream_error", Message: fmt.Sprintf(format, args...)}
}

// ErrorType is Anthropic's error type for a gateway error, chosen by
// status as Anthropic's API does.
func ErrorType(e *llm.Error) string {
	switch e.Status {
	case http.StatusUnauthorized:
		return "authentication_error"
	case http.StatusPaymentRequired:
		return "billing_error"
	case http.StatusForbidden:
		return "permission_error"
	case http.StatusNotFound:
		return "not_found_error"
	case http.StatusRequestEntityTooLarge:
		return "request_too_large"
	case http.StatusTooManyRequests:
		return "rate_limit_error"
	case http.StatusGatewayTimeout:
		return "timeout_error"
	case http.StatusServiceUnavailable, 529:
		return "overloaded_error"
	}
	if e.Status >= 500 || e.Status == 0 {
		return "api_error"
	}
	return "invalid_request_error"
}

// AppendError appends e as Anthropic's error body:
// {"type":"error","error":{"type":…,"message":…},"request_id":…}.
func AppendError(b []byte, e *llm.Error, requestID string) []byte {
	b = append(b, `{"type":"error","error":{"type":`...)
	b = llm.AppendQuote(b, ErrorType(e))
	b = append(b, `,"message":`...)
	b = llm.AppendQuote(b, e.Message)
	b = append(b, '}')
	if requestID != "" {
		b = append(b, `,"request_id":`...)
		b = llm.AppendQuote(b, requestID)
	}
	return append(b, '}')
}
