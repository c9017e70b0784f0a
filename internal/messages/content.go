package messages

import (
	"bytes"
	"encoding/json"
	"strings"

	"gatehouse/internal/llm"
)

// wireBlock is any content block a request may carry; Type says which
// fields matter.
type wireBlock struct {
	Type         string          `json:"type"`
	Text         string          `json:"text"`
	Source       *wireSource     `json:"source"`
	ID           string          `json:"id"`
	Name         string          `json:"name"`
	Input        json.RawMessage `json:"input"`
	ToolUseID    string          `json:"tool_use_id"`
	Content      json.RawMessage `json:"content"`
	IsError      bool            `json:"is_error"`
	Thinking     string          `json:"thinking"`
	Signature    string          `json:"signature"`
	Data         string          `json:"data"`
	CacheControl json.RawMessage `json:"cache_control"`
}

type wireSource struct {
	Type      string `json:"type"`
	MediaType string `json:"media_type"`
	Data      string `json:"data"`
	URL       string `json:"url"`
}

type wireMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// messages translates the conversation. Anthropic puts tool results
// inside user turns; OpenAI wants each as a "tool" message right after
// the assistant turn that called it, so a user turn may become several
// messages: its tool results first, then what the user wrote.
func (d *decoder) messages(v []byte) *llm.Error {
	if llm.KindOf(v) != llm.KindArray {
		return invalid("messages", "invalid_type", "messages: Input should be a valid list")
	}
	var ms []json.RawMessage
	if err := json.Unmarshal(v, &ms); err != nil {
		return typeError("messages", err)
	}
	if len(ms) == 0 {
		return invalid("messages", "invalid_value", "messages: at least one message is required")
	}
	for i, raw := range ms {
		var m wireMessage
		if llm.KindOf(raw) != llm.KindObject {
			return invalid(path("messages", i), "invalid_type", "messages.%d: Input should be a valid object", i)
		}
		if err := json.Unmarshal(raw, &m); err != nil {
			return typeError(path("messages", i), err)
		}
		blocks, err := contentBlocks(m.Content, path("messages", i, "content"))
		if err != nil {
			return err
		}
		switch m.Role {
		case "user":
			err = d.userTurn(blocks, i)
		case "assistant":
			err = d.assistantTurn(blocks, i)
		case "":
			return required(path("messages", i, "role"))
		default:
			return invalid(path("messages", i, "role"), "invalid_value", "messages.%d.role: Input should be 'user' or 'assistant'", i)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// contentBlocks reads a content value: a string is one text block.
func contentBlocks(raw json.RawMessage, at string) ([]wireBlock, *llm.Error) {
	switch llm.KindOf(raw) {
	case llm.KindString:
		var s string
		_ = json.Unmarshal(raw, &s)
		return []wireBlock{{Type: "text", Text: s}}, nil
	case llm.KindArray:
		var raws []json.RawMessage
		_ = json.Unmarshal(raw, &raws)
		out := make([]wireBlock, len(raws))
		for j, r := range raws {
			if llm.KindOf(r) != llm.KindObject {
				return nil, invalid(path(at, j), "invalid_type", "%s.%d: Input should be a valid content block object", at, j)
			}
			if err := json.Unmarshal(r, &out[j]); err != nil {
				return nil, typeError(path(at, j), err)
			}
		}
		return out, nil
	case llm.KindNull, llm.KindInvalid:
		return nil, required(at)
	}
	return nil, invalid(at, "invalid_type", "%s: Input should be a valid string or a list of content blocks", at)
}

func (d *decoder) userTurn(blocks []wireBlock, i int) *llm.Error {
	var parts []llm.Part
	for j, b := range blocks {
		at := path("messages", i, "content", j)
		switch b.Type {
		case "text":
			parts = append(parts, llm.Part{Type: llm.PartText, Text: b.Text, CacheControl: llm.NonNull(b.CacheControl)})
		case "image":
			p, err := imagePart(b, at)
			if err != nil {
				return err
			}
			parts = append(parts, p)
		case "tool_result":
			tool, images, err := toolResult(b, at)
			if err != nil {
				return err
			}
			d.p.Messages = append(d.p.Messages, tool)
			// Tool messages carry text only on most backends, so images a
			// tool returned (screenshots) follow as user content.
			parts = append(parts, images...)
		default:
			return unsupportedBlock(b.Type, at, "user")
		}
	}
	if len(parts) > 0 {
		d.p.Messages = append(d.p.Messages, llm.Message{Role: llm.RoleUser, Content: parts})
	}
	return nil
}

func (d *decoder) assistantTurn(blocks []wireBlock, i int) *llm.Error {
	m := llm.Message{Role: llm.RoleAssistant}
	var reasoning strings.Builder
	for j, b := range blocks {
		at := path("messages", i, "content", j)
		switch b.Type {
		case "text":
			m.Content = append(m.Content, llm.Part{Type: llm.PartText, Text: b.Text, CacheControl: llm.NonNull(b.CacheControl)})
		case "tool_use":
			if b.ID == "" {
				return required(at + ".id")
			}
			if b.Name == "" {
				return required(at + ".name")
			}
			args := "{}"
			if len(b.Input) > 0 && llm.KindOf(b.Input) != llm.KindNull {
				if llm.KindOf(b.Input) != llm.KindObject {
					return invalid(at+".input", "invalid_type", "%s.input: Input should be a valid object", at)
				}
				var c bytes.Buffer
				if err := json.Compact(&c, b.Input); err != nil {
					return typeError(at+".input", err)
				}
				args = c.String()
			}
			m.ToolCalls = append(m.ToolCalls, llm.ToolCall{ID: b.ID, Name: b.Name, Arguments: args})
		case "thinking":
			reasoning.WriteString(b.Thinking)
			if b.Signature != "" {
				m.ReasoningSignature = b.Signature
			}
		case "redacted_thinking":
			// Encrypted reasoning only Anthropic can read: it travels as
			// the signature, with no visible text.
			m.ReasoningSignature = b.Data
		default:
			return unsupportedBlock(b.Type, at, "assistant")
		}
	}
	m.Reasoning = reasoning.String()
	d.p.Messages = append(d.p.Messages, m)
	return nil
}

func unsupportedBlock(typ, at, role string) *llm.Error {
	switch typ {
	case "":
		return required(at + ".type")
	case "document", "search_result", "container_upload":
		return invalid(at+".type", "unsupported_content", "%s.type: %q blocks are not supported by gatehouse; send the document's text as a text block", at, typ)
	case "server_tool_use", "web_search_tool_result", "web_fetch_tool_result", "code_execution_tool_result",
		"bash_code_execution_tool_result", "text_editor_code_execution_tool_result", "mcp_tool_use", "mcp_tool_result", "tool_search_tool_result":
		return invalid(at+".type", "unsupported_content", "%s.type: %q blocks belong to Anthropic server tools, which gatehouse does not support", at, typ)
	case "text", "image", "tool_use", "tool_result", "thinking", "redacted_thinking":
		return invalid(at+".type", "invalid_value", "%s.type: %q blocks are not allowed in %s turns", at, typ, role)
	}
	return invalid(at+".type", "invalid_value", "%s.type: unknown content block type %q", at, typ)
}

// imagePart turns an image block into an image_url part: base64 sources
// become data: URLs, url sources pass as they are.
func imagePart(b wireBlock, at string) (llm.Part, *llm.Error) {
	s := b.Source
	if s == nil {
		return llm.Part{}, required(at + ".source")
	}
	p := llm.Part{Type: llm.PartImageURL, CacheControl: llm.NonNull(b.CacheControl)}
	switch s.Type {
	case "base64":
		switch s.MediaType {
		case "image/jpeg", "image/png", "image/gif", "image/webp":
		case "":
			return p, required(at + ".source.media_type")
		default:
			return p, invalid(at+".source.media_type", "invalid_value", "%s.source.media_type: Input should be 'image/jpeg', 'image/png', 'image/gif' or 'image/webp'", at)
		}
		if s.Data == "" {
			return p, required(at + ".source.data")
		}
		p.ImageURL = "data:" + s.MediaType + ";base64," + s.Data
	case "url":
		if !strings.HasPrefix(s.URL, "https://") && !strings.HasPrefix(s.URL, "http://") {
			return p, invalid(at+".source.url", "invalid_value", "%s.source.url: an http or https URL is required", at)
		}
		p.ImageURL = s.URL
	case "file":
		return p, invalid(at+".source.type", "unsupported_content", "%s.source.type: Files API references are not supported by gatehouse; send the image as base64 or a URL", at)
	default:
		return p, invalid(at+".source.type", "invalid_value", "%s.source.type: Input should be 'base64' or 'url'", at)
	}
	return p, nil
}

// toolResult turns a tool_result block into a tool message and the
// images it carried. OpenAI has no is_error flag, so an error result is
// marked in its text where every model can read it.
func toolResult(b wireBlock, at string) (llm.Message, []llm.Part, *llm.Error) {
	m := llm.Message{Role: llm.RoleTool, ToolCallID: b.ToolUseID}
	if b.ToolUseID == "" {
		return m, nil, required(at + ".tool_use_id")
	}
	var images []llm.Part
	switch llm.KindOf(b.Content) {
	case llm.KindInvalid, llm.KindNull:
	case llm.KindString:
		var s string
		_ = json.Unmarshal(b.Content, &s)
		m.Content = []llm.Part{{Type: llm.PartText, Text: s}}
	case llm.KindArray:
		inner, err := contentBlocks(b.Content, at+".content")
		if err != nil {
			return m, nil, err
		}
		for k, ib := range inner {
			iat := path(at, "content", k)
			switch ib.Type {
			case "text":
				m.Content = append(m.Content, llm.Part{Type: llm.PartText, Text: ib.Text, CacheControl: llm.NonNull(ib.CacheControl)})
			case "image":
				p, err := imagePart(ib, iat)
				if err != nil {
					return m, nil, err
				}
				images = append(images, p)
			default:
				return m, nil, unsupportedBlock(ib.Type, iat, "tool_result")
			}
		}
	default:
		return m, nil, invalid(at+".content", "invalid_type", "%s.content: Input should be a valid string or a list of content blocks", at)
	}
	if len(m.Content) == 0 {
		m.Content = []llm.Part{{Type: llm.PartText, Text: ""}}
	}
	if b.IsError {
		m.Content[0].Text = "Error: " + m.Content[0].Text
	}
	return m, images, nil
}
