package mockllm

import (
	"encoding/base64"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"

	"gatehouse/internal/llm"
)

// respExchange is a validated Responses request and the answer it gets.
// The plain and the streamed answer are both written from it, which is
// what keeps their output and usage identical.
type respExchange struct {
	req              *respRequest
	model            string
	stream           bool
	huge             int // @mock(huge=N): the reply text is N bytes
	tools            []respTool
	forced           string // the function tool_choice forces, if any
	encrypted        bool   // include asks for reasoning.encrypted_content
	inputTokens      int
	lastUser         string // the text of the last user message: directives live there
	endsInToolOutput bool

	// Set by plan.
	id              string
	created         int64
	items           []respOutput
	reasoningTokens int
	incomplete      bool   // max_output_tokens cut the reply
	head, mid, tail []byte // the parts of the response object that echo the request
}

// respOutput is one output item.
type respOutput struct {
	typ          string // "reasoning", "message" or "function_call"
	id           string
	text         string // the message's text, the call's arguments, or the reasoning summary
	cuts         []int  // text[cuts[i]:cuts[i+1]] is token i (messages and calls)
	callID, name string
}

func (o *respOutput) tokens() int { return max(len(o.cuts)-1, 0) }

// reasoningSummary is what a reasoning item's summary says when one is
// asked for; its length in tokens is the reasoning a reply costs.
const reasoningSummary = "**Answering the user**\n\nThe user sent a message, so the reply quotes it back to them."

// plan decides the output: a reasoning item for models that reason, then
// a call of the function named by tool (the @mock directive) or forced by
// tool_choice (the directive wins, even over tool_choice "none": the test
// asked for it) — unless the input ends with a tool's output, which the
// model answers in text so a client's tool loop ends — or else text.
func (x *respExchange) plan(s *Server, tool string) *apiError {
	name := x.forced
	if tool != "" {
		if x.tool(tool) == nil {
			return invalidRequest("tools", "invalid_mock_directive", "@mock(tool=%s): the request defines no function named %q", tool, tool)
		}
		name = tool
	}
	x.id = hexID("resp_")
	x.created = time.Now().Unix()
	if x.reasons() {
		x.reasoningTokens = len(tokenCuts(reasoningSummary)) - 1
		o := respOutput{typ: "reasoning", id: hexID("rs_")}
		if x.summary() != nil {
			o.text = reasoningSummary
		}
		x.items = append(x.items, o)
	}
	if name != "" && !x.endsInToolOutput {
		args := mockArguments(x.tool(name).Parameters)
		x.items = append(x.items, respOutput{typ: "function_call", id: hexID("fc_"),
			callID: "call_" + newRequestID()[4:28], name: name, text: args, cuts: pieceCuts(args)})
	} else {
		x.planText(s)
	}
	x.head, x.mid, x.tail = x.appendHead(nil), x.appendMid(nil), x.appendTail(nil)
	return nil
}

// planText adds the message item, cut to max_output_tokens, which counts
// the reasoning too: a budget the reasoning uses up leaves no message.
func (x *respExchange) planText(s *Server) {
	reply := s.opts.Reply
	if reply == "" {
		reply = defaultReply(x.lastUser)
	}
	if x.huge > 0 {
		reply = hugeReply(x.huge)
	}
	text, cuts := reply, tokenCuts(reply)
	if f := x.format(); f != nil && f.Type == "json_schema" {
		text = mockArguments(f.Schema)
		cuts = pieceCuts(text)
	} else if f != nil && f.Type == "json_object" {
		text = string(llm.AppendQuote([]byte(`{"message":`), reply)) + "}"
		cuts = pieceCuts(text)
	}
	if limit := x.req.MaxOutputTokens; limit != nil && x.reasoningTokens+len(cuts)-1 > *limit {
		x.incomplete = true
		if *limit <= x.reasoningTokens {
			x.reasoningTokens = *limit
			return
		}
		n := *limit - x.reasoningTokens
		cuts = cuts[:n+1]
		text = text[:cuts[n]]
	}
	x.items = append(x.items, respOutput{typ: "message", id: hexID("msg_"), text: text, cuts: cuts})
}

// reasons reports whether the reply starts with a reasoning item: for the
// models that reason, and for any model asked to, unless effort is none.
func (x *respExchange) reasons() bool {
	r := x.req.Reasoning
	if r != nil && r.Effort != nil && *r.Effort == "none" {
		return false
	}
	return r != nil || reasoningModel(x.model)
}

func (x *respExchange) summary() *string {
	r := x.req.Reasoning
	switch {
	case r == nil:
		return nil
	case r.Summary != nil:
		return r.Summary
	}
	return r.GenerateSummary
}

func (x *respExchange) format() *respFormat {
	if x.req.Text == nil {
		return nil
	}
	return x.req.Text.Format
}

func (x *respExchange) outputTokens() int {
	n := x.reasoningTokens
	for i := range x.items {
		n += x.items[i].tokens()
	}
	return n
}

func (x *respExchange) status() string {
	if x.incomplete {
		return "incomplete"
	}
	return "completed"
}

// pieceCuts cuts JSON, which has few spaces to split words at, into
// tokens of about four bytes, never inside a character.
func pieceCuts(s string) []int {
	cuts := []int{0}
	for i := 4; i < len(s); i += 4 {
		for i < len(s) && !utf8.RuneStart(s[i]) {
			i++
		}
		if i < len(s) {
			cuts = append(cuts, i)
		}
	}
	if len(s) > 0 {
		cuts = append(cuts, len(s))
	}
	return cuts
}

// hexID is an id in OpenAI's Responses form: a prefix and 48 hex digits.
func hexID(prefix string) string {
	const hex = "0123456789abcdef"
	b := make([]byte, len(prefix), len(prefix)+48)
	copy(b, prefix)
	for range 3 {
		x := rand.Uint64()
		for range 16 {
			b = append(b, hex[x&0xf])
			x >>= 4
		}
	}
	return string(b)
}

// appendResponse appends the response object: status is "in_progress"
// (while streaming: no output, no usage), "completed" or "incomplete".
func (x *respExchange) appendResponse(b []byte, status string) []byte {
	final := status != "in_progress"
	b = append(b, `{"id":`...)
	b = llm.AppendQuote(b, x.id)
	b = append(b, `,"object":"response","created_at":`...)
	b = appendInt(b, x.created)
	b = append(b, `,"status":"`...)
	b = append(b, status...)
	b = append(b, `","completed_at":`...)
	if status == "completed" {
		b = appendInt(b, time.Now().Unix())
	} else {
		b = append(b, "null"...)
	}
	b = append(b, `,"background":false,"error":null,"incomplete_details":`...)
	if final && x.incomplete {
		b = append(b, `{"reason":"max_output_tokens"}`...)
	} else {
		b = append(b, "null"...)
	}
	b = append(b, x.head...)
	b = append(b, `,"output":[`...)
	if final {
		for i := range x.items {
			if i > 0 {
				b = append(b, ',')
			}
			b = x.appendItem(b, &x.items[i], true)
		}
	}
	b = append(b, ']')
	b = append(b, x.mid...)
	b = append(b, `,"usage":`...)
	if final {
		b = x.appendUsage(b)
	} else {
		b = append(b, "null"...)
	}
	return append(b, x.tail...)
}

// appendHead appends the echoed fields between incomplete_details and
// output.
func (x *respExchange) appendHead(b []byte) []byte {
	r := x.req
	b = append(b, `,"instructions":`...)
	b = appendStringOr(b, r.Instructions, "null")
	b = append(b, `,"max_output_tokens":`...)
	b = appendIntOr(b, r.MaxOutputTokens, "null")
	b = append(b, `,"max_tool_calls":`...)
	b = appendIntOr(b, r.MaxToolCalls, "null")
	b = append(b, `,"model":`...)
	return llm.AppendQuote(b, x.model)
}

// appendMid appends the echoed fields between output and usage.
func (x *respExchange) appendMid(b []byte) []byte {
	r := x.req
	b = append(b, `,"parallel_tool_calls":`...)
	b = strconv.AppendBool(b, r.ParallelToolCalls == nil || *r.ParallelToolCalls)
	b = append(b, `,"previous_response_id":null,"prompt_cache_key":`...)
	b = appendStringOr(b, r.PromptCacheKey, "null")
	b = append(b, `,"reasoning":{"effort":`...)
	var effort *string
	if r.Reasoning != nil {
		effort = r.Reasoning.Effort
	}
	def := "null"
	if x.reasons() {
		def = `"medium"`
	}
	b = appendStringOr(b, effort, def)
	b = append(b, `,"summary":`...)
	b = appendStringOr(b, x.summary(), "null")
	b = append(b, `},"safety_identifier":`...)
	b = appendStringOr(b, r.SafetyIdentifier, "null")
	b = append(b, `,"service_tier":"default","store":`...)
	b = strconv.AppendBool(b, r.Store == nil || *r.Store)
	b = append(b, `,"temperature":`...)
	b = appendFloatOr(b, r.Temperature)
	b = append(b, `,"text":{"format":`...)
	b = x.appendFormat(b)
	b = append(b, `,"verbosity":`...)
	var verbosity *string
	if r.Text != nil {
		verbosity = r.Text.Verbosity
	}
	b = appendStringOr(b, verbosity, `"medium"`)
	b = append(b, `},"tool_choice":`...)
	b = x.appendToolChoice(b)
	b = append(b, `,"tools":[`...)
	for i, t := range x.tools {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"type":"function","description":`...)
		b = appendStringOr(b, t.Description, "null")
		b = append(b, `,"name":`...)
		b = llm.AppendQuote(b, *t.Name)
		b = append(b, `,"parameters":`...)
		b = appendRawOr(b, t.Parameters, "null")
		b = append(b, `,"strict":`...)
		b = strconv.AppendBool(b, t.Strict == nil || *t.Strict)
		b = append(b, '}')
	}
	b = append(b, `],"top_logprobs":`...)
	b = appendIntOr(b, r.TopLogprobs, "0")
	b = append(b, `,"top_p":`...)
	b = appendFloatOr(b, r.TopP)
	b = append(b, `,"truncation":`...)
	return appendStringOr(b, r.Truncation, `"disabled"`)
}

// appendTail appends the echoed fields after usage, and the closing brace.
func (x *respExchange) appendTail(b []byte) []byte {
	b = append(b, `,"user":`...)
	b = appendStringOr(b, x.req.User, "null")
	b = append(b, `,"metadata":`...)
	b = appendRawOr(b, x.req.Metadata, "{}")
	return append(b, '}')
}

func (x *respExchange) appendFormat(b []byte) []byte {
	f := x.format()
	switch {
	case f == nil || f.Type == "text":
		return append(b, `{"type":"text"}`...)
	case f.Type == "json_object":
		return append(b, `{"type":"json_object"}`...)
	}
	b = append(b, `{"type":"json_schema","description":`...)
	b = appendStringOr(b, f.Description, "null")
	b = append(b, `,"name":`...)
	b = llm.AppendQuote(b, *f.Name)
	b = append(b, `,"schema":`...)
	b = appendRawOr(b, f.Schema, "{}")
	b = append(b, `,"strict":`...)
	b = strconv.AppendBool(b, f.Strict != nil && *f.Strict)
	return append(b, '}')
}

func (x *respExchange) appendToolChoice(b []byte) []byte {
	raw := x.req.ToolChoice
	if len(raw) == 0 || string(raw) == "null" {
		return append(b, `"auto"`...)
	}
	if raw[0] == '"' {
		return appendRawOr(b, raw, `"auto"`)
	}
	b = append(b, `{"type":"function","name":`...)
	b = llm.AppendQuote(b, x.forced)
	return append(b, '}')
}

func (x *respExchange) appendUsage(b []byte) []byte {
	out := x.outputTokens()
	b = append(b, `{"input_tokens":`...)
	b = appendInt(b, int64(x.inputTokens))
	b = append(b, `,"input_tokens_details":{"cached_tokens":0},"output_tokens":`...)
	b = appendInt(b, int64(out))
	b = append(b, `,"output_tokens_details":{"reasoning_tokens":`...)
	b = appendInt(b, int64(x.reasoningTokens))
	b = append(b, `},"total_tokens":`...)
	b = appendInt(b, int64(x.inputTokens+out))
	return append(b, '}')
}

// appendItem appends an output item as it is when done, or as
// response.output_item.added announces it: in progress, without content.
func (x *respExchange) appendItem(b []byte, o *respOutput, done bool) []byte {
	b = append(b, `{"id":`...)
	b = llm.AppendQuote(b, o.id)
	b = append(b, `,"type":"`...)
	b = append(b, o.typ...)
	b = append(b, '"')
	switch o.typ {
	case "reasoning":
		if done && x.encrypted {
			b = append(b, `,"encrypted_content":`...)
			b = llm.AppendQuote(b, x.encryptedContent())
		}
		b = append(b, `,"summary":[`...)
		if done && o.text != "" {
			b = appendSummaryPart(b, o.text)
		}
		return append(b, "]}"...)
	case "message":
		b = append(b, `,"status":`...)
		b = x.appendItemStatus(b, done)
		b = append(b, `,"content":[`...)
		if done {
			b = appendOutputText(b, o.text)
		}
		return append(b, `],"role":"assistant"}`...)
	}
	b = append(b, `,"status":`...)
	b = x.appendItemStatus(b, done)
	b = append(b, `,"arguments":`...)
	if done {
		b = llm.AppendQuote(b, o.text)
	} else {
		b = append(b, `""`...)
	}
	b = append(b, `,"call_id":`...)
	b = llm.AppendQuote(b, o.callID)
	b = append(b, `,"name":`...)
	b = llm.AppendQuote(b, o.name)
	return append(b, '}')
}

func (x *respExchange) appendItemStatus(b []byte, done bool) []byte {
	switch {
	case !done:
		return append(b, `"in_progress"`...)
	case x.incomplete:
		return append(b, `"incomplete"`...)
	}
	return append(b, `"completed"`...)
}

// encryptedContent stands for the model's reasoning, which OpenAI returns
// encrypted; it is derived from the request so fixtures stay stable.
func (x *respExchange) encryptedContent() string {
	return "gAAAAAB" + base64.StdEncoding.EncodeToString([]byte("mockllm reasoning for "+x.model+": "+reasoningSummary))
}

func appendOutputText(b []byte, text string) []byte {
	b = append(b, `{"type":"output_text","annotations":[],"logprobs":[],"text":`...)
	b = llm.AppendQuote(b, text)
	return append(b, '}')
}

func appendSummaryPart(b []byte, text string) []byte {
	b = append(b, `{"type":"summary_text","text":`...)
	b = llm.AppendQuote(b, text)
	return append(b, '}')
}

func appendIntOr(b []byte, n *int, def string) []byte {
	if n == nil {
		return append(b, def...)
	}
	return appendInt(b, int64(*n))
}

// appendFloatOr appends *f as OpenAI writes sampling parameters (1.0, not
// 1), or 1.0, their default, when f is nil.
func appendFloatOr(b []byte, f *float64) []byte {
	if f == nil {
		return append(b, "1.0"...)
	}
	n := len(b)
	b = strconv.AppendFloat(b, *f, 'f', -1, 64)
	for _, c := range b[n:] {
		if c == '.' {
			return b
		}
	}
	return append(b, ".0"...)
}

// completeResponse writes the response object. stall_after and fail_after
// apply too, as for chat: half the body is sent, then it goes silent or
// is cut.
func (c *call) completeResponse(x *respExchange, p *plan) {
	if !c.wait(p.latency) || !c.read(p, x.inputTokens) || !c.generate(p, x.outputTokens()) {
		return
	}
	bp := c.s.bufs.Get().(*[]byte)
	defer c.s.putBuf(bp)
	b := x.appendResponse((*bp)[:0], x.status())
	*bp = b
	if p.stallAfter < 0 && p.failAfter < 0 {
		c.writeJSON(http.StatusOK, b)
		return
	}
	h := c.w.Header()
	h["Content-Type"] = hdrJSON
	h["Content-Length"] = []string{itoa(len(b))}
	c.setCommonHeaders(h)
	c.w.WriteHeader(http.StatusOK)
	if c.write(b[:len(b)/2]) {
		c.breakOff(p.failAfter >= 0)
	}
}

// putBuf returns a response buffer to the pool unless it grew too big to
// keep.
func (s *Server) putBuf(bp *[]byte) {
	if cap(*bp) <= 64<<10 {
		s.bufs.Put(bp)
	}
}
