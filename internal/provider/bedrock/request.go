package bedrock

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"gatehouse/internal/llm"
	"gatehouse/internal/provider"
)

// The Converse request, as the Bedrock API reference documents it. Only
// what gatehouse translates is modelled; every member is optional on the
// wire except messages.
type converseRequest struct {
	Messages                     []message         `json:"messages"`
	System                       []systemBlock     `json:"system,omitempty"`
	InferenceConfig              *inferenceConfig  `json:"inferenceConfig,omitempty"`
	ToolConfig                   *toolConfig       `json:"toolConfig,omitempty"`
	OutputConfig                 *outputConfig     `json:"outputConfig,omitempty"`
	AdditionalModelRequestFields map[string]any    `json:"additionalModelRequestFields,omitempty"`
	RequestMetadata              map[string]string `json:"requestMetadata,omitempty"`
}

type message struct {
	Role    string         `json:"role"`
	Content []contentBlock `json:"content"`
}

// contentBlock is a union: exactly one member is set.
type contentBlock struct {
	Text             *string           `json:"text,omitempty"`
	Image            *imageBlock       `json:"image,omitempty"`
	ToolUse          *toolUseBlock     `json:"toolUse,omitempty"`
	ToolResult       *toolResultBlock  `json:"toolResult,omitempty"`
	ReasoningContent *reasoningContent `json:"reasoningContent,omitempty"`
}

type imageBlock struct {
	Format string `json:"format"` // png | jpeg | gif | webp
	Source struct {
		Bytes string `json:"bytes"` // base64
	} `json:"source"`
}

type toolUseBlock struct {
	ToolUseID string          `json:"toolUseId"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
}

type toolResultBlock struct {
	ToolUseID string              `json:"toolUseId"`
	Content   []toolResultContent `json:"content"`
}

type toolResultContent struct {
	JSON json.RawMessage `json:"json,omitempty"`
	Text *string         `json:"text,omitempty"`
}

type reasoningContent struct {
	ReasoningText *reasoningText `json:"reasoningText,omitempty"`
}

type reasoningText struct {
	Text      string `json:"text"`
	Signature string `json:"signature,omitempty"`
}

type systemBlock struct {
	Text string `json:"text"`
}

type inferenceConfig struct {
	MaxTokens     int      `json:"maxTokens,omitempty"`
	Temperature   *float64 `json:"temperature,omitempty"`
	TopP          *float64 `json:"topP,omitempty"`
	StopSequences []string `json:"stopSequences,omitempty"`
}

type toolConfig struct {
	Tools      []tool          `json:"tools"`
	ToolChoice json.RawMessage `json:"toolChoice,omitempty"`
}

type tool struct {
	ToolSpec toolSpec `json:"toolSpec"`
}

type toolSpec struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	InputSchema struct {
		JSON json.RawMessage `json:"json"`
	} `json:"inputSchema"`
	Strict *bool `json:"strict,omitempty"`
}

type outputConfig struct {
	TextFormat textFormat `json:"textFormat"`
}

type textFormat struct {
	Type      string `json:"type"` // json_schema
	Structure struct {
		JSONSchema jsonSchema `json:"jsonSchema"`
	} `json:"structure"`
}

type jsonSchema struct {
	Schema      string `json:"schema"` // the schema as JSON text, as Bedrock wants it
	Name        string `json:"name,omitempty"`
	Description string `json:"description,omitempty"`
}

// translator turns one OpenAI request into a Converse request.
type translator struct {
	d *provider.Deployment
	p *llm.ChatParams
}

// translate builds the Converse request for p. Errors are 400s naming the
// parameter.
func translate(d *provider.Deployment, p *llm.ChatParams) (*converseRequest, error) {
	t := translator{d: d, p: p}
	out := &converseRequest{}
	if err := t.messages(out); err != nil {
		return nil, err
	}
	if err := t.unsupported(); err != nil {
		return nil, err
	}
	t.inference(out)
	if err := t.tools(out); err != nil {
		return nil, err
	}
	if err := t.responseFormat(out); err != nil {
		return nil, err
	}
	if err := t.reasoning(out); err != nil {
		return nil, err
	}
	t.metadata(out)
	return out, nil
}

// unsupported refuses (or, with drop_unsupported, ignores) what Converse
// has no way to express.
func (t *translator) unsupported() error {
	p := t.p
	var params []string
	if p.N != nil && *p.N != 1 {
		params = append(params, "n")
	}
	if p.Seed != nil {
		params = append(params, "seed")
	}
	if p.PresencePenalty != nil {
		params = append(params, "presence_penalty")
	}
	if p.FrequencyPenalty != nil {
		params = append(params, "frequency_penalty")
	}
	if p.Logprobs {
		params = append(params, "logprobs")
	}
	if p.TopLogprobs != nil {
		params = append(params, "top_logprobs")
	}
	if p.ParallelToolCalls != nil && !*p.ParallelToolCalls {
		params = append(params, "parallel_tool_calls")
	}
	others := make([]string, 0, len(p.Other))
	for k := range p.Other {
		others = append(others, k)
	}
	sort.Strings(others)
	params = append(params, others...)
	if len(params) > 0 && !t.d.DropUnsupported {
		return provider.Unsupported(t.d, params[0])
	}
	return nil
}

func (t *translator) inference(out *converseRequest) {
	p := t.p
	if p.MaxTokens == 0 && p.Temperature == nil && p.TopP == nil && len(p.Stop) == 0 {
		return
	}
	out.InferenceConfig = &inferenceConfig{MaxTokens: p.MaxTokens, Temperature: p.Temperature, TopP: p.TopP, StopSequences: p.Stop}
}

// messages maps the conversation. System and developer turns become
// system blocks; tool results become toolResult blocks of a user turn;
// consecutive turns of one role are merged, because Converse requires
// user and assistant to alternate.
func (t *translator) messages(out *converseRequest) error {
	for i := range t.p.Messages {
		m := &t.p.Messages[i]
		switch m.Role {
		case llm.RoleSystem, llm.RoleDeveloper:
			for j, part := range m.Content {
				if part.Type != llm.PartText {
					return llm.BadRequest(fmt.Sprintf("messages[%d].content[%d]", i, j), "invalid_value",
						"Bedrock system prompts take text only; messages[%d].content[%d] is of type %q.", i, j, part.Type)
				}
			}
			if text := m.TextContent(); text != "" {
				out.System = append(out.System, systemBlock{Text: text})
			}
		case llm.RoleUser:
			blocks, err := t.userContent(i, m)
			if err != nil {
				return err
			}
			appendTurn(out, "user", blocks)
		case llm.RoleAssistant:
			blocks, err := t.assistantContent(i, m)
			if err != nil {
				return err
			}
			appendTurn(out, "assistant", blocks)
		case llm.RoleTool:
			appendTurn(out, "user", []contentBlock{toolResult(m)})
		default:
			return llm.BadRequest(fmt.Sprintf("messages[%d].role", i), "invalid_value",
				"Invalid value for 'messages[%d].role': %q cannot be sent to Bedrock.", i, m.Role)
		}
	}
	return nil
}

// appendTurn adds blocks as a turn of role, merging with the previous
// turn when it has the same role. A turn with no blocks is left out:
// Bedrock refuses empty content.
func appendTurn(out *converseRequest, role string, blocks []contentBlock) {
	if len(blocks) == 0 {
		return
	}
	if n := len(out.Messages); n > 0 && out.Messages[n-1].Role == role {
		out.Messages[n-1].Content = append(out.Messages[n-1].Content, blocks...)
		return
	}
	out.Messages = append(out.Messages, message{Role: role, Content: blocks})
}

func (t *translator) userContent(i int, m *llm.Message) ([]contentBlock, error) {
	blocks := make([]contentBlock, 0, len(m.Content))
	for j, part := range m.Content {
		param := fmt.Sprintf("messages[%d].content[%d]", i, j)
		switch part.Type {
		case llm.PartText:
			blocks = append(blocks, textBlock(part.Text))
		case llm.PartImageURL:
			img, err := image(param, part.ImageURL)
			if err != nil {
				return nil, err
			}
			blocks = append(blocks, contentBlock{Image: img})
		default:
			if !t.d.DropUnsupported {
				return nil, provider.Unsupported(t.d, param+" (type "+part.Type+")")
			}
		}
	}
	return blocks, nil
}

// imageFormats are the formats Converse accepts, by media type.
var imageFormats = map[string]string{"image/png": "png", "image/jpeg": "jpeg", "image/jpg": "jpeg", "image/gif": "gif", "image/webp": "webp"}

// image turns a data: URL into an image block. Bedrock takes image bytes
// only (or S3 locations), never a web URL, and the gateway does not fetch
// URLs on a client's behalf.
func image(param, u string) (*imageBlock, error) {
	media, data, ok := llm.DataURL(u)
	if !ok {
		if strings.HasPrefix(u, "http://") || strings.HasPrefix(u, "https://") {
			return nil, llm.BadRequest(param+".image_url.url", "unsupported_image_url",
				"Bedrock does not fetch images from URLs: send the image inline as a data: URL (data:image/png;base64,…).")
		}
		return nil, llm.BadRequest(param+".image_url.url", "invalid_image_url",
			"Invalid image URL: expected a base64 data: URL.")
	}
	format, ok := imageFormats[strings.ToLower(media)]
	if !ok {
		return nil, llm.BadRequest(param+".image_url.url", "unsupported_image_format",
			"Bedrock accepts png, jpeg, gif and webp images; got %q.", media)
	}
	img := &imageBlock{Format: format}
	img.Source.Bytes = data
	return img, nil
}

func (t *translator) assistantContent(i int, m *llm.Message) ([]contentBlock, error) {
	var blocks []contentBlock
	if m.Reasoning != "" {
		blocks = append(blocks, contentBlock{ReasoningContent: &reasoningContent{
			ReasoningText: &reasoningText{Text: m.Reasoning, Signature: m.ReasoningSignature}}})
	}
	for _, part := range m.Content {
		// An assistant turn that only calls tools often carries "" as
		// its content; Bedrock refuses blank text blocks.
		if part.Type == llm.PartText && strings.TrimSpace(part.Text) != "" {
			blocks = append(blocks, textBlock(part.Text))
		}
	}
	for j, tc := range m.ToolCalls {
		input := json.RawMessage(strings.TrimSpace(tc.Arguments))
		if len(input) == 0 {
			input = json.RawMessage("{}")
		}
		if llm.KindOf(input) != llm.KindObject || !json.Valid(input) {
			return nil, llm.BadRequest(fmt.Sprintf("messages[%d].tool_calls[%d].function.arguments", i, j), "invalid_value",
				"Bedrock needs tool call arguments to be a JSON object; messages[%d].tool_calls[%d] has %q.", i, j, tc.Arguments)
		}
		blocks = append(blocks, contentBlock{ToolUse: &toolUseBlock{ToolUseID: tc.ID, Name: tc.Name, Input: input}})
	}
	return blocks, nil
}

// toolResult carries a tool message: as JSON when it is a JSON object
// (Bedrock's json member takes a document), else as text.
func toolResult(m *llm.Message) contentBlock {
	text := m.TextContent()
	c := toolResultContent{}
	if raw := json.RawMessage(strings.TrimSpace(text)); llm.KindOf(raw) == llm.KindObject && json.Valid(raw) {
		c.JSON = raw
	} else {
		c.Text = &text
	}
	return contentBlock{ToolResult: &toolResultBlock{ToolUseID: m.ToolCallID, Content: []toolResultContent{c}}}
}

func textBlock(s string) contentBlock { return contentBlock{Text: &s} }

// tools maps the function declarations and tool_choice. Converse has no
// "none": without tool history the tools are simply not sent; with tool
// history Bedrock insists on a toolConfig, so "none" cannot be honoured.
func (t *translator) tools(out *converseRequest) error {
	p := t.p
	history := historyTools(out.Messages)
	none := p.ToolChoice != nil && p.ToolChoice.Mode == llm.ToolChoiceNone
	if none && len(history) > 0 && !t.d.DropUnsupported {
		return llm.BadRequest("tool_choice", "unsupported_parameter",
			"Bedrock cannot honour tool_choice \"none\" in a conversation that already contains tool calls (it requires the tools to be declared, and then the model may call them). Omit tool_choice, or set drop_unsupported: true on provider %q.", t.d.Provider)
	}
	if (len(p.Tools) == 0 || none) && len(history) == 0 {
		return nil
	}
	tc := &toolConfig{}
	declared := map[string]bool{}
	for _, ft := range p.Tools {
		spec := toolSpec{Name: ft.Name, Description: ft.Description, Strict: ft.Strict}
		spec.InputSchema.JSON = ft.Parameters
		if spec.InputSchema.JSON == nil {
			spec.InputSchema.JSON = json.RawMessage(provider.EmptySchema)
		}
		tc.Tools = append(tc.Tools, tool{ToolSpec: spec})
		declared[ft.Name] = true
	}
	// Converse refuses toolUse and toolResult blocks without a toolConfig,
	// so tools called in the history but not declared now are declared
	// with an open schema.
	for _, name := range history {
		if !declared[name] {
			spec := toolSpec{Name: name}
			spec.InputSchema.JSON = json.RawMessage(provider.EmptySchema)
			tc.Tools = append(tc.Tools, tool{ToolSpec: spec})
			declared[name] = true
		}
	}
	if p.ToolChoice != nil && !none {
		switch p.ToolChoice.Mode {
		case llm.ToolChoiceAuto:
			tc.ToolChoice = json.RawMessage(`{"auto":{}}`)
		case llm.ToolChoiceRequired:
			tc.ToolChoice = json.RawMessage(`{"any":{}}`)
		case llm.ToolChoiceFunction:
			if !declared[p.ToolChoice.Name] {
				return llm.BadRequest("tool_choice", "invalid_value",
					"Invalid value for 'tool_choice': function %q is not among the declared tools.", p.ToolChoice.Name)
			}
			b, _ := json.Marshal(map[string]map[string]string{"tool": {"name": p.ToolChoice.Name}})
			tc.ToolChoice = b
		}
	}
	out.ToolConfig = tc
	return nil
}

// historyTools lists the names of the tools called in the conversation,
// in order of first use.
func historyTools(msgs []message) []string {
	var names []string
	seen := map[string]bool{}
	for _, m := range msgs {
		for _, b := range m.Content {
			if b.ToolUse != nil && !seen[b.ToolUse.Name] {
				seen[b.ToolUse.Name] = true
				names = append(names, b.ToolUse.Name)
			}
		}
	}
	return names
}

// responseFormat maps json_schema onto Converse's structured output
// (outputConfig.textFormat). Plain JSON mode (json_object) has no
// Converse equivalent short of a schema, so it is refused.
func (t *translator) responseFormat(out *converseRequest) error {
	rf := t.p.ResponseFormat
	if rf == nil || rf.Type == llm.FormatText {
		return nil
	}
	if rf.Type != llm.FormatJSONSchema || rf.Schema == nil {
		if t.d.DropUnsupported {
			return nil
		}
		return provider.Unsupported(t.d, "response_format")
	}
	oc := &outputConfig{}
	oc.TextFormat.Type = "json_schema"
	oc.TextFormat.Structure.JSONSchema = jsonSchema{Schema: string(rf.Schema), Name: rf.Name, Description: rf.Description}
	out.OutputConfig = oc
	return nil
}

// Extended thinking is documented for Anthropic's Claude models on
// Bedrock, through additionalModelRequestFields; other model families
// have no common reasoning switch in Converse.
const (
	minThinkingBudget = 1024
	// thinkingHeadroom is added to the budget when the client set no
	// max_tokens, so the answer after the thinking has room.
	thinkingHeadroom = 4096
)

func (t *translator) reasoning(out *converseRequest) error {
	p := t.p
	budget := p.ThinkingBudget
	if budget == 0 {
		budget = llm.BudgetForEffort(p.ReasoningEffort)
	}
	if budget == 0 {
		return nil
	}
	param := "reasoning_effort"
	if p.ThinkingBudget > 0 {
		param = "thinking"
	}
	if !isAnthropic(t.d.Model) {
		if t.d.DropUnsupported {
			return nil
		}
		return provider.Unsupported(t.d, param)
	}
	ic := out.InferenceConfig
	if ic == nil {
		ic = &inferenceConfig{}
		out.InferenceConfig = ic
	}
	switch {
	case ic.MaxTokens == 0:
		ic.MaxTokens = budget + thinkingHeadroom
	case budget >= ic.MaxTokens:
		// OpenAI's max_completion_tokens includes reasoning; Anthropic's
		// budget must stay below max_tokens.
		budget = ic.MaxTokens - 1
	}
	if budget < minThinkingBudget {
		return llm.BadRequest("max_tokens", "invalid_value",
			"With reasoning on, Claude on Bedrock needs max_tokens above %d (the smallest thinking budget).", minThinkingBudget)
	}
	out.AdditionalModelRequestFields = map[string]any{"thinking": map[string]any{"type": "enabled", "budget_tokens": budget}}
	return nil
}

// isAnthropic reports whether a Bedrock model id (or inference profile,
// like us.anthropic.claude-…, or its ARN) names a Claude model.
func isAnthropic(model string) bool {
	return strings.Contains(model, "anthropic.")
}

// metadata passes user and metadata as requestMetadata, which Bedrock
// records in its invocation logs.
func (t *translator) metadata(out *converseRequest) {
	if t.p.User == "" && len(t.p.Metadata) == 0 {
		return
	}
	md := make(map[string]string, len(t.p.Metadata)+1)
	for k, v := range t.p.Metadata {
		md[k] = v
	}
	if t.p.User != "" {
		md["user"] = t.p.User
	}
	out.RequestMetadata = md
}
