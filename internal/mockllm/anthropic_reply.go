package mockllm

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"gatehouse/internal/llm"
)

// anthReply is the answer to one Messages request. The plain and the
// streamed answer are both written from it, so their content and usage
// agree.
type anthReply struct {
	id, model string
	thinking  string // "" unless thinking is enabled
	text      string
	cuts      []int // text[cuts[i]:cuts[i+1]] is token i
	tool      *anthCall
	stop      string // stop_reason
	stopSeq   string // the stop sequence that ended the text, if one did
	input     int    // input_tokens (not counting cache reads)
	cacheRead int
	output    int
}

type anthCall struct {
	id, name string
	input    []byte // JSON object
}

// anthThinkingText is what the mock "thinks" when thinking is enabled.
const anthThinkingText = "The user wants an answer from the mock. I will quote what they said."

// anthSignature is the mock's signature of a thinking text. Anthropic
// rejects thinking handed back with a signature that does not match, and
// so does the mock: a gateway that mangles either is caught.
func anthSignature(thinking string) string {
	sum := sha256.Sum256([]byte("mockllm thinking:" + thinking))
	return base64.StdEncoding.EncodeToString(sum[:])
}

// anthID returns n random base62 characters, as in Anthropic's ids.
func anthID(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = idAlphabet[rand.IntN(len(idAlphabet))]
	}
	return string(b)
}

func (s *Server) anthropicMessages(c *call, body []byte) {
	req, e := parseAnthropic(body, anthMessageFields)
	if e != nil {
		c.failAnthropic(e)
		return
	}
	c.model = *req.Model
	tokens, lastUser := req.promptText()
	p, perr := s.newPlan(c, lastUser)
	if perr != nil {
		c.failAnthropic(anthInvalid("%s", perr.message))
		return
	}
	if p.hang {
		c.block()
		return
	}
	if s.injectError(&p) {
		if c.wait(p.latency) {
			c.failAnthropic(anthInjected(p.errorStatus, c.model, p.retryAfter))
		}
		return
	}
	x, e := s.anthropicReply(req, &p, tokens, lastUser)
	if e != nil {
		c.failAnthropic(e)
		return
	}
	if req.Stream {
		c.anthStream(x, &p)
	} else {
		c.anthComplete(x, &p)
	}
}

func (s *Server) anthropicReply(req *anthRequest, p *plan, tokens int, lastUser string) (*anthReply, *anthError) {
	x := &anthReply{id: "msg_01" + anthID(22), model: *req.Model, stop: "end_turn", input: tokens}
	if req.cached {
		// A warm cache: half the prompt was read from it.
		x.cacheRead = tokens / 2
		x.input = tokens - x.cacheRead
	}
	count := func(s string) int { return (utf8.RuneCountInString(s) + 3) / 4 }
	if req.Thinking != nil && req.Thinking.Type == "enabled" {
		x.thinking = anthThinkingText
	}
	name, forced, e := req.chooseTool(p.tool)
	if e != nil {
		return nil, e
	}
	switch {
	case name != "":
		x.tool = &anthCall{id: "toolu_01" + anthID(22), name: name, input: anthSample(req.toolsByName[name].InputSchema)}
		x.stop = "tool_use"
		if !forced {
			// Unforced, Claude says what it is about to do; forced, the
			// API prefills the turn and the call comes alone.
			x.text = "I'll use the " + name + " tool."
		}
	default:
		x.text = s.opts.Reply
		if x.text == "" {
			x.text = defaultReply(lastUser)
		}
		if p.huge > 0 {
			x.text = hugeReply(p.huge)
		}
		for _, seq := range req.StopSequences {
			if i := strings.Index(x.text, seq); seq != "" && i >= 0 {
				x.text, x.stop, x.stopSeq = x.text[:i], "stop_sequence", seq
			}
		}
	}
	x.cuts = tokenCuts(x.text)
	thinkTokens := count(x.thinking)
	if room := *req.MaxTokens - thinkTokens; len(x.cuts)-1 > room {
		room = max(room, 0)
		x.cuts = x.cuts[:room+1]
		x.text = x.text[:x.cuts[room]]
		x.stop, x.stopSeq, x.tool = "max_tokens", "", nil
	}
	x.output = thinkTokens + len(x.cuts) - 1
	if x.tool != nil {
		x.output += count(string(x.tool.input)) + 10
	}
	x.output = max(x.output, 1)
	return x, nil
}

// chooseTool picks the tool the reply calls: the one tool_choice forces,
// else the one an @mock(tool=NAME) directive names, else with
// tool_choice "any" the first. forced says the API forced the call.
func (req *anthRequest) chooseTool(directive string) (name string, forced bool, e *anthError) {
	if directive != "" && req.toolsByName[directive] == nil {
		return "", false, anthInvalid("@mock(tool=%s): the request has no tool named %q", directive, directive)
	}
	tc := req.ToolChoice
	switch {
	case len(req.Tools) == 0 || (tc != nil && tc.Type == "none"):
		return "", false, nil
	case tc != nil && tc.Type == "tool":
		return tc.Name, true, nil
	case directive != "":
		return directive, tc != nil && tc.Type == "any", nil
	case tc != nil && tc.Type == "any":
		return req.Tools[0].Name, true, nil
	}
	return "", false, nil
}

// anthSample makes an input that fits a tool's JSON schema: every
// property present, strings "mock", numbers 1, the first enum value.
func anthSample(schema json.RawMessage) []byte {
	var v any
	_ = json.Unmarshal(schema, &v)
	b, err := json.Marshal(sampleValue(v, 0))
	if err != nil || len(b) == 0 || b[0] != '{' {
		return []byte("{}")
	}
	return b
}

func sampleValue(schema any, depth int) any {
	m, _ := schema.(map[string]any)
	if m == nil || depth > 8 {
		return "mock"
	}
	if enum, ok := m["enum"].([]any); ok && len(enum) > 0 {
		return enum[0]
	}
	typ, _ := m["type"].(string)
	if types, ok := m["type"].([]any); ok {
		for _, t := range types {
			if s, _ := t.(string); s != "null" {
				typ = s
				break
			}
		}
	}
	props, _ := m["properties"].(map[string]any)
	if typ == "" && props != nil {
		typ = "object"
	}
	switch typ {
	case "object":
		out := map[string]any{}
		for k, v := range props {
			out[k] = sampleValue(v, depth+1)
		}
		return out
	case "array":
		return []any{sampleValue(m["items"], depth+1)}
	case "integer":
		return 1
	case "number":
		return 1.5
	case "boolean":
		return true
	case "null":
		return nil
	}
	return "mock"
}

// appendAnthUsage appends Anthropic's usage object.
func appendAnthUsage(b []byte, x *anthReply, output int, tier bool) []byte {
	b = append(b, `{"input_tokens":`...)
	b = appendInt(b, int64(x.input))
	b = append(b, `,"cache_creation_input_tokens":0,"cache_read_input_tokens":`...)
	b = appendInt(b, int64(x.cacheRead))
	b = append(b, `,"output_tokens":`...)
	b = appendInt(b, int64(output))
	if tier {
		b = append(b, `,"service_tier":"standard"`...)
	}
	return append(b, '}')
}

func appendStopSequence(b []byte, x *anthReply) []byte {
	if x.stopSeq == "" {
		return append(b, "null"...)
	}
	return llm.AppendQuote(b, x.stopSeq)
}

// anthComplete writes the Message object. stall_after and fail_after
// send half the body and then go silent or cut the connection.
func (c *call) anthComplete(x *anthReply, p *plan) {
	if !c.wait(p.latency) {
		return
	}
	b := append([]byte(`{"id":`), llm.AppendQuote(nil, x.id)...)
	b = append(b, `,"type":"message","role":"assistant","model":`...)
	b = llm.AppendQuote(b, x.model)
	b = append(b, `,"content":[`...)
	sep := ""
	if x.thinking != "" {
		b = append(b, `{"type":"thinking","thinking":`...)
		b = llm.AppendQuote(b, x.thinking)
		b = append(b, `,"signature":`...)
		b = llm.AppendQuote(b, anthSignature(x.thinking))
		b = append(b, '}')
		sep = ","
	}
	if x.text != "" {
		b = append(b, sep+`{"type":"text","text":`...)
		b = llm.AppendQuote(b, x.text)
		b = append(b, '}')
		sep = ","
	}
	if x.tool != nil {
		b = append(b, sep+`{"type":"tool_use","id":`...)
		b = llm.AppendQuote(b, x.tool.id)
		b = append(b, `,"name":`...)
		b = llm.AppendQuote(b, x.tool.name)
		b = append(b, `,"input":`...)
		b = append(b, x.tool.input...)
		b = append(b, '}')
	}
	b = append(b, `],"stop_reason":"`+x.stop+`","stop_sequence":`...)
	b = appendStopSequence(b, x)
	b = append(b, `,"usage":`...)
	b = appendAnthUsage(b, x, x.output, true)
	b = append(b, '}')
	if p.stallAfter < 0 && p.failAfter < 0 {
		c.writeAnthropic(http.StatusOK, b)
		return
	}
	h := c.w.Header()
	h["Content-Type"] = hdrJSON
	h["Content-Length"] = []string{itoa(len(b))}
	c.setAnthropicHeaders(h)
	c.w.WriteHeader(http.StatusOK)
	if c.write(b[:len(b)/2]) {
		c.breakOff(p.failAfter >= 0)
	}
}

// anthStreamer writes one streamed reply: every event is "event: NAME",
// "data: JSON" and a blank line, flushed on its own.
type anthStreamer struct {
	c    *call
	p    *plan
	b    []byte
	sent int // content deltas written, for stall_after, fail_after and pacing
	live bool
}

func (w *anthStreamer) event(name string, data ...string) bool {
	w.b = append(w.b[:0], "event: "...)
	w.b = append(w.b, name...)
	w.b = append(w.b, "\ndata: "...)
	for _, d := range data {
		w.b = append(w.b, d...)
	}
	w.b = append(w.b, "\n\n"...)
	w.live = w.c.write(w.b)
	return w.live
}

// content writes a content delta of the given tokens, first breaking off
// or pausing as the plan says.
func (w *anthStreamer) content(tokens int, data ...string) bool {
	if w.sent == w.p.failAfter {
		w.c.breakOff(true)
	}
	if w.sent == w.p.stallAfter {
		w.c.breakOff(false)
		return false
	}
	// The first delta leaves with message_start: TTFT is the time to the
	// first token, pacing starts after it.
	if w.sent > 0 && w.p.tps > 0 && !w.c.wait(time.Duration(float64(tokens)/w.p.tps*float64(time.Second))) {
		return false
	}
	w.sent++
	return w.event("content_block_delta", data...)
}

func quote(s string) string { return string(llm.AppendQuote(nil, s)) }

// anthStream writes the documented event sequence: message_start, for
// each content block content_block_start, its deltas and
// content_block_stop (a ping after the first start), then message_delta
// with the stop reason and cumulative usage, and message_stop.
func (c *call) anthStream(x *anthReply, p *plan) {
	if !c.wait(p.ttft) {
		return
	}
	h := c.w.Header()
	h["Content-Type"] = hdrEventStream
	h["Cache-Control"] = hdrNoCache
	c.setAnthropicHeaders(h)
	c.w.WriteHeader(http.StatusOK)
	w := &anthStreamer{c: c, p: p, b: make([]byte, 0, 512)}
	start := string(appendAnthUsage([]byte(`{"type":"message_start","message":{"id":`+quote(x.id)+`,"type":"message","role":"assistant","model":`+quote(x.model)+
		`,"content":[],"stop_reason":null,"stop_sequence":null,"usage":`), x, 1, true)) + "}}"
	if !w.event("message_start", start) {
		return
	}
	index := 0
	blockStart := func(block string) bool {
		ok := w.event("content_block_start", `{"type":"content_block_start","index":`, itoa(index), `,"content_block":`, block, "}")
		if ok && index == 0 {
			ok = w.event("ping", `{"type": "ping"}`)
		}
		return ok
	}
	delta := func(d string) string {
		return `{"type":"content_block_delta","index":` + itoa(index) + `,"delta":` + d + "}"
	}
	blockStop := func() bool {
		ok := w.event("content_block_stop", `{"type":"content_block_stop","index":`, itoa(index), "}")
		index++
		return ok
	}
	if x.thinking != "" {
		if !blockStart(`{"type":"thinking","thinking":"","signature":""}`) ||
			!w.content(len(x.thinking)/4, delta(`{"type":"thinking_delta","thinking":`+quote(x.thinking)+"}")) ||
			!w.event("content_block_delta", delta(`{"type":"signature_delta","signature":`+quote(anthSignature(x.thinking))+"}")) ||
			!blockStop() {
			return
		}
	}
	if x.text != "" {
		if !blockStart(`{"type":"text","text":""}`) {
			return
		}
		tokens := len(x.cuts) - 1
		n := min(p.chunks, tokens)
		for i := range n {
			lo, hi := tokens*i/n, tokens*(i+1)/n
			if !w.content(hi-lo, delta(`{"type":"text_delta","text":`+quote(x.text[x.cuts[lo]:x.cuts[hi]])+"}")) {
				return
			}
		}
		if !blockStop() {
			return
		}
	}
	if t := x.tool; t != nil {
		if !blockStart(`{"type":"tool_use","id":`+quote(t.id)+`,"name":`+quote(t.name)+`,"input":{}}`) ||
			!w.event("content_block_delta", delta(`{"type":"input_json_delta","partial_json":""}`)) {
			return
		}
		for _, piece := range splitPieces(string(t.input), p.chunks) {
			if !w.content((len(piece)+3)/4, delta(`{"type":"input_json_delta","partial_json":`+quote(piece)+"}")) {
				return
			}
		}
		if !blockStop() {
			return
		}
	}
	if w.p.failAfter >= w.sent {
		c.breakOff(true)
	}
	if w.p.stallAfter >= w.sent {
		c.breakOff(false)
		return
	}
	md := `{"type":"message_delta","delta":{"stop_reason":"` + x.stop + `","stop_sequence":` + string(appendStopSequence(nil, x)) + `},"usage":` +
		string(appendAnthUsage(nil, x, x.output, false)) + "}"
	if w.event("message_delta", md) && w.event("message_stop", `{"type":"message_stop"}`) {
		c.outcome = outcomeCompleted
	}
}

// splitPieces cuts s into at most n pieces of about equal size, on rune
// boundaries, as Anthropic streams a tool's input in partial JSON.
func splitPieces(s string, n int) []string {
	n = max(1, min(n, len(s)/8))
	out := make([]string, 0, n)
	lo := 0
	for i := 1; i <= n; i++ {
		hi := len(s) * i / n
		for hi < len(s) && !utf8.RuneStart(s[hi]) {
			hi++
		}
		if hi > lo {
			out = append(out, s[lo:hi])
			lo = hi
		}
	}
	return out
}

// anthModel is one entry of Anthropic's models list.
type anthModel struct {
	id, name, created string
}

// anthDefaultModels is what GET /v1/models lists when Options.Models is
// empty.
var anthDefaultModels = []anthModel{
	{"claude-opus-4-1-20250805", "Claude Opus 4.1", "2025-08-05T00:00:00Z"},
	{"claude-sonnet-4-5-20250929", "Claude Sonnet 4.5", "2025-09-29T00:00:00Z"},
	{"claude-haiku-4-5-20251001", "Claude Haiku 4.5", "2025-10-01T00:00:00Z"},
	{"claude-3-5-haiku-20241022", "Claude Haiku 3.5", "2024-10-22T00:00:00Z"},
}

func (s *Server) anthModelList() []anthModel {
	if len(s.opts.Models) == 0 {
		return anthDefaultModels
	}
	out := make([]anthModel, len(s.opts.Models))
	for i, id := range s.opts.Models {
		out[i] = anthModel{id, id, "2025-01-01T00:00:00Z"}
	}
	return out
}

func appendAnthModel(b []byte, m anthModel) []byte {
	b = append(b, `{"type":"model","id":`...)
	b = llm.AppendQuote(b, m.id)
	b = append(b, `,"display_name":`...)
	b = llm.AppendQuote(b, m.name)
	b = append(b, `,"created_at":`...)
	b = llm.AppendQuote(b, m.created)
	return append(b, '}')
}

func (s *Server) anthropicModels() []byte {
	list := s.anthModelList()
	b := []byte(`{"data":[`)
	for i, m := range list {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendAnthModel(b, m)
	}
	b = append(b, `],"has_more":false,"first_id":`...)
	b = llm.AppendQuote(b, list[0].id)
	b = append(b, `,"last_id":`...)
	b = llm.AppendQuote(b, list[len(list)-1].id)
	return append(b, '}')
}

func (s *Server) anthropicModel(c *call, id string) {
	c.model = id
	for _, m := range s.anthModelList() {
		if m.id == id {
			c.writeAnthropic(http.StatusOK, appendAnthModel(nil, m))
			return
		}
	}
	c.failAnthropic(&anthError{status: http.StatusNotFound, typ: "not_found_error", message: "model: " + id})
}
