package responses

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"gatehouse/internal/llm"
)

// Response statuses.
const (
	StatusInProgress = "in_progress"
	StatusCompleted  = "completed"
	StatusIncomplete = "incomplete"
	StatusFailed     = "failed"
)

// Meta is what a response says about itself rather than about the answer.
type Meta struct {
	ID        string // resp_…
	CreatedAt int64  // unix seconds
	Model     string // the model asked for, until the backend names its own
	Previous  string // previous_response_id, "" when none
}

// itemKind is the type of an output item.
type itemKind uint8

const (
	kindMessage itemKind = iota
	kindReasoning
	kindCall
)

// output is one output item as the translation builds it.
type output struct {
	kind      itemKind
	id        string
	text      strings.Builder // message text or reasoning text
	refusal   strings.Builder
	signature strings.Builder // reasoning: the backend's opaque proof of it
	callID    string
	name      string
	args      strings.Builder
	done      bool
	cut       bool // done, but the answer broke off in it
	summary   bool // reasoning given as a summary (Request.summary)
}

// builder assembles a response object; the non-streamed answer and the
// stream's snapshots share it, so both say exactly the same things.
type builder struct {
	req        *Request
	meta       Meta
	items      []*output
	status     string
	incomplete string // incomplete_details.reason
	failure    *llm.Error
	usage      *llm.Usage
	cost       string // usage.cost, "" when not priced
	// slot is where the last appendResponse wrote the usage object,
	// counted from the start of its dst; End 0 when it wrote null.
	slot llm.UsageSlot
}

func (b *builder) add(k itemKind) *output {
	o := &output{kind: k}
	n := strconv.Itoa(len(b.items))
	switch k {
	case kindMessage:
		o.id = "msg_" + b.suffix() + "_" + n
	case kindReasoning:
		o.id = "rs_" + b.suffix() + "_" + n
		o.summary = b.req.summary
	case kindCall:
		o.id = "fc_" + b.suffix() + "_" + n
	}
	b.items = append(b.items, o)
	return o
}

// suffix is the response id without its prefix: item ids derive from it,
// so they are unique wherever the response id is.
func (b *builder) suffix() string {
	_, s, ok := strings.Cut(b.meta.ID, "_")
	if !ok {
		return b.meta.ID
	}
	return s
}

// finish sets the status from a chat finish reason.
func (b *builder) finish(reason string) {
	switch reason {
	case llm.FinishLength:
		b.status, b.incomplete = StatusIncomplete, "max_output_tokens"
	case llm.FinishContentFilter:
		b.status, b.incomplete = StatusIncomplete, "content_filter"
	case llm.FinishError, llm.FinishMalformedToolCall:
		b.status = StatusFailed
		b.failure = &llm.Error{Code: "server_error", Message: fmt.Sprintf("the backend ended the response with finish_reason %q", reason)}
	default:
		b.status = StatusCompleted
	}
}

// appendItem writes an output item. encrypted says whether reasoning
// carries its proof (include: reasoning.encrypted_content, and always in
// what is stored).
func appendItem(b []byte, o *output, encrypted bool) []byte {
	status := StatusCompleted
	switch {
	case !o.done:
		status = StatusInProgress
	case o.cut:
		status = StatusIncomplete
	}
	switch o.kind {
	case kindMessage:
		b = append(b, `{"id":`...)
		b = llm.AppendQuote(b, o.id)
		b = append(b, `,"type":"message","status":"`...)
		b = append(b, status...)
		b = append(b, `","content":[`...)
		if o.done {
			b = appendParts(b, o)
		}
		b = append(b, `],"role":"assistant"}`...)
	case kindReasoning:
		b = append(b, `{"id":`...)
		b = llm.AppendQuote(b, o.id)
		b = append(b, `,"type":"reasoning","summary":[`...)
		if o.done && o.summary {
			b = append(b, `{"type":"summary_text","text":`...)
			b = llm.AppendQuote(b, o.text.String())
			b = append(b, '}')
		}
		b = append(b, ']')
		if o.done {
			if !o.summary {
				b = append(b, `,"content":[{"type":"reasoning_text","text":`...)
				b = llm.AppendQuote(b, o.text.String())
				b = append(b, `}]`...)
			}
			if encrypted && o.signature.Len() > 0 {
				b = append(b, `,"encrypted_content":`...)
				b = llm.AppendQuote(b, o.signature.String())
			}
		}
		b = append(b, `,"status":"`...)
		b = append(b, status...)
		b = append(b, `"}`...)
	case kindCall:
		b = append(b, `{"id":`...)
		b = llm.AppendQuote(b, o.id)
		b = append(b, `,"type":"function_call","status":"`...)
		b = append(b, status...)
		b = append(b, `","arguments":`...)
		if o.done {
			b = llm.AppendQuote(b, o.args.String())
		} else {
			b = append(b, `""`...)
		}
		b = append(b, `,"call_id":`...)
		b = llm.AppendQuote(b, o.callID)
		b = append(b, `,"name":`...)
		b = llm.AppendQuote(b, o.name)
		b = append(b, '}')
	}
	return b
}

// appendParts writes a finished message's content parts.
func appendParts(b []byte, o *output) []byte {
	n := 0
	if o.text.Len() > 0 || o.refusal.Len() == 0 {
		b = appendTextPart(b, o.text.String())
		n++
	}
	if o.refusal.Len() > 0 {
		if n > 0 {
			b = append(b, ',')
		}
		b = appendRefusalPart(b, o.refusal.String())
	}
	return b
}

func appendTextPart(b []byte, text string) []byte {
	b = append(b, `{"type":"output_text","annotations":[],"logprobs":[],"text":`...)
	b = llm.AppendQuote(b, text)
	return append(b, '}')
}

func appendRefusalPart(b []byte, text string) []byte {
	b = append(b, `{"type":"refusal","refusal":`...)
	b = llm.AppendQuote(b, text)
	return append(b, '}')
}

// appendOutput writes the output array.
func (b *builder) appendOutput(dst []byte, encrypted bool) []byte {
	dst = append(dst, '[')
	for i, o := range b.items {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendItem(dst, o, encrypted)
	}
	return append(dst, ']')
}

// appendResponse writes the response object in the order OpenAI's
// reference lists its fields, repeating the request's settings.
func (b *builder) appendResponse(dst []byte) []byte {
	r := b.req
	e := &r.echo
	dst = append(dst, `{"id":`...)
	dst = llm.AppendQuote(dst, b.meta.ID)
	dst = append(dst, `,"object":"response","created_at":`...)
	dst = strconv.AppendInt(dst, b.meta.CreatedAt, 10)
	dst = append(dst, `,"status":"`...)
	dst = append(dst, b.status...)
	dst = append(dst, `","background":false,"error":`...)
	if f := b.failure; f != nil {
		dst = append(dst, `{"code":`...)
		dst = llm.AppendQuote(dst, f.Code)
		dst = append(dst, `,"message":`...)
		dst = llm.AppendQuote(dst, f.Message)
		dst = append(dst, '}')
	} else {
		dst = append(dst, "null"...)
	}
	dst = append(dst, `,"incomplete_details":`...)
	if b.incomplete != "" {
		dst = append(dst, `{"reason":`...)
		dst = llm.AppendQuote(dst, b.incomplete)
		dst = append(dst, '}')
	} else {
		dst = append(dst, "null"...)
	}
	dst = append(dst, `,"instructions":`...)
	if r.instructions != nil {
		dst = llm.AppendQuote(dst, *r.instructions)
	} else {
		dst = append(dst, "null"...)
	}
	dst = append(dst, `,"max_output_tokens":`...)
	dst = appendRaw(dst, e.maxOutputTokens, "null")
	dst = append(dst, `,"max_tool_calls":null,"model":`...)
	dst = llm.AppendQuote(dst, b.meta.Model)
	dst = append(dst, `,"output":`...)
	dst = b.appendOutput(dst, r.IncludeEncrypted)
	dst = append(dst, `,"parallel_tool_calls":`...)
	dst = appendRaw(dst, e.parallelToolCalls, "true")
	dst = append(dst, `,"previous_response_id":`...)
	if b.meta.Previous != "" {
		dst = llm.AppendQuote(dst, b.meta.Previous)
	} else {
		dst = append(dst, "null"...)
	}
	dst = append(dst, `,"prompt_cache_key":`...)
	dst = appendRaw(dst, e.promptCacheKey, "null")
	dst = append(dst, `,"reasoning":`...)
	dst = appendRaw(dst, e.reasoning, `{"effort":null,"summary":null}`)
	dst = append(dst, `,"safety_identifier":`...)
	dst = appendRaw(dst, e.safetyIdentifier, "null")
	dst = append(dst, `,"service_tier":`...)
	dst = appendRaw(dst, e.serviceTier, `"default"`)
	dst = append(dst, `,"store":`...)
	dst = strconv.AppendBool(dst, r.Store)
	dst = append(dst, `,"temperature":`...)
	dst = appendRaw(dst, e.temperature, "1.0")
	dst = append(dst, `,"text":`...)
	dst = appendRaw(dst, e.text, `{"format":{"type":"text"},"verbosity":"medium"}`)
	dst = append(dst, `,"tool_choice":`...)
	dst = appendRaw(dst, e.toolChoice, `"auto"`)
	dst = append(dst, `,"tools":`...)
	dst = appendRaw(dst, e.tools, "[]")
	dst = append(dst, `,"top_logprobs":0,"top_p":`...)
	dst = appendRaw(dst, e.topP, "1.0")
	dst = append(dst, `,"truncation":`...)
	dst = appendRaw(dst, e.truncation, `"disabled"`)
	dst = append(dst, `,"usage":`...)
	if b.usage != nil {
		dst, b.slot = appendUsage(dst, *b.usage, b.cost)
	} else {
		b.slot = llm.UsageSlot{}
		dst = append(dst, "null"...)
	}
	dst = append(dst, `,"user":`...)
	dst = appendRaw(dst, e.user, "null")
	dst = append(dst, `,"metadata":`...)
	dst = appendRaw(dst, e.metadata, "{}")
	return append(dst, '}')
}

// appendRaw writes a value the client sent (compacted at parse), or def
// when it sent none or null.
func appendRaw(dst, v []byte, def string) []byte {
	if len(v) == 0 || llm.KindOf(v) == llm.KindNull {
		return append(dst, def...)
	}
	return append(dst, v...)
}

// appendUsage writes the Responses API's usage object; cost, when set, is
// the gateway's price of it in USD. It returns where in b the object (and
// its cost) went, so the cost can be set later without finding it again.
func appendUsage(b []byte, u llm.Usage, cost string) ([]byte, llm.UsageSlot) {
	slot := llm.UsageSlot{Start: len(b)}
	total := u.TotalTokens
	if total == 0 {
		total = u.PromptTokens + u.CompletionTokens
	}
	b = append(b, `{"input_tokens":`...)
	b = strconv.AppendInt(b, int64(u.PromptTokens), 10)
	b = append(b, `,"input_tokens_details":{"cached_tokens":`...)
	b = strconv.AppendInt(b, int64(u.CachedTokens), 10)
	b = append(b, `},"output_tokens":`...)
	b = strconv.AppendInt(b, int64(u.CompletionTokens), 10)
	b = append(b, `,"output_tokens_details":{"reasoning_tokens":`...)
	b = strconv.AppendInt(b, int64(u.ReasoningTokens), 10)
	b = append(b, `},"total_tokens":`...)
	b = strconv.AppendInt(b, int64(total), 10)
	if cost != "" {
		b = append(b, `,"cost":`...)
		slot.CostStart = len(b)
		b = append(b, cost...)
		slot.CostEnd = len(b)
	}
	b = append(b, '}')
	slot.End = len(b)
	return b, slot
}

// completion is the part of a chat.completion the translation reads.
type completion struct {
	Model   string         `json:"model"`
	Choices []llm.Choice   `json:"choices"`
	Usage   *llm.WireUsage `json:"usage"`
}

// Encoded is a translated answer: the response object the client gets and
// the output items to keep when the response is stored.
type Encoded struct {
	ID   string // the response's id; "" to read it from Body
	Body []byte
	// Usage locates Body's usage object, for the gateway's cost to go in
	// without walking the body the translation has just written; End 0
	// when unknown (a native backend's body, relayed as it came).
	Usage  llm.UsageSlot
	Output []byte // the output array, reasoning proofs included
	Status string
}

// EncodeResponse re-expresses a backend's chat.completion body as a
// response object for r.
func EncodeResponse(body []byte, r *Request, m Meta) (*Encoded, error) {
	var c completion
	if err := json.Unmarshal(body, &c); err != nil {
		return nil, protocolError("the backend's response is not a valid chat completion: %v", err)
	}
	if len(c.Choices) == 0 {
		return nil, protocolError("the backend's response has no choices")
	}
	if c.Model != "" {
		m.Model = c.Model
	}
	b := &builder{req: r, meta: m}
	msg := &c.Choices[0].Message
	if msg.ReasoningContent != "" || msg.ReasoningSignature != "" {
		o := b.add(kindReasoning)
		o.text.WriteString(msg.ReasoningContent)
		o.signature.WriteString(msg.ReasoningSignature)
	}
	content := msg.Content != nil && *msg.Content != ""
	refused := msg.Refusal != nil && *msg.Refusal != ""
	if content || refused || len(msg.ToolCalls) == 0 {
		o := b.add(kindMessage)
		if content {
			o.text.WriteString(*msg.Content)
		}
		if refused {
			o.refusal.WriteString(*msg.Refusal)
		}
	}
	for i, tc := range msg.ToolCalls {
		o := b.add(kindCall)
		o.callID = tc.ID
		if o.callID == "" {
			o.callID = "call_" + b.suffix() + "_" + strconv.Itoa(i)
		}
		o.name = tc.Function.Name
		o.args.WriteString(tc.Function.Arguments)
	}
	for _, o := range b.items {
		o.done = true
	}
	b.finish(c.Choices[0].FinishReason)
	if c.Usage != nil {
		u := c.Usage.Usage()
		b.usage = &u
	} else {
		b.usage = &llm.Usage{}
	}
	e := &Encoded{ID: m.ID, Body: b.appendResponse(make([]byte, 0, 1024+len(body)))}
	e.Usage = b.slot // appendResponse started at the body's first byte
	e.Output = b.appendOutput(nil, true)
	e.Status = b.status
	return e, nil
}

func protocolError(format string, args ...any) *llm.Error {
	return &llm.Error{Kind: llm.KindUpstreamProtocol, Status: http.StatusBadGateway, Type: "server_error",
		Code: "upstream_error", Message: fmt.Sprintf(format, args...)}
}

// Conversation joins JSON item arrays (the conversation before, this
// request's input, this response's output) into the array a stored
// response keeps.
func Conversation(arrays ...[]byte) []byte {
	out := []byte{'['}
	for _, a := range arrays {
		a = trimArray(a)
		if len(a) == 0 {
			continue
		}
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = append(out, a...)
	}
	return append(out, ']')
}

// trimArray returns the inside of a JSON array (what is between its
// brackets, without surrounding space).
func trimArray(a []byte) []byte {
	s := strings.TrimSpace(string(a))
	if len(s) < 2 || s[0] != '[' {
		return nil
	}
	return []byte(strings.TrimSpace(s[1 : len(s)-1]))
}
