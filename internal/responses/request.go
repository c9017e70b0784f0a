package responses

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"

	"gatehouse/internal/llm"
)

// Request is a POST /v1/responses body, decoded and checked. It becomes a
// chat request with Chat once the conversation before it (if it names a
// previous response) is known.
type Request struct {
	Body       []byte // the client's JSON object, for backends that take it as it is
	Model      string
	Stream     bool
	Store      bool   // keep the response (store: true); the gateway's default is not to
	PreviousID string // previous_response_id: the stored conversation this one continues
	// Input is the request's input as a JSON array of items; a string
	// input is one user message. It is what a stored response keeps, after
	// the items of the conversation before it.
	Input []byte
	// IncludeEncrypted is include: ["reasoning.encrypted_content"]: the
	// reasoning's opaque proof (an Anthropic thinking signature) goes
	// into reasoning items, so a stateless client can hand it back.
	IncludeEncrypted bool

	items  []item         // Input, decoded (and checked) once
	params llm.ChatParams // everything but the conversation
	// summary is reasoning.summary: the client reads reasoning as a
	// summary, so a translated backend's visible reasoning is given as
	// one (the summaries OpenAI writes are what a backend that shows its
	// reasoning shows) rather than as reasoning_text content.
	summary      bool
	instructions *string
	echo         echo
	// untranslatable lists what only a backend that speaks the Responses
	// API itself can honour (built-in tools, unknown parameters); a
	// translated attempt refuses it, or drops it with drop_unsupported.
	untranslatable []Unsupported
}

// Unsupported is one part of a request that translation to chat
// completions cannot carry.
type Unsupported struct {
	Param string // the parameter, as an error names it (tools[1].type)
	Why   string
}

// echo holds the request's values that the response object repeats, raw.
type echo struct {
	tools, toolChoice, text, reasoning, metadata, truncation []byte
	temperature, topP, maxOutputTokens, parallelToolCalls    []byte
	user, safetyIdentifier, promptCacheKey, serviceTier      []byte
}

// compact makes the repeated values compact once, here: the response
// object repeats them in every snapshot of a stream.
func (e *echo) compact() {
	for _, v := range []*[]byte{&e.tools, &e.toolChoice, &e.text, &e.reasoning, &e.metadata, &e.truncation,
		&e.temperature, &e.topP, &e.maxOutputTokens, &e.parallelToolCalls, &e.user, &e.safetyIdentifier,
		&e.promptCacheKey, &e.serviceTier} {
		if len(*v) > 0 {
			*v = compact(*v)
		}
	}
}

// ignored are parameters that change how OpenAI runs or bills a request,
// not the answer; other backends have no equivalent, so translation
// accepts and drops them (a backend that speaks the Responses API gets
// them in the body as sent).
var ignored = map[string]bool{
	"stream_options": true, "prompt_cache_key": true, "prompt_cache_retention": true, "safety_identifier": true,
	"service_tier": true, "truncation": true, "max_tool_calls": true, "prompt_cache_options": true,
}

// refused are features that need OpenAI's servers (or state the gateway
// does not keep); no backend behind the gateway can be given them.
var refused = map[string]string{
	"background":   "background responses need polling state that gatehouse does not keep",
	"conversation": "the Conversations API is not served by gatehouse; use previous_response_id with store: true",
	"prompt":       "prompt templates are stored at OpenAI; send the prompt in input and instructions",
}

// ParseRequest decodes a POST /v1/responses body. Errors are OpenAI-style
// 400s naming the parameter.
func ParseRequest(body []byte) (*Request, error) {
	r := &Request{Body: body}
	var hasModel, hasInput bool
	var ferr *llm.Error
	err := llm.EachField(body, func(key string, v []byte, _ int) bool {
		switch key {
		case "model":
			hasModel = true
		case "input":
			hasInput = true
		}
		ferr = r.field(key, v)
		return ferr == nil
	})
	if errors.Is(err, llm.ErrNotObject) {
		return nil, invalid("", "invalid_json", "The request body must be a JSON object.")
	}
	if err != nil {
		return nil, invalid("", "invalid_json", "We could not parse the JSON body of your request: %v", err)
	}
	if ferr != nil {
		return nil, ferr
	}
	switch {
	case !hasModel || r.Model == "":
		return nil, invalid("model", "missing_required_parameter", "Missing required parameter: 'model'.")
	case !hasInput && r.PreviousID == "":
		return nil, invalid("input", "missing_required_parameter", "Missing required parameter: 'input'.")
	}
	if r.Input == nil {
		r.Input = []byte("[]")
	}
	r.echo.compact()
	r.params.Model = r.Model
	r.params.Stream = r.Stream
	r.params.IncludeUsage = r.Stream
	return r, nil
}

func (r *Request) field(key string, v []byte) *llm.Error {
	null := llm.KindOf(v) == llm.KindNull
	var err error
	switch key {
	case "model":
		err = decodeField(v, &r.Model)
	case "input":
		return r.input(v)
	case "instructions":
		err = decodeField(v, &r.instructions)
	case "stream":
		err = decodeField(v, &r.Stream)
	case "store":
		err = decodeField(v, &r.Store)
	case "previous_response_id":
		err = decodeField(v, &r.PreviousID)
	case "include":
		return r.include(v)
	case "tools":
		r.echo.tools = v
		return r.tools(v)
	case "tool_choice":
		r.echo.toolChoice = v
		return r.toolChoice(v)
	case "parallel_tool_calls":
		r.echo.parallelToolCalls = v
		err = decodeField(v, &r.params.ParallelToolCalls)
	case "reasoning":
		r.echo.reasoning = v
		return r.reasoning(v)
	case "max_output_tokens":
		r.echo.maxOutputTokens = v
		var n *int
		if err = decodeField(v, &n); err == nil && n != nil {
			if *n < 16 {
				return invalid(key, "integer_below_min_value", "Invalid 'max_output_tokens': integer below minimum value. Expected a value >= 16, but got %d instead.", *n)
			}
			r.params.MaxTokens = *n
		}
	case "temperature":
		r.echo.temperature = v
		err = decodeField(v, &r.params.Temperature)
	case "top_p":
		r.echo.topP = v
		err = decodeField(v, &r.params.TopP)
	case "text":
		r.echo.text = v
		return r.text(v)
	case "metadata":
		// Tags of the response object (kept with it, repeated in it), not
		// of the model call: a translated backend is not sent them, as
		// some refuse request metadata.
		r.echo.metadata = v
		var m map[string]string
		err = decodeField(v, &m)
	case "user":
		r.echo.user = v
		err = decodeField(v, &r.params.User)
	case "top_logprobs":
		var n *int
		if err = decodeField(v, &n); err == nil && n != nil && *n > 0 {
			r.untranslatable = append(r.untranslatable, Unsupported{key, "log probabilities are not translated to the Responses API"})
		}
	default:
		switch {
		case ignored[key]:
			r.echoIgnored(key, v)
			return nil
		case refused[key] != "":
			if null || (key == "background" && string(v) == "false") {
				return nil
			}
			return invalid(key, "unsupported_parameter", "Unsupported parameter: '%s': %s.", key, refused[key])
		}
		r.untranslatable = append(r.untranslatable, Unsupported{key, "it is not a parameter gatehouse translates"})
		return nil
	}
	if err != nil {
		return typeError(key, err)
	}
	return nil
}

// echoIgnored keeps the ignored values the response object repeats.
func (r *Request) echoIgnored(key string, v []byte) {
	switch key {
	case "truncation":
		r.echo.truncation = v
	case "safety_identifier":
		r.echo.safetyIdentifier = v
	case "prompt_cache_key":
		r.echo.promptCacheKey = v
	case "service_tier":
		r.echo.serviceTier = v
	}
}

func (r *Request) include(v []byte) *llm.Error {
	var inc []string
	if err := decodeField(v, &inc); err != nil {
		return typeError("include", err)
	}
	for i, s := range inc {
		switch s {
		case "reasoning.encrypted_content":
			r.IncludeEncrypted = true
		default:
			r.untranslatable = append(r.untranslatable, Unsupported{"include[" + strconv.Itoa(i) + "]",
				strconv.Quote(s) + " is an OpenAI server feature"})
		}
	}
	return nil
}

// Untranslatable lists what a backend must speak the Responses API to
// honour.
func (r *Request) Untranslatable() []Unsupported { return r.untranslatable }

type wireTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
	Strict      *bool           `json:"strict"`
}

func (r *Request) tools(v []byte) *llm.Error {
	var ts []wireTool
	if err := decodeField(v, &ts); err != nil {
		return typeError("tools", err)
	}
	r.params.Tools = make([]llm.Tool, 0, len(ts))
	for i, t := range ts {
		at := "tools[" + strconv.Itoa(i) + "]"
		if t.Type != "function" {
			if t.Type == "" {
				return invalid(at+".type", "missing_required_parameter", "Missing required parameter: '%s.type'.", at)
			}
			r.untranslatable = append(r.untranslatable, Unsupported{at + ".type", "the built-in tool " + strconv.Quote(t.Type) + " runs on OpenAI's servers; only function tools can be served by other backends"})
			continue
		}
		if t.Name == "" {
			return invalid(at+".name", "missing_required_parameter", "Missing required parameter: '%s.name'.", at)
		}
		var params json.RawMessage
		if k := llm.KindOf(t.Parameters); k == llm.KindObject {
			params = t.Parameters
		} else if k != llm.KindNull && len(t.Parameters) > 0 {
			return invalid(at+".parameters", "invalid_type", "Invalid type for '%s.parameters': expected an object.", at)
		}
		r.params.Tools = append(r.params.Tools, llm.Tool{Name: t.Name, Description: t.Description, Parameters: params, Strict: t.Strict})
	}
	return nil
}

func (r *Request) toolChoice(v []byte) *llm.Error {
	switch llm.KindOf(v) {
	case llm.KindNull:
		return nil
	case llm.KindString:
		var s string
		_ = json.Unmarshal(v, &s)
		switch s {
		case "auto", "none", "required":
			r.params.ToolChoice = &llm.ToolChoice{Mode: s}
			return nil
		}
		return invalid("tool_choice", "invalid_value", "Invalid value: '%s'. Supported values are: 'none', 'auto', and 'required'.", s)
	case llm.KindObject:
		var c struct {
			Type string `json:"type"`
			Name string `json:"name"`
		}
		if err := json.Unmarshal(v, &c); err != nil {
			return typeError("tool_choice", err)
		}
		if c.Type != "function" {
			r.untranslatable = append(r.untranslatable, Unsupported{"tool_choice.type", "tool choice " + strconv.Quote(c.Type) + " is an OpenAI server feature"})
			return nil
		}
		if c.Name == "" {
			return invalid("tool_choice.name", "missing_required_parameter", "Missing required parameter: 'tool_choice.name'.")
		}
		r.params.ToolChoice = &llm.ToolChoice{Mode: llm.ToolChoiceFunction, Name: c.Name}
		return nil
	}
	return invalid("tool_choice", "invalid_type", "Invalid type for 'tool_choice': expected a string or an object.")
}

func (r *Request) reasoning(v []byte) *llm.Error {
	var re struct {
		Effort  *string `json:"effort"`
		Summary *string `json:"summary"`
		// generate_summary is the deprecated name of summary.
		GenerateSummary *string `json:"generate_summary"`
	}
	if err := decodeField(v, &re); err != nil {
		return typeError("reasoning", err)
	}
	for _, sum := range []*string{re.Summary, re.GenerateSummary} {
		if sum != nil && *sum != "" && *sum != "none" {
			r.summary = true
		}
	}
	if re.Effort == nil {
		return nil
	}
	switch e := *re.Effort; e {
	case "minimal", "low", "medium", "high":
		r.params.ReasoningEffort = e
	case "none":
		// No reasoning is what a backend does when asked for none.
	case "xhigh":
		r.params.ReasoningEffort = "high"
	default:
		return invalid("reasoning.effort", "invalid_value", "Invalid value: '%s'. Supported values are: 'none', 'minimal', 'low', 'medium', 'high', and 'xhigh'.", e)
	}
	return nil
}

func (r *Request) text(v []byte) *llm.Error {
	var t struct {
		Format *struct {
			Type        string          `json:"type"`
			Name        string          `json:"name"`
			Description string          `json:"description"`
			Schema      json.RawMessage `json:"schema"`
			Strict      *bool           `json:"strict"`
		} `json:"format"`
		Verbosity *string `json:"verbosity"`
	}
	if err := decodeField(v, &t); err != nil {
		return typeError("text", err)
	}
	if t.Verbosity != nil && *t.Verbosity != "medium" {
		// Verbosity is a chat completions parameter too: backends that
		// take it get it, the others refuse or drop it as usual.
		r.params.Other = map[string]json.RawMessage{"verbosity": json.RawMessage(strconv.Quote(*t.Verbosity))}
	}
	f := t.Format
	if f == nil {
		return nil
	}
	switch f.Type {
	case "text":
	case "json_object":
		r.params.ResponseFormat = &llm.ResponseFormat{Type: llm.FormatJSONObject}
	case "json_schema":
		if f.Name == "" {
			return invalid("text.format.name", "missing_required_parameter", "Missing required parameter: 'text.format.name'.")
		}
		if llm.KindOf(f.Schema) != llm.KindObject {
			return invalid("text.format.schema", "missing_required_parameter", "Missing required parameter: 'text.format.schema'.")
		}
		r.params.ResponseFormat = &llm.ResponseFormat{Type: llm.FormatJSONSchema, Name: f.Name,
			Description: f.Description, Schema: f.Schema, Strict: f.Strict}
	default:
		return invalid("text.format.type", "invalid_value", "Invalid value: '%s'. Supported values are: 'text', 'json_object', and 'json_schema'.", f.Type)
	}
	return nil
}

// decodeField decodes a value; null leaves the zero value.
func decodeField(v []byte, dst any) error {
	if llm.KindOf(v) == llm.KindNull {
		return nil
	}
	return json.Unmarshal(v, dst)
}

func invalid(param, code, format string, args ...any) *llm.Error {
	return llm.BadRequest(param, code, format, args...)
}

// typeError names the parameter whose value has the wrong JSON type, as
// OpenAI does ("Invalid type for 'temperature': expected a number, but
// got a string instead.").
func typeError(param string, err error) *llm.Error {
	if te, ok := err.(*json.UnmarshalTypeError); ok {
		if te.Field != "" {
			param += "." + te.Field
		}
		return invalid(param, "invalid_type", "Invalid type for '%s': expected %s, but got %s instead.", param, typeName(te.Type.Kind().String()), te.Value)
	}
	return invalid(param, "invalid_value", "Invalid value for '%s': %v", param, err)
}

func typeName(kind string) string {
	switch kind {
	case "string":
		return "a string"
	case "bool":
		return "a boolean"
	case "slice", "array":
		return "an array"
	case "map", "struct", "ptr":
		return "an object"
	case "int", "int64", "int32":
		return "an integer"
	}
	return "a number"
}

// compact returns v without insignificant white space; stored items are
// kept compact so a long conversation costs no more than it must.
func compact(v []byte) []byte {
	var b bytes.Buffer
	if err := json.Compact(&b, v); err != nil {
		return v
	}
	return b.Bytes()
}
