package messages

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"gatehouse/internal/llm"
)

// ParseRequest decodes a POST /v1/messages body into a chat request any
// adapter can serve. Validation failures are 400 invalid_request_errors
// whose message starts with the offending field, as Anthropic's do.
func ParseRequest(body []byte) (*llm.ChatRequest, error) {
	p, err := decode(body, false)
	if err != nil {
		return nil, err
	}
	return llm.NewChatRequest(p)
}

// ParseCountRequest decodes a POST /v1/messages/count_tokens body: the
// same prompt fields, with max_tokens not required.
func ParseCountRequest(body []byte) (*llm.ChatParams, error) {
	return decode(body, true)
}

// ignored are top-level fields that only tune how Anthropic itself runs
// the request (priority tier, data residency, speed, diagnostics, prompt
// caching). No other backend has them and leaving them out changes no
// answer, so they are accepted and dropped.
var ignored = map[string]bool{
	"service_tier": true, "inference_geo": true, "speed": true, "diagnostics": true, "cache_control": true,
}

// refused are Anthropic features with no equivalent on other backends.
var refused = map[string]string{
	"container":          "code-execution containers are an Anthropic server feature",
	"mcp_servers":        "remote MCP servers are an Anthropic server feature",
	"context_management": "server-side context editing is an Anthropic server feature",
}

type decoder struct {
	p        llm.ChatParams
	count    bool
	hasModel bool
	hasMsgs  bool
	hasMax   bool
	budget   int
	choice   *wireToolChoice
}

func decode(body []byte, count bool) (*llm.ChatParams, error) {
	d := &decoder{count: count}
	var ferr *llm.Error
	err := llm.EachField(body, func(key string, v []byte, _ int) bool {
		ferr = d.field(key, v)
		return ferr == nil
	})
	if errors.Is(err, llm.ErrNotObject) {
		return nil, invalid("", "invalid_json", "The request body must be a JSON object.")
	}
	if err != nil {
		return nil, invalid("", "invalid_json", "The request body is not valid JSON: %v", err)
	}
	if ferr != nil {
		return nil, ferr
	}
	switch {
	case !d.hasModel:
		return nil, required("model")
	case !d.hasMsgs:
		return nil, required("messages")
	case !d.hasMax && !count:
		return nil, required("max_tokens")
	}
	if d.budget > 0 {
		if !count && d.budget >= d.p.MaxTokens {
			return nil, invalid("max_tokens", "invalid_value", "max_tokens must be greater than thinking.budget_tokens (%d)", d.budget)
		}
		d.p.ThinkingBudget = d.budget
	}
	if c := d.choice; c != nil {
		if err := d.toolChoice(c); err != nil {
			return nil, err
		}
	}
	return &d.p, nil
}

func (d *decoder) field(key string, v []byte) *llm.Error {
	var err error
	switch key {
	case "model":
		d.hasModel = true
		if err = strict(v, &d.p.Model); err == nil && d.p.Model == "" {
			return invalid("model", "invalid_value", "model: String should have at least 1 character")
		}
	case "max_tokens":
		d.hasMax = true
		if err = strict(v, &d.p.MaxTokens); err == nil && d.p.MaxTokens < 1 {
			return invalid("max_tokens", "invalid_value", "max_tokens: Input should be greater than or equal to 1")
		}
	case "messages":
		d.hasMsgs = true
		return d.messages(v)
	case "system":
		return d.system(v)
	case "tools":
		return d.tools(v)
	case "tool_choice":
		d.choice = &wireToolChoice{}
		err = strict(v, d.choice)
	case "stop_sequences":
		err = decodeField(v, &d.p.Stop)
	case "temperature":
		err = decodeField(v, &d.p.Temperature)
	case "top_p":
		err = decodeField(v, &d.p.TopP)
	case "top_k":
		var k *int
		if err = decodeField(v, &k); err == nil && k != nil {
			// Kept raw: backends that know top_k (Gemini, Ollama, Bedrock,
			// Anthropic) read it from Other; others refuse or drop it.
			d.p.Other = map[string]json.RawMessage{"top_k": json.RawMessage(bytes.Clone(v))}
		}
	case "stream":
		err = decodeField(v, &d.p.Stream)
	case "metadata":
		var m struct {
			UserID *string `json:"user_id"`
		}
		if err = decodeField(v, &m); err == nil && m.UserID != nil {
			d.p.User = *m.UserID
		}
	case "thinking":
		return d.thinking(v)
	case "output_config":
		return d.outputConfig(v)
	default:
		if ignored[key] {
			return nil
		}
		if why, ok := refused[key]; ok {
			return invalid(key, "unsupported_parameter", "%s: not supported by gatehouse (%s)", key, why)
		}
		return invalid(key, "unknown_parameter", "%s: Extra inputs are not permitted", key)
	}
	if err != nil {
		return typeError(key, err)
	}
	return nil
}

func (d *decoder) thinking(v []byte) *llm.Error {
	if llm.KindOf(v) == llm.KindNull {
		return nil
	}
	var t struct {
		Type         string `json:"type"`
		BudgetTokens *int   `json:"budget_tokens"`
	}
	if err := strict(v, &t); err != nil {
		return typeError("thinking", err)
	}
	switch t.Type {
	case "enabled":
		if t.BudgetTokens == nil {
			return required("thinking.budget_tokens")
		}
		d.budget = *t.BudgetTokens
		if d.budget < 1024 {
			return invalid("thinking.budget_tokens", "invalid_value", "thinking.budget_tokens: Input should be greater than or equal to 1024")
		}
	case "disabled", "adaptive":
		// adaptive leaves the depth of reasoning to the model, which is
		// what every backend does when asked for nothing in particular.
	default:
		return invalid("thinking.type", "invalid_value", "thinking.type: Input should be 'enabled', 'disabled' or 'adaptive'")
	}
	return nil
}

func (d *decoder) outputConfig(v []byte) *llm.Error {
	if llm.KindOf(v) == llm.KindNull {
		return nil
	}
	var oc struct {
		Effort string `json:"effort"`
		Format *struct {
			Type   string          `json:"type"`
			Schema json.RawMessage `json:"schema"`
		} `json:"format"`
	}
	if err := strict(v, &oc); err != nil {
		return typeError("output_config", err)
	}
	switch oc.Effort {
	case "":
	case "low", "medium", "high":
		d.p.ReasoningEffort = oc.Effort
	case "xhigh", "max":
		d.p.ReasoningEffort = "high"
	default:
		return invalid("output_config.effort", "invalid_value", "output_config.effort: Input should be 'low', 'medium', 'high', 'xhigh' or 'max'")
	}
	if f := oc.Format; f != nil {
		if f.Type != "json_schema" {
			return invalid("output_config.format.type", "invalid_value", "output_config.format.type: Input should be 'json_schema'")
		}
		if llm.KindOf(f.Schema) != llm.KindObject {
			return required("output_config.format.schema")
		}
		d.p.ResponseFormat = &llm.ResponseFormat{Type: llm.FormatJSONSchema, Name: "output", Schema: f.Schema}
	}
	return nil
}

type wireToolChoice struct {
	Type                   string `json:"type"`
	Name                   string `json:"name"`
	DisableParallelToolUse *bool  `json:"disable_parallel_tool_use"`
}

func (d *decoder) toolChoice(c *wireToolChoice) *llm.Error {
	tc := &llm.ToolChoice{}
	switch c.Type {
	case "auto":
		tc.Mode = llm.ToolChoiceAuto
	case "any":
		tc.Mode = llm.ToolChoiceRequired
	case "none":
		tc.Mode = llm.ToolChoiceNone
	case "tool":
		if c.Name == "" {
			return required("tool_choice.name")
		}
		tc.Mode, tc.Name = llm.ToolChoiceFunction, c.Name
	default:
		return invalid("tool_choice.type", "invalid_value", "tool_choice.type: Input should be 'auto', 'any', 'tool' or 'none'")
	}
	d.p.ToolChoice = tc
	if c.DisableParallelToolUse != nil && *c.DisableParallelToolUse && len(d.p.Tools) > 0 {
		// OpenAI rejects parallel_tool_calls without tools, and without
		// tools there is nothing to serialise anyway.
		d.p.ParallelToolCalls = new(bool)
	}
	return nil
}

type wireTool struct {
	Type         string          `json:"type"`
	Name         string          `json:"name"`
	Description  string          `json:"description"`
	InputSchema  json.RawMessage `json:"input_schema"`
	CacheControl json.RawMessage `json:"cache_control"`
	Strict       *bool           `json:"strict"`
}

func (d *decoder) tools(v []byte) *llm.Error {
	var ts []wireTool
	if err := decodeField(v, &ts); err != nil {
		return typeError("tools", err)
	}
	d.p.Tools = make([]llm.Tool, 0, len(ts))
	for i, t := range ts {
		at := "tools." + strconv.Itoa(i)
		if t.Type != "" && t.Type != "custom" {
			return invalid(at+".type", "unsupported_tool", "%s.type: server tool %q is not supported by gatehouse; only custom tools (name, description, input_schema) can be served by other backends", at, t.Type)
		}
		if t.Name == "" {
			return required(at + ".name")
		}
		if llm.KindOf(t.InputSchema) != llm.KindObject {
			return required(at + ".input_schema")
		}
		d.p.Tools = append(d.p.Tools, llm.Tool{Name: t.Name, Description: t.Description, Parameters: t.InputSchema, Strict: t.Strict,
			CacheControl: llm.NonNull(t.CacheControl)})
	}
	return nil
}

// system becomes one system message; text blocks keep their
// cache_control for backends that understand it.
func (d *decoder) system(v []byte) *llm.Error {
	var parts []llm.Part
	switch llm.KindOf(v) {
	case llm.KindNull:
		return nil
	case llm.KindString:
		var s string
		_ = json.Unmarshal(v, &s)
		if s == "" {
			return nil
		}
		parts = []llm.Part{{Type: llm.PartText, Text: s}}
	case llm.KindArray:
		var bs []wireBlock
		if err := json.Unmarshal(v, &bs); err != nil {
			return typeError("system", err)
		}
		for i, b := range bs {
			if b.Type != "text" {
				return invalid("system."+strconv.Itoa(i)+".type", "invalid_value", "system.%d.type: Input should be 'text'", i)
			}
			parts = append(parts, llm.Part{Type: llm.PartText, Text: b.Text, CacheControl: llm.NonNull(b.CacheControl)})
		}
		if len(parts) == 0 {
			return nil
		}
	default:
		return invalid("system", "invalid_type", "system: Input should be a valid string or a list of text blocks")
	}
	// A system prompt always leads, whatever order the keys came in.
	d.p.Messages = append([]llm.Message{{Role: llm.RoleSystem, Content: parts}}, d.p.Messages...)
	return nil
}

// errNull words a null where a value is required as Anthropic does.
var errNull = errors.New("Input should not be null") //lint:ignore ST1005 the text follows the field name in a client message

// strict decodes a value that must not be null.
func strict(v []byte, dst any) error {
	if llm.KindOf(v) == llm.KindNull {
		return errNull
	}
	return json.Unmarshal(v, dst)
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

func required(param string) *llm.Error {
	return invalid(param, "missing_required_parameter", "%s: Field required", param)
}

// typeError names the field whose value has the wrong JSON type.
func typeError(param string, err error) *llm.Error {
	msg := err.Error()
	var te *json.UnmarshalTypeError
	if asTypeError(err, &te) {
		if te.Field != "" {
			param += "." + te.Field
		}
		msg = "Input should be " + typeName(te.Type.Kind().String()) + ", not " + te.Value
	}
	return invalid(param, "invalid_type", "%s: %s", param, msg)
}

func asTypeError(err error, te **json.UnmarshalTypeError) bool {
	t, ok := err.(*json.UnmarshalTypeError)
	if ok {
		*te = t
	}
	return ok
}

func typeName(kind string) string {
	switch kind {
	case "string":
		return "a valid string"
	case "bool":
		return "a valid boolean"
	case "slice", "array":
		return "a valid list"
	case "map", "struct":
		return "a valid object"
	case "int", "int64", "int32":
		return "a valid integer"
	}
	return "a valid number"
}

// path joins field path elements the way Anthropic's errors spell them
// (messages.0.content.1.source).
func path(parts ...any) string {
	var b strings.Builder
	for i, p := range parts {
		if i > 0 {
			b.WriteByte('.')
		}
		fmt.Fprint(&b, p)
	}
	return b.String()
}
