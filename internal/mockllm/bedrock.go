package mockllm

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"gatehouse/internal/llm"
)

// The Amazon Bedrock dialect: Converse (POST /model/{modelId}/converse)
// and ConverseStream (/converse-stream, answered in the AWS event-stream
// binary framing, see bedrock_stream.go). Requests are authenticated the
// way bedrock-runtime does it — a SigV4 signature checked against
// Options.AWSAccessKeyID/AWSSecretKey (sigv4.go), or a Bedrock API key as
// a bearer token — and validated as the Converse API reference documents:
// messages start with user and alternate, every toolUse is answered by a
// toolResult in the next turn, tool blocks need a toolConfig, text is not
// blank. The reply is the shared one (directives, pacing, injected
// failures); @mock(tool=NAME), or a toolChoice of any/tool, makes it a
// toolUse.
var bedrockDialect = dialect{
	name:  "bedrock",
	match: func(r *http.Request) bool { return strings.HasPrefix(r.URL.Path, "/model/") },
	serve: (*Server).serveBedrock,
}

// bedrockError is an AWS error: the type goes in x-amzn-ErrorType, the
// message in {"message": …}.
type bedrockError struct {
	status     int
	typ        string
	message    string
	retryAfter string
}

func bedrockValidation(format string, args ...any) *bedrockError {
	return &bedrockError{status: http.StatusBadRequest, typ: "ValidationException", message: fmt.Sprintf(format, args...)}
}

// bedrockTypes are the exception types Bedrock documents per status, for
// injected errors.
var bedrockTypes = map[int]struct{ typ, message string }{
	400: {"ValidationException", "Input validation failed. Check your request parameters and retry the request."},
	403: {"AccessDeniedException", "You don't have access to the model with the specified model ID."},
	404: {"ResourceNotFoundException", "The specified resource ARN was not found. Check the ARN and try your request again."},
	408: {"ModelTimeoutException", "Model has timed out in processing the request. Try your request again."},
	424: {"ModelErrorException", "The request failed due to an error while processing the model."},
	429: {"ThrottlingException", "Too many requests, please wait before trying again."},
	500: {"InternalServerException", "The server encountered an internal error while processing the request."},
	503: {"ServiceUnavailableException", "The service isn't currently available. Try again later."},
}

func bedrockInjected(status int, retryAfter string) *bedrockError {
	t, ok := bedrockTypes[status]
	if !ok {
		t = bedrockTypes[500]
		if status < 500 {
			t = bedrockTypes[400]
		}
	}
	return &bedrockError{status: status, typ: t.typ, message: t.message, retryAfter: retryAfter}
}

func (c *call) failBedrock(e *bedrockError) {
	h := c.w.Header()
	h["X-Amzn-Errortype"] = []string{e.typ + ":http://internal.amazon.com/coral/com.amazon.bedrock/"}
	if e.retryAfter != "" {
		h["Retry-After"] = []string{e.retryAfter}
	}
	b := append([]byte(`{"message":`), llm.AppendQuote(nil, e.message)...)
	c.writeBedrock(e.status, append(b, '}'))
}

// writeBedrock sends a whole JSON response with bedrock-runtime's headers.
func (c *call) writeBedrock(status int, body []byte) {
	h := c.w.Header()
	h["Content-Type"] = hdrJSON
	h["X-Amzn-Requestid"] = []string{c.reqID}
	c.writeWhole(status, body)
}

func (s *Server) serveBedrock(c *call, body []byte) {
	r := c.r
	rest := strings.TrimPrefix(r.URL.Path, "/model/")
	i := strings.LastIndexByte(rest, '/')
	if i <= 0 || r.Method != http.MethodPost {
		c.failBedrock(&bedrockError{status: http.StatusNotFound, typ: "UnknownOperationException", message: "Unknown operation"})
		return
	}
	model, op := rest[:i], rest[i+1:]
	if op != "converse" && op != "converse-stream" {
		c.failBedrock(&bedrockError{status: http.StatusNotFound, typ: "UnknownOperationException", message: "Unknown operation"})
		return
	}
	if e := s.bedrockAuth(r, body, time.Now()); e != nil {
		c.failBedrock(e)
		return
	}
	c.model = model
	req, e := parseConverse(body)
	if e != nil {
		c.failBedrock(e)
		return
	}
	x := s.bedrockExchange(req, model, op == "converse-stream")
	p, perr := s.newPlan(c, x.lastUser)
	if perr != nil {
		c.failBedrock(bedrockValidation("%s", perr.message))
		return
	}
	if p.huge > 0 {
		x.reply = hugeReply(p.huge)
		x.cuts, x.finish = tokenCuts(x.reply), "end_turn"
	}
	if p.tool != "" || req.forcesTool() {
		if e := x.callTool(req, p.tool); e != nil {
			c.failBedrock(e)
			return
		}
	}
	if p.hang {
		c.block()
		return
	}
	inject := s.injectError(&p)
	// A stream with fail_after gets the injected error as an exception
	// event in the middle of the stream instead of an HTTP error up front.
	if x.stream && p.failAfter >= 0 {
		c.converseStream(x, &p, inject)
		return
	}
	if inject {
		if c.wait(p.latency) {
			c.failBedrock(bedrockInjected(p.errorStatus, p.retryAfter))
		}
		return
	}
	if x.stream {
		c.converseStream(x, &p, false)
		return
	}
	c.converse(x, &p)
}

// converseReq is the Converse request. The top level is decoded strictly:
// a member the API does not define is a gateway translation bug.
type converseReq struct {
	Messages []brMessage `json:"messages"`
	System   []struct {
		Text *string `json:"text"`
	} `json:"system"`
	InferenceConfig *struct {
		MaxTokens     *int     `json:"maxTokens"`
		Temperature   *float64 `json:"temperature"`
		TopP          *float64 `json:"topP"`
		StopSequences []string `json:"stopSequences"`
	} `json:"inferenceConfig"`
	ToolConfig *struct {
		Tools []struct {
			ToolSpec *struct {
				Name        string `json:"name"`
				Description string `json:"description"`
				InputSchema *struct {
					JSON json.RawMessage `json:"json"`
				} `json:"inputSchema"`
				Strict *bool `json:"strict"`
			} `json:"toolSpec"`
		} `json:"tools"`
		ToolChoice map[string]json.RawMessage `json:"toolChoice"`
	} `json:"toolConfig"`
	GuardrailConfig                   json.RawMessage   `json:"guardrailConfig"`
	AdditionalModelRequestFields      json.RawMessage   `json:"additionalModelRequestFields"`
	AdditionalModelResponseFieldPaths []string          `json:"additionalModelResponseFieldPaths"`
	PromptVariables                   json.RawMessage   `json:"promptVariables"`
	RequestMetadata                   map[string]string `json:"requestMetadata"`
	PerformanceConfig                 json.RawMessage   `json:"performanceConfig"`
	OutputConfig                      json.RawMessage   `json:"outputConfig"`
	ServiceTier                       json.RawMessage   `json:"serviceTier"`
}

type brMessage struct {
	Role    string    `json:"role"`
	Content []brBlock `json:"content"`
}

// brBlock is a ContentBlock union; members are kept raw to count them.
type brBlock map[string]json.RawMessage

type brToolUse struct {
	ToolUseID string          `json:"toolUseId"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
}

type brToolResult struct {
	ToolUseID string                       `json:"toolUseId"`
	Content   []map[string]json.RawMessage `json:"content"`
	Status    string                       `json:"status"`
}

func parseConverse(body []byte) (*converseReq, *bedrockError) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	var req converseReq
	if err := dec.Decode(&req); err != nil {
		return nil, &bedrockError{status: http.StatusBadRequest, typ: "SerializationException", message: "Unable to parse request body: " + err.Error()}
	}
	if len(req.Messages) == 0 {
		return nil, bedrockValidation("1 validation error detected: Value at 'messages' failed to satisfy constraint: Member must have length greater than or equal to 1")
	}
	for i, sb := range req.System {
		if sb.Text == nil || strings.TrimSpace(*sb.Text) == "" {
			return nil, bedrockValidation("The text field in the SystemContentBlock object at system.%d is blank. Add text to the text field, and try again.", i)
		}
	}
	if e := req.checkInference(); e != nil {
		return nil, e
	}
	tools, e := req.checkTools()
	if e != nil {
		return nil, e
	}
	if e := req.checkMessages(tools); e != nil {
		return nil, e
	}
	return &req, nil
}

func (req *converseReq) checkInference() *bedrockError {
	ic := req.InferenceConfig
	if ic == nil {
		return nil
	}
	if ic.MaxTokens != nil && *ic.MaxTokens < 1 {
		return bedrockValidation("1 validation error detected: Value '%d' at 'inferenceConfig.maxTokens' failed to satisfy constraint: Member must have value greater than or equal to 1", *ic.MaxTokens)
	}
	if ic.Temperature != nil && (*ic.Temperature < 0 || *ic.Temperature > 1) {
		return bedrockValidation("1 validation error detected: Value '%v' at 'inferenceConfig.temperature' failed to satisfy constraint: Member must have value between 0 and 1", *ic.Temperature)
	}
	if ic.TopP != nil && (*ic.TopP < 0 || *ic.TopP > 1) {
		return bedrockValidation("1 validation error detected: Value '%v' at 'inferenceConfig.topP' failed to satisfy constraint: Member must have value between 0 and 1", *ic.TopP)
	}
	return nil
}

// checkTools validates toolConfig and returns the declared tools' schemas
// by name.
func (req *converseReq) checkTools() (map[string]json.RawMessage, *bedrockError) {
	tc := req.ToolConfig
	if tc == nil {
		return nil, nil
	}
	if len(tc.Tools) == 0 {
		return nil, bedrockValidation("1 validation error detected: Value at 'toolConfig.tools' failed to satisfy constraint: Member must have length greater than or equal to 1")
	}
	tools := map[string]json.RawMessage{}
	for i, t := range tc.Tools {
		spec := t.ToolSpec
		if spec == nil || spec.Name == "" || spec.InputSchema == nil || len(spec.InputSchema.JSON) == 0 || spec.InputSchema.JSON[0] != '{' {
			return nil, bedrockValidation("The toolSpec at toolConfig.tools.%d needs a name and an inputSchema.json object.", i)
		}
		tools[spec.Name] = spec.InputSchema.JSON
	}
	if len(tc.ToolChoice) > 1 {
		return nil, bedrockValidation("toolConfig.toolChoice must set exactly one of auto, any, tool.")
	}
	for k, v := range tc.ToolChoice {
		switch k {
		case "auto", "any":
		case "tool":
			var t struct {
				Name string `json:"name"`
			}
			if json.Unmarshal(v, &t) != nil || tools[t.Name] == nil {
				return nil, bedrockValidation("The tool %q in toolConfig.toolChoice is not defined in toolConfig.tools.", t.Name)
			}
		default:
			return nil, bedrockValidation("toolConfig.toolChoice must set exactly one of auto, any, tool.")
		}
	}
	return tools, nil
}

var brBlockKinds = map[string]bool{"text": true, "image": true, "document": true, "video": true, "toolUse": true,
	"toolResult": true, "guardContent": true, "cachePoint": true, "reasoningContent": true, "citationsContent": true}

func (req *converseReq) checkMessages(tools map[string]json.RawMessage) *bedrockError {
	var pending map[string]bool // toolUse ids of the previous assistant turn
	for i, m := range req.Messages {
		switch {
		case m.Role != "user" && m.Role != "assistant":
			return bedrockValidation("1 validation error detected: Value '%s' at 'messages.%d.member.role' failed to satisfy constraint: Member must satisfy enum value set: [user, assistant]", m.Role, i+1)
		case i == 0 && m.Role != "user":
			return bedrockValidation("A conversation must start with a user message. Try again with a conversation that starts with a user message.")
		case i > 0 && m.Role == req.Messages[i-1].Role:
			return bedrockValidation("A conversation must alternate between user and assistant roles. Make sure the conversation alternates between user and assistant roles and try again.")
		case len(m.Content) == 0:
			return bedrockValidation("The content field in the Message object at messages.%d is empty. Add a ContentBlock object to the content field and try again.", i)
		}
		uses := map[string]bool{}
		answered := map[string]bool{}
		for j, b := range m.Content {
			at := fmt.Sprintf("messages.%d.content.%d", i, j)
			if len(b) != 1 {
				return bedrockValidation("The ContentBlock object at %s must set exactly one member.", at)
			}
			for kind, raw := range b {
				if !brBlockKinds[kind] {
					return bedrockValidation("The ContentBlock object at %s has an unknown member %q.", at, kind)
				}
				if e := checkBlock(kind, raw, at, m.Role, tools, uses, answered); e != nil {
					return e
				}
			}
		}
		if (len(uses) > 0 || len(answered) > 0) && req.ToolConfig == nil {
			return bedrockValidation("The toolConfig field must be defined when using toolUse and toolResult content blocks.")
		}
		if m.Role == "user" {
			for id := range answered {
				if !pending[id] {
					return bedrockValidation("The toolResult block at messages.%d.content has toolUseId %q, which does not match a toolUse block of the previous turn.", i, id)
				}
			}
			for id := range pending {
				if !answered[id] {
					return bedrockValidation("Expected toolResult blocks at messages.%d.content for the following Ids: %s", i, id)
				}
			}
			pending = nil
		} else {
			pending = uses
		}
	}
	return nil
}

// checkBlock validates one content block member; toolUse ids seen are
// added to uses, toolResult ids to answered.
func checkBlock(kind string, raw json.RawMessage, at, role string, tools map[string]json.RawMessage, uses, answered map[string]bool) *bedrockError {
	switch kind {
	case "text":
		var s string
		if json.Unmarshal(raw, &s) != nil || strings.TrimSpace(s) == "" {
			return bedrockValidation("The text field in the ContentBlock object at %s is blank. Add text to the text field, and try again.", at)
		}
	case "image":
		var img struct {
			Format string `json:"format"`
			Source struct {
				Bytes *string `json:"bytes"`
			} `json:"source"`
		}
		if json.Unmarshal(raw, &img) != nil || img.Source.Bytes == nil {
			return bedrockValidation("The image block at %s needs a format and source.bytes.", at)
		}
		switch img.Format {
		case "png", "jpeg", "gif", "webp":
		default:
			return bedrockValidation("1 validation error detected: Value '%s' at '%s.image.format' failed to satisfy constraint: Member must satisfy enum value set: [gif, jpeg, png, webp]", img.Format, at)
		}
		if _, err := base64.StdEncoding.DecodeString(*img.Source.Bytes); err != nil {
			return bedrockValidation("The image bytes at %s are not valid base64.", at)
		}
	case "toolUse":
		var tu brToolUse
		if role != "assistant" {
			return bedrockValidation("The toolUse block at %s is only allowed in an assistant message.", at)
		}
		if json.Unmarshal(raw, &tu) != nil || tu.ToolUseID == "" || tu.Name == "" || len(tu.Input) == 0 || tu.Input[0] != '{' {
			return bedrockValidation("The toolUse block at %s needs toolUseId, name and an input object.", at)
		}
		if tools != nil && tools[tu.Name] == nil {
			return bedrockValidation("The toolUse block at %s calls %q, which is not defined in toolConfig.tools.", at, tu.Name)
		}
		uses[tu.ToolUseID] = true
	case "toolResult":
		var tr brToolResult
		if role != "user" {
			return bedrockValidation("The toolResult block at %s is only allowed in a user message.", at)
		}
		if json.Unmarshal(raw, &tr) != nil || tr.ToolUseID == "" || len(tr.Content) == 0 {
			return bedrockValidation("The toolResult block at %s needs a toolUseId and content.", at)
		}
		for k, c := range tr.Content {
			if len(c) != 1 || (c["text"] == nil && c["json"] == nil && c["image"] == nil && c["document"] == nil) {
				return bedrockValidation("The ToolResultContentBlock at %s.toolResult.content.%d must set exactly one of json, text, image, document.", at, k)
			}
		}
		answered[tr.ToolUseID] = true
	}
	return nil
}

// forcesTool reports whether toolChoice makes the model call a tool.
func (req *converseReq) forcesTool() bool {
	if req.ToolConfig == nil {
		return false
	}
	_, any := req.ToolConfig.ToolChoice["any"]
	_, tool := req.ToolConfig.ToolChoice["tool"]
	return any || tool
}

// brExchange is a validated Converse request and its answer.
type brExchange struct {
	exchange
	lastUser string
	toolID   string // set when the answer is a toolUse
	toolName string
	toolArgs string
}

func (s *Server) bedrockExchange(req *converseReq, model string, stream bool) *brExchange {
	x := &brExchange{exchange: exchange{model: model, stream: stream, finish: "end_turn"}}
	text := 0
	for _, sb := range req.System {
		text += utf8.RuneCountInString(*sb.Text)
	}
	for i, m := range req.Messages {
		var said strings.Builder
		for _, b := range m.Content {
			if t, ok := b["text"]; ok {
				var s string
				_ = json.Unmarshal(t, &s)
				said.WriteString(s)
			}
			if r, ok := b["toolResult"]; ok {
				said.WriteString(toolResultSaid(r))
			}
		}
		text += utf8.RuneCountInString(said.String()) + 12
		if m.Role == "user" && i == len(req.Messages)-1 {
			x.lastUser = said.String()
		}
	}
	x.promptTokens = max(text/4, 1)
	x.reply = s.opts.Reply
	if x.reply == "" {
		x.reply = defaultReply(x.lastUser)
	}
	x.cuts = tokenCuts(x.reply)
	if ic := req.InferenceConfig; ic != nil && ic.MaxTokens != nil && *ic.MaxTokens < x.completionTokens() {
		x.cuts = x.cuts[:*ic.MaxTokens+1]
		x.reply = x.reply[:x.cuts[*ic.MaxTokens]]
		x.finish = "max_tokens"
	}
	return x
}

// toolResultSaid is what a toolResult block contributes to the prompt.
func toolResultSaid(raw json.RawMessage) string {
	var tr brToolResult
	_ = json.Unmarshal(raw, &tr)
	var b strings.Builder
	for _, c := range tr.Content {
		if t, ok := c["text"]; ok {
			var s string
			_ = json.Unmarshal(t, &s)
			b.WriteString(s)
		} else if j, ok := c["json"]; ok {
			b.Write(j)
		}
	}
	return b.String()
}

// callTool turns the answer into a toolUse of name (or, when toolChoice
// forces one, the chosen or first tool) — unless the last turn carries
// tool results, which the model answers in text.
func (x *brExchange) callTool(req *converseReq, name string) *bedrockError {
	last := req.Messages[len(req.Messages)-1]
	for _, b := range last.Content {
		if _, ok := b["toolResult"]; ok {
			return nil
		}
	}
	if req.ToolConfig == nil {
		return bedrockValidation("@mock(tool=%s): the request has no toolConfig", name)
	}
	if name == "" {
		if t, ok := req.ToolConfig.ToolChoice["tool"]; ok {
			var tc struct {
				Name string `json:"name"`
			}
			_ = json.Unmarshal(t, &tc)
			name = tc.Name
		} else {
			name = req.ToolConfig.Tools[0].ToolSpec.Name
		}
	}
	for _, t := range req.ToolConfig.Tools {
		if t.ToolSpec.Name == name {
			x.toolID = "tooluse_" + newRequestID()[4:26]
			x.toolName = name
			x.toolArgs = mockArguments(t.ToolSpec.InputSchema.JSON)
			x.finish = "tool_use"
			return nil
		}
	}
	return bedrockValidation("@mock(tool=%s): the request defines no tool named %q", name, name)
}

// converse writes the Converse JSON answer. stall_after and fail_after
// break it half-way, as the OpenAI emulator does.
func (c *call) converse(x *brExchange, p *plan) {
	if !c.wait(p.latency) {
		return
	}
	b := []byte(`{"metrics":{"latencyMs":`)
	b = appendInt(b, time.Since(c.received).Milliseconds())
	b = append(b, `},"output":{"message":{"content":[`...)
	out := x.completionTokens()
	if x.toolID != "" {
		b = append(b, `{"toolUse":{"input":`...)
		b = append(b, x.toolArgs...)
		b = append(b, `,"name":`...)
		b = llm.AppendQuote(b, x.toolName)
		b = append(b, `,"toolUseId":`...)
		b = llm.AppendQuote(b, x.toolID)
		b = append(b, `}}`...)
		out = len(argPieces(x.toolArgs, p.chunks))
	} else {
		b = append(b, `{"text":`...)
		b = llm.AppendQuote(b, x.reply)
		b = append(b, '}')
	}
	b = append(b, `],"role":"assistant"}},"stopReason":`...)
	b = llm.AppendQuote(b, x.finish)
	b = append(b, `,"usage":`...)
	b = appendBedrockUsage(b, x.promptTokens, out)
	b = append(b, '}')
	if p.stallAfter < 0 && p.failAfter < 0 {
		c.writeBedrock(http.StatusOK, b)
		return
	}
	h := c.w.Header()
	h["Content-Type"] = hdrJSON
	h["Content-Length"] = []string{itoa(len(b))}
	c.w.WriteHeader(http.StatusOK)
	if c.write(b[:len(b)/2]) {
		c.breakOff(p.failAfter >= 0)
	}
}

func appendBedrockUsage(b []byte, in, out int) []byte {
	b = append(b, `{"inputTokens":`...)
	b = appendInt(b, int64(in))
	b = append(b, `,"outputTokens":`...)
	b = appendInt(b, int64(out))
	b = append(b, `,"totalTokens":`...)
	b = appendInt(b, int64(in+out))
	return append(b, '}')
}
