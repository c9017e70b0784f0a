package responses

import (
	"encoding/json"
	"strconv"

	"gatehouse/internal/llm"
)

// item is one input item of the Responses API. The types the gateway can
// put in a chat conversation are modelled; the rest are refused by name.
type item struct {
	Type string `json:"type"`
	// message
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
	// function_call and function_call_output
	CallID    string          `json:"call_id"`
	Name      string          `json:"name"`
	Arguments *string         `json:"arguments"`
	Output    json.RawMessage `json:"output"`
	// reasoning
	Summary          []textPart `json:"summary"`
	EncryptedContent *string    `json:"encrypted_content"`
}

// textPart is a content part as the gateway reads it: text of any kind
// (input_text, output_text, summary_text, reasoning_text, refusal) or an
// image or a file.
type textPart struct {
	Type     string  `json:"type"`
	Text     string  `json:"text"`
	Refusal  string  `json:"refusal"`
	ImageURL *string `json:"image_url"`
	FileID   *string `json:"file_id"`
	Detail   string  `json:"detail"`
	FileData *string `json:"file_data"`
	Filename string  `json:"filename"`
	FileURL  *string `json:"file_url"`
}

// input checks the input parameter and keeps it as an item array.
func (r *Request) input(v []byte) *llm.Error {
	switch llm.KindOf(v) {
	case llm.KindNull:
		r.Input, r.items = nil, nil
		return nil
	case llm.KindString:
		b := append([]byte(`[{"type":"message","role":"user","content":`), v...)
		r.Input = append(b, "}]"...)
		r.items = []item{{Type: "message", Role: llm.RoleUser, Content: json.RawMessage(v)}}
		return nil
	case llm.KindArray:
		items, err := decodeItems(v)
		if err != nil {
			return err
		}
		r.Input, r.items = compact(v), items
		return nil
	}
	return invalid("input", "invalid_type", "Invalid type for 'input': expected a string or an array of input items.")
}

// decodeItems decodes and checks an item array; errors name the item
// (input[2].content[0].type).
func decodeItems(v []byte) ([]item, *llm.Error) {
	var raw []json.RawMessage
	if err := json.Unmarshal(v, &raw); err != nil {
		return nil, typeError("input", err)
	}
	items := make([]item, len(raw))
	for i, rv := range raw {
		at := "input[" + strconv.Itoa(i) + "]"
		if llm.KindOf(rv) != llm.KindObject {
			return nil, invalid(at, "invalid_type", "Invalid type for '%s': expected an object.", at)
		}
		it := &items[i]
		if err := json.Unmarshal(rv, it); err != nil {
			return nil, typeError(at, err)
		}
		if it.Type == "" && it.Role != "" {
			it.Type = "message" // an EasyInputMessage: {role, content}
		}
		if err := it.check(at); err != nil {
			return nil, err
		}
	}
	return items, nil
}

func (it *item) check(at string) *llm.Error {
	switch it.Type {
	case "message":
		switch it.Role {
		case llm.RoleUser, llm.RoleSystem, llm.RoleDeveloper, llm.RoleAssistant:
		case "":
			return invalid(at+".role", "missing_required_parameter", "Missing required parameter: '%s.role'.", at)
		default:
			return invalid(at+".role", "invalid_value", "Invalid value: '%s'. Supported values are: 'user', 'assistant', 'system', and 'developer'.", it.Role)
		}
		_, err := it.parts(at + ".content")
		return err
	case "function_call":
		if it.CallID == "" {
			return invalid(at+".call_id", "missing_required_parameter", "Missing required parameter: '%s.call_id'.", at)
		}
		if it.Name == "" {
			return invalid(at+".name", "missing_required_parameter", "Missing required parameter: '%s.name'.", at)
		}
		if it.Arguments == nil {
			return invalid(at+".arguments", "missing_required_parameter", "Missing required parameter: '%s.arguments'.", at)
		}
	case "function_call_output":
		if it.CallID == "" {
			return invalid(at+".call_id", "missing_required_parameter", "Missing required parameter: '%s.call_id'.", at)
		}
		switch llm.KindOf(it.Output) {
		case llm.KindString:
		case llm.KindArray:
			_, err := partsOf(it.Output, at+".output")
			return err
		default:
			return invalid(at+".output", "invalid_type", "Invalid type for '%s.output': expected a string or an array of content parts.", at)
		}
	case "reasoning":
		_, err := partsOf(orNull(it.Content), at+".content")
		return err
	case "":
		return invalid(at+".type", "missing_required_parameter", "Missing required parameter: '%s.type'.", at)
	case "item_reference":
		return invalid(at+".type", "unsupported_parameter", "Unsupported value for '%s.type': item references need items stored at OpenAI; send the item itself, or continue a stored response with previous_response_id.", at)
	default:
		return invalid(at+".type", "unsupported_parameter", "Unsupported value for '%s.type': %q items belong to OpenAI's built-in tools, which gatehouse does not serve.", at, it.Type)
	}
	return nil
}

func orNull(v json.RawMessage) json.RawMessage {
	if len(v) == 0 {
		return json.RawMessage("null")
	}
	return v
}

// parts decodes a message's content: a string or an array of parts.
func (it *item) parts(at string) ([]llm.Part, *llm.Error) {
	switch llm.KindOf(it.Content) {
	case llm.KindString:
		var s string
		_ = json.Unmarshal(it.Content, &s)
		return []llm.Part{{Type: llm.PartText, Text: s}}, nil
	case llm.KindArray:
		return partsOf(it.Content, at)
	}
	return nil, invalid(at, "invalid_type", "Invalid type for '%s': expected a string or an array of content parts.", at)
}

// partsOf decodes an array of content parts (null: none).
func partsOf(v json.RawMessage, at string) ([]llm.Part, *llm.Error) {
	if llm.KindOf(v) == llm.KindNull {
		return nil, nil
	}
	var ps []textPart
	if err := json.Unmarshal(v, &ps); err != nil {
		return nil, typeError(at, err)
	}
	out := make([]llm.Part, 0, len(ps))
	for i, p := range ps {
		pat := at + "[" + strconv.Itoa(i) + "]"
		switch p.Type {
		case "input_text", "output_text", "summary_text", "reasoning_text", "text":
			out = append(out, llm.Part{Type: llm.PartText, Text: p.Text})
		case "refusal":
			out = append(out, llm.Part{Type: "refusal", Text: p.Refusal})
		case "input_image":
			switch {
			case p.ImageURL != nil && *p.ImageURL != "":
				out = append(out, llm.Part{Type: llm.PartImageURL, ImageURL: *p.ImageURL, ImageDetail: p.Detail})
			case p.FileID != nil:
				return nil, invalid(pat+".file_id", "unsupported_parameter", "Unsupported parameter: '%s.file_id': files uploaded to OpenAI cannot be sent to other backends; send the image as image_url (a data: URL or an https URL).", pat)
			default:
				return nil, invalid(pat+".image_url", "missing_required_parameter", "Missing required parameter: '%s.image_url'.", pat)
			}
		case "input_file":
			if p.FileData == nil {
				return nil, invalid(pat+".file_data", "unsupported_parameter", "Unsupported parameter: '%s': only files given inline as file_data can be sent to other backends.", pat)
			}
			raw, _ := json.Marshal(map[string]any{"type": "file", "file": map[string]string{"file_data": *p.FileData, "filename": p.Filename}})
			out = append(out, llm.Part{Type: llm.PartFile, Raw: raw})
		case "":
			return nil, invalid(pat+".type", "missing_required_parameter", "Missing required parameter: '%s.type'.", pat)
		default:
			return nil, invalid(pat+".type", "invalid_value", "Invalid value: '%s'. Supported values are: 'input_text', 'input_image', 'input_file', 'output_text' and 'refusal'.", p.Type)
		}
	}
	return out, nil
}

// Chat builds the chat request for this request, continuing the
// conversation in prior (the stored items of the previous response,
// nil when there is none). The instructions lead as a system message;
// those of a previous response are not carried over, as OpenAI does.
func (r *Request) Chat(prior []byte) (*llm.ChatRequest, error) {
	p := r.params
	p.Messages = nil
	if r.instructions != nil && *r.instructions != "" {
		p.Messages = append(p.Messages, llm.Message{Role: llm.RoleSystem, Content: []llm.Part{{Type: llm.PartText, Text: *r.instructions}}})
	}
	if len(prior) > 0 {
		items, err := decodeItems(prior)
		if err != nil {
			return nil, err
		}
		if p.Messages, err = appendMessages(p.Messages, items); err != nil {
			return nil, err
		}
	}
	var err *llm.Error
	if p.Messages, err = appendMessages(p.Messages, r.items); err != nil {
		return nil, err
	}
	if err := checkCalls(p.Messages); err != nil {
		return nil, err
	}
	if len(p.Messages) == 0 {
		return nil, invalid("input", "empty_array", "Invalid 'input': the conversation has no items.")
	}
	return llm.NewChatRequest(&p)
}

// appendMessages turns items into chat turns. The Responses API spreads
// one assistant turn over several items (its reasoning, its message, each
// function call); chat completions has them in one message, so
// consecutive assistant items are merged into the turn they belong to.
func appendMessages(ms []llm.Message, items []item) ([]llm.Message, *llm.Error) {
	// turn is the assistant message being assembled, an index into ms (-1: none).
	turn := -1
	assistant := func(fresh bool) *llm.Message {
		if turn < 0 || fresh {
			ms = append(ms, llm.Message{Role: llm.RoleAssistant})
			turn = len(ms) - 1
		}
		return &ms[turn]
	}
	for i := range items {
		it := &items[i]
		switch it.Type {
		case "message":
			parts, err := it.parts("")
			if err != nil {
				return nil, err
			}
			if it.Role != llm.RoleAssistant {
				turn = -1
				ms = append(ms, llm.Message{Role: it.Role, Content: textParts(parts)})
				continue
			}
			// A message after calls starts the next turn.
			m := assistant(turn >= 0 && len(ms[turn].ToolCalls) > 0)
			for _, p := range parts {
				if p.Type == "refusal" {
					m.Refusal += p.Text
					continue
				}
				m.Content = append(m.Content, p)
			}
		case "function_call":
			m := assistant(false)
			m.ToolCalls = append(m.ToolCalls, llm.ToolCall{ID: it.CallID, Name: it.Name, Arguments: *it.Arguments})
		case "reasoning":
			// Reasoning opens its turn: after a message or calls it is the next one.
			m := assistant(turn >= 0 && (len(ms[turn].Content) > 0 || len(ms[turn].ToolCalls) > 0 || ms[turn].Reasoning != ""))
			content, _ := partsOf(orNull(it.Content), "")
			text := joinText(content)
			if text == "" {
				text = joinSummary(it.Summary)
			}
			m.Reasoning = text
			if it.EncryptedContent != nil {
				m.ReasoningSignature = *it.EncryptedContent
			}
		case "function_call_output":
			turn = -1
			var parts []llm.Part
			if llm.KindOf(it.Output) == llm.KindString {
				var s string
				_ = json.Unmarshal(it.Output, &s)
				parts = []llm.Part{{Type: llm.PartText, Text: s}}
			} else {
				parts, _ = partsOf(it.Output, "")
			}
			ms = append(ms, llm.Message{Role: llm.RoleTool, ToolCallID: it.CallID, Content: textParts(parts)})
		}
	}
	return ms, nil
}

// textParts drops refusal parts from a non-assistant turn: only
// assistants refuse, and no backend takes a refusal from anyone else.
func textParts(ps []llm.Part) []llm.Part {
	out := ps[:0:0]
	for _, p := range ps {
		if p.Type != "refusal" {
			out = append(out, p)
		}
	}
	return out
}

func joinText(ps []llm.Part) string {
	var s string
	for _, p := range ps {
		if p.Type == llm.PartText {
			s += p.Text
		}
	}
	return s
}

func joinSummary(ps []textPart) string {
	var s string
	for i, p := range ps {
		if i > 0 {
			s += "\n\n"
		}
		s += p.Text
	}
	return s
}

// checkCalls refuses a function call output that answers no call made
// before it, as OpenAI does: every other backend would refuse it too,
// with a message further from the client's mistake.
func checkCalls(ms []llm.Message) *llm.Error {
	called := map[string]bool{}
	for _, m := range ms {
		for _, tc := range m.ToolCalls {
			called[tc.ID] = true
		}
		if m.Role == llm.RoleTool && !called[m.ToolCallID] {
			return invalid("input", "invalid_value", "No tool call found for function call output with call_id %s.", m.ToolCallID)
		}
	}
	return nil
}
