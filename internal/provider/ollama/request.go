package ollama

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"gatehouse/internal/llm"
	"gatehouse/internal/provider"
)

// The wire shapes of POST /api/chat, as Ollama's API reference documents
// them. Field order follows the reference so golden files read naturally.
type chatRequest struct {
	Model    string          `json:"model"`
	Messages []message       `json:"messages"`
	Tools    []tool          `json:"tools,omitempty"`
	Format   json.RawMessage `json:"format,omitempty"`
	Options  *options        `json:"options,omitempty"`
	// Stream is always sent: Ollama streams unless told false.
	Stream bool `json:"stream"`
	// Think is true/false, or "low"/"medium"/"high" for models with levels.
	Think json.RawMessage `json:"think,omitempty"`
}

type message struct {
	Role       string     `json:"role"`
	Content    string     `json:"content"`
	Thinking   string     `json:"thinking,omitempty"`
	Images     []string   `json:"images,omitempty"`
	ToolCalls  []toolCall `json:"tool_calls,omitempty"`
	ToolName   string     `json:"tool_name,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
}

type toolCall struct {
	ID       string       `json:"id,omitempty"`
	Function callFunction `json:"function"`
}

type callFunction struct {
	Index     *int            `json:"index,omitempty"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"` // a JSON object, not text
}

type tool struct {
	Type     string      `json:"type"`
	Function functionDef `json:"function"`
}

type functionDef struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters"`
}

// options are the Modelfile parameters a request may override.
type options struct {
	NumPredict       int      `json:"num_predict,omitempty"`
	Temperature      *float64 `json:"temperature,omitempty"`
	TopP             *float64 `json:"top_p,omitempty"`
	Seed             *int64   `json:"seed,omitempty"`
	Stop             []string `json:"stop,omitempty"`
	PresencePenalty  *float64 `json:"presence_penalty,omitempty"`
	FrequencyPenalty *float64 `json:"frequency_penalty,omitempty"`
}

// encodeChat translates an OpenAI request into Ollama's. What Ollama
// cannot honour is refused with a 400, or dropped when the deployment
// says drop_unsupported. user and metadata are dropped silently: they
// label a request and change nothing about the answer.
func encodeChat(d *provider.Deployment, p *llm.ChatParams) ([]byte, error) {
	out := chatRequest{Model: d.Model, Stream: p.Stream}
	if err := refuseUnsupported(d, p); err != nil {
		return nil, err
	}
	msgs, err := encodeMessages(d, p.Messages)
	if err != nil {
		return nil, err
	}
	out.Messages = msgs
	if out.Tools, err = encodeTools(d, p); err != nil {
		return nil, err
	}
	if rf := p.ResponseFormat; rf != nil {
		switch {
		case rf.Type == llm.FormatJSONObject, rf.Type == llm.FormatJSONSchema && rf.Schema == nil:
			out.Format = json.RawMessage(`"json"`)
		case rf.Type == llm.FormatJSONSchema:
			out.Format = rf.Schema
		}
	}
	if out.Think, err = think(p); err != nil {
		return nil, err
	}
	o := options{NumPredict: p.MaxTokens, Temperature: p.Temperature, TopP: p.TopP, Seed: p.Seed,
		Stop: p.Stop, PresencePenalty: p.PresencePenalty, FrequencyPenalty: p.FrequencyPenalty}
	if o.NumPredict != 0 || o.Temperature != nil || o.TopP != nil || o.Seed != nil || len(o.Stop) > 0 ||
		o.PresencePenalty != nil || o.FrequencyPenalty != nil {
		out.Options = &o
	}
	body, err := json.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("provider %q: encode request: %w", d.Provider, err)
	}
	return body, nil
}

// refuseUnsupported checks the parameters Ollama has no equivalent for.
func refuseUnsupported(d *provider.Deployment, p *llm.ChatParams) error {
	if d.DropUnsupported {
		return nil
	}
	if p.N != nil && *p.N != 1 {
		return provider.Unsupported(d, "n")
	}
	if p.Logprobs || p.TopLogprobs != nil {
		return provider.Unsupported(d, "logprobs")
	}
	// Ollama may call several tools at once and cannot be told not to.
	if p.ParallelToolCalls != nil && !*p.ParallelToolCalls && len(p.Tools) > 0 {
		return provider.Unsupported(d, "parallel_tool_calls")
	}
	if len(p.Other) > 0 {
		keys := make([]string, 0, len(p.Other))
		for k := range p.Other {
			keys = append(keys, k)
		}
		sort.Strings(keys) // the same request always names the same parameter
		return provider.Unsupported(d, keys[0])
	}
	return nil
}

// encodeTools translates tools and tool_choice. Ollama has no tool
// choice: the model decides. "auto" is therefore exact, "none" is honoured
// by not offering the tools, and forcing a call (required, or a named
// function) cannot be promised, so it is refused unless drop_unsupported,
// in which case the tools are offered as with "auto".
func encodeTools(d *provider.Deployment, p *llm.ChatParams) ([]tool, error) {
	if tc := p.ToolChoice; tc != nil {
		switch tc.Mode {
		case llm.ToolChoiceNone:
			return nil, nil
		case llm.ToolChoiceRequired, llm.ToolChoiceFunction:
			if !d.DropUnsupported {
				return nil, provider.Unsupported(d, "tool_choice")
			}
		}
	}
	tools := make([]tool, 0, len(p.Tools))
	for _, t := range p.Tools {
		params := t.Parameters
		if params == nil {
			params = json.RawMessage(provider.EmptySchema)
		}
		tools = append(tools, tool{Type: "function", Function: functionDef{Name: t.Name, Description: t.Description, Parameters: params}})
	}
	return tools, nil
}

// think maps reasoning_effort (or a thinking budget from the Anthropic
// dialect) onto Ollama's think: a level string for the models that take
// levels — Ollama treats any level as "on" for models that only switch
// thinking on and off — and false for "none".
func think(p *llm.ChatParams) (json.RawMessage, error) {
	effort := p.ReasoningEffort
	if effort == "" && p.ThinkingBudget > 0 {
		effort = llm.EffortForBudget(p.ThinkingBudget)
	}
	switch effort {
	case "":
		return nil, nil
	case "none":
		return json.RawMessage(`false`), nil
	case "minimal", "low":
		return json.RawMessage(`"low"`), nil
	case "medium":
		return json.RawMessage(`"medium"`), nil
	case "high", "xhigh":
		return json.RawMessage(`"high"`), nil
	}
	return nil, llm.BadRequest("reasoning_effort", "invalid_value",
		"Invalid value for 'reasoning_effort': %q; expected one of none, minimal, low, medium or high.", effort)
}

// encodeMessages translates the conversation. Ollama's turns are plain
// strings with images beside them; a tool result names the function it
// answers (tool_name), found from the call with the same id earlier on.
func encodeMessages(d *provider.Deployment, in []llm.Message) ([]message, error) {
	out := make([]message, 0, len(in))
	callNames := map[string]string{}
	for i := range in {
		m := &in[i]
		w := message{Role: m.Role}
		if m.Role == llm.RoleDeveloper {
			w.Role = llm.RoleSystem
		}
		var err error
		if w.Content, w.Images, err = encodeContent(d, m, i); err != nil {
			return nil, err
		}
		switch m.Role {
		case llm.RoleAssistant:
			w.Thinking = m.Reasoning
			if w.Content == "" && m.Refusal != "" {
				w.Content = m.Refusal
			}
			for j, tc := range m.ToolCalls {
				args, err := arguments(tc.Arguments, i, j)
				if err != nil {
					return nil, err
				}
				if tc.ID != "" {
					callNames[tc.ID] = tc.Name
				}
				w.ToolCalls = append(w.ToolCalls, toolCall{ID: tc.ID, Function: callFunction{Name: tc.Name, Arguments: args}})
			}
		case llm.RoleTool:
			w.ToolCallID = m.ToolCallID
			w.ToolName = callNames[m.ToolCallID]
		}
		out = append(out, w)
	}
	return out, nil
}

// encodeContent joins the text parts and collects the images. Ollama takes
// images only as base64, and the adapter does no I/O, so an http(s) image
// URL is refused unless drop_unsupported.
func encodeContent(d *provider.Deployment, m *llm.Message, i int) (string, []string, error) {
	if len(m.Content) == 1 && m.Content[0].Type == llm.PartText {
		return m.Content[0].Text, nil, nil
	}
	var text strings.Builder
	var images []string
	for j, part := range m.Content {
		at := fmt.Sprintf("messages[%d].content[%d]", i, j)
		switch part.Type {
		case llm.PartText:
			if text.Len() > 0 {
				text.WriteByte('\n')
			}
			text.WriteString(part.Text)
		case llm.PartImageURL:
			if m.Role != llm.RoleUser {
				if d.DropUnsupported {
					continue
				}
				return "", nil, llm.BadRequest(at, "invalid_value",
					"Invalid '%s': provider %q (type ollama) takes images only in user messages.", at, d.Provider)
			}
			if _, data, ok := llm.DataURL(part.ImageURL); ok {
				images = append(images, data)
				continue
			}
			if d.DropUnsupported {
				continue
			}
			if strings.HasPrefix(part.ImageURL, "data:") {
				return "", nil, llm.BadRequest(at+".image_url.url", "invalid_value",
					"Invalid '%s.image_url.url': a data: URL must be base64-encoded (data:image/png;base64,…).", at)
			}
			return "", nil, llm.BadRequest(at+".image_url.url", "unsupported_parameter",
				"Invalid '%s.image_url.url': provider %q (type ollama) takes images only inline as base64, and gatehouse does not download images. "+
					"Send a data: URL (data:image/png;base64,…), or set drop_unsupported: true on the provider to drop the image.", at, d.Provider)
		default:
			if d.DropUnsupported {
				continue
			}
			return "", nil, provider.Unsupported(d, at+".type="+part.Type)
		}
	}
	return text.String(), images, nil
}

// arguments turns a call's JSON text into the object Ollama wants. The
// text is the client's: when it is not a JSON object the request is bad.
func arguments(text string, i, j int) (json.RawMessage, error) {
	trimmed := bytes.TrimSpace([]byte(text))
	if len(trimmed) == 0 {
		return json.RawMessage(`{}`), nil
	}
	if llm.KindOf(trimmed) != llm.KindObject || !json.Valid(trimmed) {
		at := fmt.Sprintf("messages[%d].tool_calls[%d].function.arguments", i, j)
		return nil, llm.BadRequest(at, "invalid_value",
			"Invalid '%s': the arguments must be a JSON object encoded as a string.", at)
	}
	return json.RawMessage(trimmed), nil
}
