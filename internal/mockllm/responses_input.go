package mockllm

import (
	"encoding/json"
	"slices"
	"strings"
	"unicode/utf8"
)

// respItem is one element of input, read leniently: its type decides
// which of the fields must be there.
type respItem struct {
	Type      *string         `json:"type"`
	Role      *string         `json:"role"`
	Content   json.RawMessage `json:"content"`
	CallID    *string         `json:"call_id"`
	Name      *string         `json:"name"`
	Arguments *string         `json:"arguments"`
	Output    json.RawMessage `json:"output"`
	ID        *string         `json:"id"`
	Summary   json.RawMessage `json:"summary"`
}

// respPart is one content part of a message or a tool output.
type respPart struct {
	Type     string  `json:"type"`
	Text     string  `json:"text"`
	ImageURL *string `json:"image_url"`
	FileID   *string `json:"file_id"`
	Detail   *string `json:"detail"`
}

var (
	respItemTypes      = []string{"message", "function_call", "function_call_output", "reasoning"}
	respRoles          = []string{"user", "assistant", "system", "developer"}
	respInputParts     = []string{"input_text", "input_image", "input_file"}
	respAssistantParts = []string{"output_text", "refusal"}
	respImageDetails   = []string{"low", "high", "auto"}
)

// readInput validates input and takes from it what the reply needs: the
// prompt's size, the last user text (where directives live) and whether
// the conversation ends with a tool's output.
func (x *respExchange) readInput() *apiError {
	x.inputTokens = 0
	if x.req.Instructions != nil {
		x.inputTokens += textTokens(*x.req.Instructions)
	}
	raw := x.req.Input
	switch firstByte(raw) {
	case 0, 'n':
	case '"':
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return errMalformedJSON
		}
		x.lastUser = s
		x.inputTokens += textTokens(s)
	case '[':
		var items []json.RawMessage
		if json.Unmarshal(raw, &items) != nil {
			return errMalformedJSON
		}
		calls := map[string]bool{}
		for i, it := range items {
			if err := x.readItem(it, i, calls); err != nil {
				return err
			}
		}
	default:
		return invalidRequest("input", "invalid_type",
			"Invalid type for 'input': expected one of a string or array of input items, but got %s instead.", jsonKind(raw[0]))
	}
	x.inputTokens = max(x.inputTokens, 1)
	return nil
}

// readItem validates input[i]. calls holds the call_ids of the
// function_call items seen so far, which a function_call_output must
// answer.
func (x *respExchange) readItem(raw json.RawMessage, i int, calls map[string]bool) *apiError {
	param := "input[" + itoa(i) + "]"
	if firstByte(raw) != '{' {
		return invalidRequest(param, "invalid_type",
			"Invalid type for '%s': expected an object, but got %s instead.", param, jsonKind(firstByte(raw)))
	}
	var it respItem
	if err := json.Unmarshal(raw, &it); err != nil {
		return prefixed(typeError(err), param)
	}
	typ := "message" // an item with a role and no type is an EasyInputMessage
	if it.Type != nil {
		typ = *it.Type
	} else if it.Role == nil {
		return missingParam(param + ".role")
	}
	x.endsInToolOutput = typ == "function_call_output"
	switch typ {
	case "message":
		return x.readMessage(&it, param)
	case "function_call":
		for _, f := range []struct {
			name string
			v    *string
		}{{"call_id", it.CallID}, {"name", it.Name}, {"arguments", it.Arguments}} {
			if f.v == nil {
				return missingParam(param + "." + f.name)
			}
		}
		calls[*it.CallID] = true
		x.inputTokens += textTokens(*it.Name + *it.Arguments)
	case "function_call_output":
		if it.CallID == nil {
			return missingParam(param + ".call_id")
		}
		if it.Output == nil {
			return missingParam(param + ".output")
		}
		if !calls[*it.CallID] {
			return invalidRequest("input", "", "No tool call found for function call output with call_id %s.", *it.CallID)
		}
		text, err := partsText(it.Output, param+".output", respInputParts)
		if err != nil {
			return err
		}
		x.inputTokens += textTokens(text)
	case "reasoning":
		if it.Summary == nil {
			return missingParam(param + ".summary")
		}
	default:
		return invalidRequest(param+".type", "invalid_value",
			"Invalid value: '%s'. Supported values are: %s.", typ, quotedList(respItemTypes))
	}
	return nil
}

func (x *respExchange) readMessage(it *respItem, param string) *apiError {
	if it.Role == nil {
		return missingParam(param + ".role")
	}
	role := *it.Role
	if !slices.Contains(respRoles, role) {
		return invalidRequest(param+".role", "invalid_value",
			"Invalid value: '%s'. Supported values are: 'assistant', 'system', 'developer', and 'user'.", role)
	}
	if it.Content == nil {
		return missingParam(param + ".content")
	}
	allowed := respInputParts
	if role == "assistant" {
		allowed = respAssistantParts
	}
	text, err := partsText(it.Content, param+".content", allowed)
	if err != nil {
		return err
	}
	x.inputTokens += textTokens(text)
	if role == "user" {
		x.lastUser = text
	}
	return nil
}

// partsText is the text of content given as a string or as parts of the
// allowed types; images and files count for nothing.
func partsText(raw json.RawMessage, param string, allowed []string) (string, *apiError) {
	switch firstByte(raw) {
	case '"':
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return "", errMalformedJSON
		}
		return s, nil
	case '[':
	default:
		return "", invalidRequest(param, "invalid_type",
			"Invalid type for '%s': expected one of a string or array of objects, but got %s instead.", param, jsonKind(firstByte(raw)))
	}
	var parts []json.RawMessage
	if json.Unmarshal(raw, &parts) != nil {
		return "", errMalformedJSON
	}
	var b strings.Builder
	for j, pr := range parts {
		pp := param + "[" + itoa(j) + "]"
		var p respPart
		if firstByte(pr) != '{' {
			return "", invalidRequest(pp, "invalid_type",
				"Invalid type for '%s': expected an object, but got %s instead.", pp, jsonKind(firstByte(pr)))
		}
		if err := json.Unmarshal(pr, &p); err != nil {
			return "", prefixed(typeError(err), pp)
		}
		if !slices.Contains(allowed, p.Type) {
			return "", invalidRequest(pp+".type", "invalid_value",
				"Invalid value: '%s'. Supported values are: %s.", p.Type, quotedList(allowed))
		}
		switch p.Type {
		case "input_text", "output_text":
			b.WriteString(p.Text)
		case "input_image":
			if p.ImageURL == nil && p.FileID == nil {
				return "", invalidRequest(pp, "missing_required_parameter",
					"Missing required parameter: '%s.image_url' or '%s.file_id'.", pp, pp)
			}
			if p.Detail != nil && !slices.Contains(respImageDetails, *p.Detail) {
				return "", invalidRequest(pp+".detail", "invalid_value",
					"Invalid value: '%s'. Supported values are: %s.", *p.Detail, quotedList(respImageDetails))
			}
		}
	}
	return b.String(), nil
}

// textTokens is the emulator's prompt size of one piece of input: about
// four characters a token plus a few for the item's framing, as the chat
// emulator counts a message.
func textTokens(s string) int {
	return (utf8.RuneCountInString(s)+3)/4 + 3
}
