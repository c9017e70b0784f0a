package gemini

import (
	"encoding/json"
	"math"
	"path"
	"sort"
	"strconv"
	"strings"

	"gatehouse/internal/llm"
	"gatehouse/internal/provider"
)

// The request shapes of generateContent, as the Gemini API reference
// names them. Only what the gateway sends is declared; encoding/json
// omits what is unset, so the body carries no field Gemini would reject.

type generateRequest struct {
	Contents          []content         `json:"contents"`
	SystemInstruction *content          `json:"systemInstruction,omitempty"`
	Tools             []tool            `json:"tools,omitempty"`
	ToolConfig        *toolConfig       `json:"toolConfig,omitempty"`
	GenerationConfig  *generationConfig `json:"generationConfig,omitempty"`
}

type content struct {
	Role  string `json:"role,omitempty"`
	Parts []part `json:"parts"`
}

// part is one piece of a content, used for requests and responses alike.
// Text is a pointer because a response part may carry an empty text next
// to its thoughtSignature, and a request part must never carry one alone.
type part struct {
	Text             *string           `json:"text,omitempty"`
	Thought          bool              `json:"thought,omitempty"`
	ThoughtSignature string            `json:"thoughtSignature,omitempty"`
	InlineData       *blob             `json:"inlineData,omitempty"`
	FileData         *fileData         `json:"fileData,omitempty"`
	FunctionCall     *functionCall     `json:"functionCall,omitempty"`
	FunctionResponse *functionResponse `json:"functionResponse,omitempty"`
}

type blob struct {
	MimeType string `json:"mimeType"`
	Data     string `json:"data"`
}

type fileData struct {
	MimeType string `json:"mimeType,omitempty"`
	FileURI  string `json:"fileUri"`
}

type functionCall struct {
	ID   string          `json:"id,omitempty"` // responses only; the Gemini API rarely sets it
	Name string          `json:"name"`
	Args json.RawMessage `json:"args,omitempty"`
}

type functionResponse struct {
	Name     string          `json:"name"`
	Response json.RawMessage `json:"response"`
}

type tool struct {
	FunctionDeclarations []functionDeclaration `json:"functionDeclarations"`
}

// functionDeclaration sends the parameters as parametersJsonSchema, which
// takes JSON Schema as OpenAI clients write it ($defs, anyOf,
// additionalProperties …); the older "parameters" field takes only
// Gemini's OpenAPI subset and rejects much of what clients send.
type functionDeclaration struct {
	Name                 string          `json:"name"`
	Description          string          `json:"description,omitempty"`
	ParametersJSONSchema json.RawMessage `json:"parametersJsonSchema,omitempty"`
}

type toolConfig struct {
	FunctionCallingConfig functionCallingConfig `json:"functionCallingConfig"`
}

type functionCallingConfig struct {
	Mode                 string   `json:"mode"`
	AllowedFunctionNames []string `json:"allowedFunctionNames,omitempty"`
}

// generationConfig carries the sampling settings. response_format's schema
// goes in responseJsonSchema (full JSON Schema) rather than responseSchema
// (the OpenAPI subset), for the same reason as parametersJsonSchema.
type generationConfig struct {
	StopSequences      []string        `json:"stopSequences,omitempty"`
	ResponseMimeType   string          `json:"responseMimeType,omitempty"`
	ResponseJSONSchema json.RawMessage `json:"responseJsonSchema,omitempty"`
	CandidateCount     *int            `json:"candidateCount,omitempty"`
	MaxOutputTokens    int             `json:"maxOutputTokens,omitempty"`
	Temperature        *float64        `json:"temperature,omitempty"`
	TopP               *float64        `json:"topP,omitempty"`
	Seed               *int64          `json:"seed,omitempty"`
	PresencePenalty    *float64        `json:"presencePenalty,omitempty"`
	FrequencyPenalty   *float64        `json:"frequencyPenalty,omitempty"`
	ThinkingConfig     *thinkingConfig `json:"thinkingConfig,omitempty"`
}

type thinkingConfig struct {
	ThinkingBudget  *int `json:"thinkingBudget,omitempty"` // 0 turns thinking off, so it is a pointer
	IncludeThoughts bool `json:"includeThoughts,omitempty"`
}

// skipSignature is the placeholder thought signature the Gemini API
// documents for function calls whose real signature is not available
// (histories written by other models or by clients that drop it). Gemini 3
// models refuse a function call turn without a signature; OpenAI clients
// do not round-trip reasoning_signature, so without it every tool loop of
// an OpenAI client against Gemini 3 would fail on its second request.
const skipSignature = "skip_thought_signature_validator"

// translate builds the generateContent body for p. Errors are OpenAI-style
// 400s naming the offending parameter.
func translate(d *provider.Deployment, p *llm.ChatParams) (*generateRequest, error) {
	t := &translator{d: d, p: p, out: &generateRequest{}}
	if err := t.unsupported(); err != nil {
		return nil, err
	}
	for i := range p.Messages {
		if err := t.message(i); err != nil {
			return nil, err
		}
	}
	if t.out.Contents == nil {
		t.out.Contents = []content{}
	}
	if err := t.tools(); err != nil {
		return nil, err
	}
	cfg, err := t.generationConfig()
	if err != nil {
		return nil, err
	}
	t.out.GenerationConfig = cfg
	return t.out, nil
}

type translator struct {
	d   *provider.Deployment
	p   *llm.ChatParams
	out *generateRequest
}

// refuse is the answer to a parameter Gemini cannot honour: a 400, or
// nothing when the deployment drops such parameters.
func (t *translator) refuse(param string) error {
	if t.d.DropUnsupported {
		return nil
	}
	return provider.Unsupported(t.d, param)
}

// unsupported checks the parameters Gemini has no equivalent for.
// user and metadata are dropped without a word: they label the request for
// the caller's own bookkeeping (gatehouse reads user for customer budgets)
// and never change the answer, so refusing them would only break clients.
func (t *translator) unsupported() error {
	p := t.p
	if p.Logprobs {
		if err := t.refuse("logprobs"); err != nil {
			return err
		}
	}
	if p.TopLogprobs != nil {
		if err := t.refuse("top_logprobs"); err != nil {
			return err
		}
	}
	if p.ParallelToolCalls != nil && !*p.ParallelToolCalls {
		// Gemini may always answer with several calls at once.
		if err := t.refuse("parallel_tool_calls"); err != nil {
			return err
		}
	}
	keys := make([]string, 0, len(p.Other))
	for k, v := range p.Other {
		if llm.KindOf(v) != llm.KindNull {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		if err := t.refuse(k); err != nil {
			return err
		}
	}
	return nil
}

func at(i int, field string) string { return "messages[" + strconv.Itoa(i) + "]." + field }

// message appends message i. System and developer messages become the
// system instruction (Gemini has one, wherever they stood); turns of the
// same role that end up next to each other are merged into one content, as
// Gemini expects turns to alternate.
func (t *translator) message(i int) error {
	m := &t.p.Messages[i]
	switch m.Role {
	case llm.RoleSystem, llm.RoleDeveloper:
		for j, pt := range m.Content {
			if pt.Type != llm.PartText {
				return llm.BadRequest(at(i, "content["+strconv.Itoa(j)+"]"), "invalid_value",
					"Invalid content part in '%s': Gemini's system instruction takes text only.", at(i, "content"))
			}
			if pt.Text == "" {
				continue
			}
			if t.out.SystemInstruction == nil {
				t.out.SystemInstruction = &content{}
			}
			t.out.SystemInstruction.Parts = append(t.out.SystemInstruction.Parts, textPart(pt.Text))
		}
		return nil
	case llm.RoleUser:
		parts, err := t.parts(i, m.Content)
		if err != nil {
			return err
		}
		t.append("user", parts)
	case llm.RoleAssistant:
		parts, err := t.assistant(i, m)
		if err != nil {
			return err
		}
		t.append("model", parts)
	case llm.RoleTool:
		pt, err := t.toolResult(i, m)
		if err != nil {
			return err
		}
		t.append("user", []part{pt})
	}
	return nil
}

func (t *translator) append(role string, parts []part) {
	if len(parts) == 0 {
		return // Gemini refuses a content without parts
	}
	cs := t.out.Contents
	if n := len(cs); n > 0 && cs[n-1].Role == role {
		cs[n-1].Parts = append(cs[n-1].Parts, parts...)
		return
	}
	t.out.Contents = append(cs, content{Role: role, Parts: parts})
}

func textPart(s string) part { return part{Text: &s} }

// parts converts user content: text, images, audio and files.
func (t *translator) parts(i int, in []llm.Part) ([]part, error) {
	out := make([]part, 0, len(in))
	for j, pt := range in {
		param := at(i, "content["+strconv.Itoa(j)+"]")
		switch pt.Type {
		case llm.PartText:
			if pt.Text != "" {
				out = append(out, textPart(pt.Text))
			}
		case llm.PartImageURL:
			p, err := imagePart(param+".image_url.url", pt.ImageURL)
			if err != nil {
				return nil, err
			}
			out = append(out, p)
		case llm.PartAudio:
			p, err := audioPart(param, pt.Raw)
			if err != nil {
				return nil, err
			}
			out = append(out, p)
		case llm.PartFile:
			p, err := filePart(param, pt.Raw)
			if err != nil {
				return nil, err
			}
			out = append(out, p)
		case "refusal":
			var r struct {
				Refusal string `json:"refusal"`
			}
			if json.Unmarshal(pt.Raw, &r) == nil && r.Refusal != "" {
				out = append(out, textPart(r.Refusal))
			}
		default:
			return nil, llm.BadRequest(param+".type", "invalid_value", "Invalid value for '%s.type': %q parts cannot be sent to Gemini.", param, pt.Type)
		}
	}
	return out, nil
}

// imageMIME maps file extensions to the image types Gemini accepts.
var imageMIME = map[string]string{
	".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg",
	".webp": "image/webp", ".heic": "image/heic", ".heif": "image/heif",
}

// imagePart sends a data: URL inline and an http(s) URL as fileData, whose
// mimeType Gemini requires: it is taken from the URL's extension, because
// the adapter does no I/O and cannot ask the server.
func imagePart(param, u string) (part, error) {
	if strings.HasPrefix(u, "data:") {
		mt, data, ok := llm.DataURL(u)
		if !ok || mt == "" || data == "" {
			return part{}, llm.BadRequest(param, "invalid_image_url", "Invalid '%s': a data URL must look like data:<media type>;base64,<data>.", param)
		}
		return part{InlineData: &blob{MimeType: mt, Data: data}}, nil
	}
	if !strings.HasPrefix(u, "https://") && !strings.HasPrefix(u, "http://") {
		return part{}, llm.BadRequest(param, "invalid_image_url", "Invalid '%s': expected an http(s) URL or a base64 data URL.", param)
	}
	p := u
	if k := strings.IndexAny(p, "?#"); k >= 0 {
		p = p[:k]
	}
	mt, ok := imageMIME[strings.ToLower(path.Ext(p))]
	if !ok {
		return part{}, llm.BadRequest(param, "invalid_image_url",
			"Invalid '%s': Gemini needs the image's media type, and it cannot be told from this URL's extension (png, jpg, jpeg, webp, heic, heif are known). Send the image as a base64 data URL instead.", param)
	}
	return part{FileData: &fileData{MimeType: mt, FileURI: u}}, nil
}

func audioPart(param string, raw json.RawMessage) (part, error) {
	var w struct {
		InputAudio struct {
			Data   string `json:"data"`
			Format string `json:"format"`
		} `json:"input_audio"`
	}
	if json.Unmarshal(raw, &w) != nil || w.InputAudio.Data == "" || w.InputAudio.Format == "" {
		return part{}, llm.BadRequest(param+".input_audio", "invalid_value", "Invalid '%s.input_audio': expected data and format.", param)
	}
	return part{InlineData: &blob{MimeType: "audio/" + w.InputAudio.Format, Data: w.InputAudio.Data}}, nil
}

// filePart sends an inline file (a PDF, typically). Files uploaded to
// OpenAI (file_id) mean nothing to Gemini.
func filePart(param string, raw json.RawMessage) (part, error) {
	var w struct {
		File struct {
			FileData string `json:"file_data"`
			FileID   string `json:"file_id"`
			Filename string `json:"filename"`
		} `json:"file"`
	}
	if json.Unmarshal(raw, &w) != nil {
		return part{}, llm.BadRequest(param+".file", "invalid_value", "Invalid '%s.file'.", param)
	}
	f := w.File
	if f.FileData == "" {
		return part{}, llm.BadRequest(param+".file.file_id", "unsupported_value",
			"Invalid '%s.file': OpenAI file ids cannot be sent to Gemini; send the file inline as file_data.", param)
	}
	if mt, data, ok := llm.DataURL(f.FileData); ok && mt != "" {
		return part{InlineData: &blob{MimeType: mt, Data: data}}, nil
	}
	if strings.EqualFold(path.Ext(f.Filename), ".pdf") {
		return part{InlineData: &blob{MimeType: "application/pdf", Data: f.FileData}}, nil
	}
	return part{}, llm.BadRequest(param+".file.file_data", "invalid_value",
		"Invalid '%s.file.file_data': send a data URL (data:<media type>;base64,…) so Gemini knows the file's type.", param)
}

// assistant converts an earlier model turn: its text, then its tool calls
// as functionCall parts. The thought signature goes back on the first
// function call (where Gemini requires it), else on the first part.
func (t *translator) assistant(i int, m *llm.Message) ([]part, error) {
	out, err := t.parts(i, m.Content)
	if err != nil {
		return nil, err
	}
	if m.Refusal != "" && len(out) == 0 {
		out = append(out, textPart(m.Refusal))
	}
	firstCall := -1
	for j, tc := range m.ToolCalls {
		args := strings.TrimSpace(tc.Arguments)
		if args == "" {
			args = "{}"
		}
		if llm.KindOf([]byte(args)) != llm.KindObject || !json.Valid([]byte(args)) {
			param := at(i, "tool_calls["+strconv.Itoa(j)+"].function.arguments")
			return nil, llm.BadRequest(param, "invalid_value", "Invalid '%s': Gemini needs the arguments as a JSON object.", param)
		}
		if firstCall < 0 {
			firstCall = len(out)
		}
		out = append(out, part{FunctionCall: &functionCall{Name: tc.Name, Args: json.RawMessage(args)}})
	}
	sig := m.ReasoningSignature
	switch {
	case firstCall >= 0:
		if sig == "" {
			sig = skipSignature
		}
		out[firstCall].ThoughtSignature = sig
	case sig != "" && len(out) > 0:
		out[0].ThoughtSignature = sig
	}
	return out, nil
}

// toolResult converts a tool message into a functionResponse. Gemini
// matches results to calls by function name, which OpenAI's tool message
// does not carry: it is looked up from the nearest earlier assistant call
// with the same id.
func (t *translator) toolResult(i int, m *llm.Message) (part, error) {
	name := ""
	for k := i - 1; k >= 0 && name == ""; k-- {
		prev := &t.p.Messages[k]
		if prev.Role != llm.RoleAssistant {
			continue
		}
		for _, tc := range prev.ToolCalls {
			if tc.ID == m.ToolCallID {
				name = tc.Name
				break
			}
		}
	}
	if name == "" {
		return part{}, llm.BadRequest(at(i, "tool_call_id"), "invalid_value",
			"Invalid '%s': no earlier assistant message has a tool call with id %q, and Gemini needs that call's function name.", at(i, "tool_call_id"), m.ToolCallID)
	}
	for j, pt := range m.Content {
		if pt.Type != llm.PartText {
			param := at(i, "content["+strconv.Itoa(j)+"]")
			return part{}, llm.BadRequest(param, "invalid_value", "Invalid '%s': a tool result sent to Gemini must be text.", param)
		}
	}
	return part{FunctionResponse: &functionResponse{Name: name, Response: responseObject(m.TextContent())}}, nil
}

// responseObject wraps a tool result into the object Gemini's
// functionResponse.response must be: a JSON object result is sent as it
// is; anything else goes under "output", the key Gemini documents for a
// function's output.
func responseObject(s string) json.RawMessage {
	b := []byte(strings.TrimSpace(s))
	if llm.KindOf(b) == llm.KindObject && json.Valid(b) {
		return b
	}
	var v any = s
	if json.Valid(b) && len(b) > 0 {
		v = json.RawMessage(b)
	}
	out, _ := json.Marshal(map[string]any{"output": v})
	return out
}

// tools sends the function declarations and tool_choice.
func (t *translator) tools() error {
	p := t.p
	if len(p.Tools) > 0 {
		decls := make([]functionDeclaration, len(p.Tools))
		for i, tl := range p.Tools {
			decls[i] = functionDeclaration{Name: tl.Name, Description: tl.Description, ParametersJSONSchema: tl.Parameters}
		}
		t.out.Tools = []tool{{FunctionDeclarations: decls}}
	}
	tc := p.ToolChoice
	if tc == nil {
		return nil
	}
	if len(p.Tools) == 0 {
		if tc.Mode == llm.ToolChoiceRequired || tc.Mode == llm.ToolChoiceFunction {
			return llm.BadRequest("tool_choice", "invalid_value", "Invalid value for 'tool_choice': a tool can only be required when tools are given.")
		}
		return nil
	}
	fc := functionCallingConfig{}
	switch tc.Mode {
	case llm.ToolChoiceAuto:
		fc.Mode = "AUTO"
	case llm.ToolChoiceNone:
		fc.Mode = "NONE"
	case llm.ToolChoiceRequired:
		fc.Mode = "ANY"
	case llm.ToolChoiceFunction:
		fc.Mode, fc.AllowedFunctionNames = "ANY", []string{tc.Name}
	}
	t.out.ToolConfig = &toolConfig{FunctionCallingConfig: fc}
	return nil
}

func (t *translator) generationConfig() (*generationConfig, error) {
	p := t.p
	g := &generationConfig{
		StopSequences: p.Stop, MaxOutputTokens: p.MaxTokens, CandidateCount: p.N,
		Temperature: p.Temperature, TopP: p.TopP,
		PresencePenalty: p.PresencePenalty, FrequencyPenalty: p.FrequencyPenalty,
	}
	if p.Seed != nil {
		if *p.Seed < math.MinInt32 || *p.Seed > math.MaxInt32 {
			return nil, llm.BadRequest("seed", "invalid_value", "Invalid value for 'seed': Gemini takes a 32-bit integer.")
		}
		g.Seed = p.Seed
	}
	if rf := p.ResponseFormat; rf != nil {
		switch rf.Type {
		case llm.FormatJSONObject:
			g.ResponseMimeType = "application/json"
		case llm.FormatJSONSchema:
			g.ResponseMimeType, g.ResponseJSONSchema = "application/json", rf.Schema
		}
	}
	tc, err := thinking(p)
	if err != nil {
		return nil, err
	}
	g.ThinkingConfig = tc
	if g.StopSequences == nil && g.ResponseMimeType == "" && g.CandidateCount == nil && g.MaxOutputTokens == 0 &&
		g.Temperature == nil && g.TopP == nil && g.Seed == nil && g.PresencePenalty == nil &&
		g.FrequencyPenalty == nil && g.ThinkingConfig == nil {
		return nil, nil
	}
	return g, nil
}

// thinking maps reasoning settings onto a thinking budget. A budget in
// tokens (from the Anthropic dialect) wins over reasoning_effort; either
// one asks for thought summaries, which come back as reasoning_content.
// reasoning_effort "none" turns thinking off.
func thinking(p *llm.ChatParams) (*thinkingConfig, error) {
	if p.ThinkingBudget > 0 {
		b := p.ThinkingBudget
		return &thinkingConfig{ThinkingBudget: &b, IncludeThoughts: true}, nil
	}
	switch p.ReasoningEffort {
	case "":
		return nil, nil
	case "none":
		zero := 0
		return &thinkingConfig{ThinkingBudget: &zero}, nil
	}
	b := llm.BudgetForEffort(p.ReasoningEffort)
	if b == 0 {
		return nil, llm.BadRequest("reasoning_effort", "invalid_value",
			"Invalid value for 'reasoning_effort': expected none, minimal, low, medium or high, got %q.", p.ReasoningEffort)
	}
	return &thinkingConfig{ThinkingBudget: &b, IncludeThoughts: true}, nil
}

// modelPath is the model's resource name for the URL: Gemini model ids
// may be configured with or without their "models/" prefix.
func modelPath(model string) string {
	if strings.Contains(model, "/") {
		return model
	}
	return "models/" + model
}
