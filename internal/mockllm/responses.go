package mockllm

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"
	"strings"

	"gatehouse/internal/llm"
)

// This file and the other responses*.go files emulate OpenAI's Responses
// API: POST /v1/responses, streamed and not, under OpenAI's path and
// Azure's (azure.go). The emulator keeps no state, so everything that
// needs a stored object — previous_response_id, a conversation, GET or
// DELETE of a response — is answered as OpenAI answers an id it does not
// know, and background mode is refused. That makes a gateway which
// forwards such a request by mistake fail its test instead of passing by
// accident.

// respRequest is the request body. Its fields are every top-level
// parameter OpenAI documents; anything else is answered with
// "Unrecognized request argument supplied", as by the chat emulator.
// Nested objects are read leniently: only the top level is held to the
// documented names.
type respRequest struct {
	Model              *string           `json:"model"`
	Input              json.RawMessage   `json:"input"`
	Instructions       *string           `json:"instructions"`
	Tools              []json.RawMessage `json:"tools"`
	ToolChoice         json.RawMessage   `json:"tool_choice"`
	ParallelToolCalls  *bool             `json:"parallel_tool_calls"`
	Reasoning          *respReasoning    `json:"reasoning"`
	MaxOutputTokens    *int              `json:"max_output_tokens"`
	MaxToolCalls       *int              `json:"max_tool_calls"`
	Temperature        *float64          `json:"temperature"`
	TopP               *float64          `json:"top_p"`
	Text               *respText         `json:"text"`
	Metadata           json.RawMessage   `json:"metadata"`
	User               *string           `json:"user"`
	Store              *bool             `json:"store"`
	Stream             bool              `json:"stream"`
	StreamOptions      json.RawMessage   `json:"stream_options"`
	Include            []string          `json:"include"`
	PreviousResponseID *string           `json:"previous_response_id"`
	Truncation         *string           `json:"truncation"`
	ServiceTier        *string           `json:"service_tier"`
	PromptCacheKey     *string           `json:"prompt_cache_key"`
	SafetyIdentifier   *string           `json:"safety_identifier"`
	TopLogprobs        *int              `json:"top_logprobs"`
	Background         *bool             `json:"background"`
	Conversation       json.RawMessage   `json:"conversation"`
	Prompt             json.RawMessage   `json:"prompt"`
}

type respReasoning struct {
	Effort          *string `json:"effort"`
	Summary         *string `json:"summary"`
	GenerateSummary *string `json:"generate_summary"` // the deprecated name of summary
}

// UnmarshalJSON reads reasoning leniently (see respRequest).
func (r *respReasoning) UnmarshalJSON(b []byte) error {
	type plain respReasoning
	return json.Unmarshal(b, (*plain)(r))
}

type respText struct {
	Format    *respFormat `json:"format"`
	Verbosity *string     `json:"verbosity"`
}

type respFormat struct {
	Type        string          `json:"type"`
	Name        *string         `json:"name"`
	Description *string         `json:"description"`
	Schema      json.RawMessage `json:"schema"`
	Strict      *bool           `json:"strict"`
}

// UnmarshalJSON reads text leniently (see respRequest).
func (t *respText) UnmarshalJSON(b []byte) error {
	type plain respText
	return json.Unmarshal(b, (*plain)(t))
}

// respTool is a function tool: the only kind the emulator can call.
type respTool struct {
	Type        string          `json:"type"`
	Name        *string         `json:"name"`
	Description *string         `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
	Strict      *bool           `json:"strict"`
}

// respIncludes are the values include takes.
var respIncludes = []string{
	"file_search_call.results", "web_search_call.results", "web_search_call.action.sources",
	"message.input_image.image_url", "computer_call_output.output.image_url",
	"code_interpreter_call.outputs", "reasoning.encrypted_content", "message.output_text.logprobs",
}

// responses answers POST /v1/responses (and Azure's equivalents).
func (s *Server) responses(c *call, body []byte) {
	x, perr := s.parseResponses(body)
	if perr != nil {
		c.fail(perr)
		return
	}
	c.model = x.model
	p, perr := s.newPlan(c, x.lastUser)
	if perr != nil {
		if perr.param == "messages" {
			perr.param = "input"
		}
		c.fail(perr)
		return
	}
	if p.hang {
		c.block()
		return
	}
	if s.injectError(&p) {
		if c.wait(p.latency) {
			c.fail(injectedError(p.errorStatus, x.model, p.retryAfter))
		}
		return
	}
	x.huge = p.huge
	if perr := x.plan(s, p.tool); perr != nil {
		c.fail(perr)
		return
	}
	p.held = int64(x.inputTokens + x.outputTokens())
	defer s.admit(p.held)()
	if p.perToken > 0 {
		p.jitter = jitterFactor(s.load.Seed, body, s.load.Jitter)
	}
	if x.stream {
		c.streamResponse(x, &p)
	} else {
		c.completeResponse(x, &p)
	}
}

// parseResponses validates body as OpenAI does. The reply itself is
// chosen later, by plan, once the @mock directive is known.
func (s *Server) parseResponses(body []byte) (*respExchange, *apiError) {
	var req respRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		if name, ok := strings.CutPrefix(err.Error(), `json: unknown field "`); ok {
			return nil, unrecognized(strings.TrimSuffix(name, `"`))
		}
		return nil, typeError(err)
	}
	if req.Model == nil || *req.Model == "" {
		return nil, missingParam("model")
	}
	if err := checkStateless(&req); err != nil {
		return nil, err
	}
	if req.StreamOptions != nil && string(req.StreamOptions) != "null" && !req.Stream {
		return nil, invalidRequest("stream_options", "",
			"The 'stream_options' parameter is only allowed when 'stream' is enabled.")
	}
	if m := req.MaxOutputTokens; m != nil && *m < 16 {
		return nil, invalidRequest("max_output_tokens", "integer_below_min_value",
			"Invalid 'max_output_tokens': integer below minimum value. Expected a value >= 16, but got %d instead.", *m)
	}
	if err := checkMetadata(req.Metadata); err != nil {
		return nil, err
	}
	x := &respExchange{req: &req, model: *req.Model, stream: req.Stream}
	for i, inc := range req.Include {
		if !slices.Contains(respIncludes, inc) {
			param := "include[" + itoa(i) + "]"
			return nil, invalidRequest(param, "invalid_value", "Invalid value: '%s'. Supported values are: %s.", inc, quotedList(respIncludes))
		}
		if inc == "reasoning.encrypted_content" {
			x.encrypted = true
		}
	}
	if err := x.readTools(); err != nil {
		return nil, err
	}
	if err := x.readToolChoice(); err != nil {
		return nil, err
	}
	if err := x.readFormat(); err != nil {
		return nil, err
	}
	if err := x.readInput(); err != nil {
		return nil, err
	}
	return x, nil
}

// checkStateless refuses what needs state the emulator does not keep, in
// the words OpenAI uses for an id it cannot find.
func checkStateless(req *respRequest) *apiError {
	if id := req.PreviousResponseID; id != nil && *id != "" {
		return invalidRequest("previous_response_id", "previous_response_not_found",
			"Previous response with id '%s' not found.", *id)
	}
	if c := req.Conversation; len(c) > 0 && string(c) != "null" {
		var id string
		if json.Unmarshal(c, &id) != nil {
			var obj struct {
				ID string `json:"id"`
			}
			_ = json.Unmarshal(c, &obj)
			id = obj.ID
		}
		return &apiError{status: http.StatusNotFound, typ: "invalid_request_error", param: "conversation",
			message: "Conversation with id '" + id + "' not found."}
	}
	if req.Background != nil && *req.Background {
		return invalidRequest("background", "unsupported_value",
			"mockllm keeps no state, so it cannot run a response in the background (background: true).")
	}
	return nil
}

// checkMetadata holds metadata to OpenAI's shape: an object of strings.
func checkMetadata(raw json.RawMessage) *apiError {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var m map[string]string
	if raw[0] != '{' || json.Unmarshal(raw, &m) != nil {
		return invalidRequest("metadata", "invalid_type",
			"Invalid type for 'metadata': expected an object with string values.")
	}
	return nil
}

func (x *respExchange) readTools() *apiError {
	for i, raw := range x.req.Tools {
		param := "tools[" + itoa(i) + "]"
		var t respTool
		if firstByte(raw) != '{' {
			return invalidRequest(param, "invalid_type",
				"Invalid type for '%s': expected an object, but got %s instead.", param, jsonKind(firstByte(raw)))
		}
		if err := json.Unmarshal(raw, &t); err != nil {
			return prefixed(typeError(err), param)
		}
		if t.Type == "" {
			return missingParam(param + ".type")
		}
		if t.Type != "function" {
			return invalidRequest(param+".type", "unsupported_value",
				"mockllm emulates only 'function' tools, not '%s'.", t.Type)
		}
		if t.Name == nil || *t.Name == "" {
			return missingParam(param + ".name")
		}
		x.tools = append(x.tools, t)
	}
	return nil
}

// readToolChoice validates tool_choice and remembers the function it
// forces, if any.
func (x *respExchange) readToolChoice() *apiError {
	raw := x.req.ToolChoice
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var mode string
	if json.Unmarshal(raw, &mode) == nil {
		switch mode {
		case "auto", "none":
		case "required":
			if len(x.tools) == 0 {
				return invalidRequest("tool_choice", "",
					"Tool choice 'required' must be specified with 'tools' parameter.")
			}
			x.forced = *x.tools[0].Name
		default:
			return invalidRequest("tool_choice", "invalid_value",
				"Invalid value: '%s'. Supported values are: 'none', 'auto', and 'required'.", mode)
		}
		return nil
	}
	var obj struct {
		Type string  `json:"type"`
		Name *string `json:"name"`
	}
	if raw[0] != '{' || json.Unmarshal(raw, &obj) != nil {
		return invalidRequest("tool_choice", "invalid_type",
			"Invalid type for 'tool_choice': expected a string or an object, but got %s instead.", jsonKind(raw[0]))
	}
	if obj.Type != "function" {
		return invalidRequest("tool_choice.type", "unsupported_value",
			"mockllm emulates only 'function' tools, not tool_choice type '%s'.", obj.Type)
	}
	if obj.Name == nil || *obj.Name == "" {
		return missingParam("tool_choice.name")
	}
	if x.tool(*obj.Name) == nil {
		return invalidRequest("tool_choice", "",
			"Tool choice 'function' with name '%s' not found in 'tools' parameter.", *obj.Name)
	}
	x.forced = *obj.Name
	return nil
}

func (x *respExchange) tool(name string) *respTool {
	for i := range x.tools {
		if *x.tools[i].Name == name {
			return &x.tools[i]
		}
	}
	return nil
}

// readFormat validates text.format: what the reply's text must parse as.
func (x *respExchange) readFormat() *apiError {
	t := x.req.Text
	if t == nil || t.Format == nil {
		return nil
	}
	f := t.Format
	switch f.Type {
	case "text", "json_object":
	case "json_schema":
		if f.Name == nil || *f.Name == "" {
			return missingParam("text.format.name")
		}
		if len(f.Schema) == 0 || f.Schema[0] != '{' {
			return missingParam("text.format.schema")
		}
	case "":
		return missingParam("text.format.type")
	default:
		return invalidRequest("text.format.type", "invalid_value",
			"Invalid value: '%s'. Supported values are: 'text', 'json_object', and 'json_schema'.", f.Type)
	}
	return nil
}

// prefixed moves an error about a field of an element into the request's
// terms: "call_id" becomes "input[2].call_id".
func prefixed(e *apiError, prefix string) *apiError {
	if e.param != "" {
		e.message = strings.Replace(e.message, "'"+e.param+"'", "'"+prefix+"."+e.param+"'", 1)
		e.param = prefix + "." + e.param
	}
	return e
}

// quotedList writes values as OpenAI lists them in its errors:
// 'a', 'b', and 'c'.
func quotedList(values []string) string {
	var b strings.Builder
	for i, v := range values {
		switch {
		case i > 0 && i == len(values)-1 && len(values) == 2:
			b.WriteString(" and ")
		case i > 0 && i == len(values)-1:
			b.WriteString(", and ")
		case i > 0:
			b.WriteString(", ")
		}
		b.WriteString("'" + v + "'")
	}
	return b.String()
}

// responseByID answers the routes under /v1/responses/{id}: without
// stored responses, every id is unknown.
func (s *Server) responseByID(c *call, rest string) {
	id, sub, _ := strings.Cut(rest, "/")
	m := c.r.Method
	known := (sub == "" && (m == http.MethodGet || m == http.MethodDelete)) ||
		(sub == "input_items" && m == http.MethodGet) || (sub == "cancel" && m == http.MethodPost)
	if id == "" || !known {
		c.fail(invalidURL(m, c.r.URL.Path))
		return
	}
	c.fail(&apiError{status: http.StatusNotFound, typ: "invalid_request_error",
		message: "Response with id '" + id + "' not found."})
}

// appendRawOr appends raw compacted, or def when raw is absent or null.
func appendRawOr(b []byte, raw json.RawMessage, def string) []byte {
	if len(raw) == 0 || string(raw) == "null" {
		return append(b, def...)
	}
	var buf bytes.Buffer
	if json.Compact(&buf, raw) != nil {
		return append(b, def...)
	}
	return append(b, buf.Bytes()...)
}

// appendStringOr appends *s quoted, or def (raw JSON) when s is nil.
func appendStringOr(b []byte, s *string, def string) []byte {
	if s == nil {
		return append(b, def...)
	}
	return llm.AppendQuote(b, *s)
}
