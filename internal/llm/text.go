package llm

import "encoding/json"

// The text an answer was made of — content, reasoning, refusals, tool
// names and arguments — for counting the completion tokens of an answer
// the upstream reported no usage for. It decodes the whole body, so it
// runs only in that rare case, never on the request path.

// CompletionText returns the text of a chat.completion body; "" when it
// does not decode.
func CompletionText(body []byte) string {
	var c ChatCompletion
	if json.Unmarshal(body, &c) != nil {
		return ""
	}
	var b []byte
	for i := range c.Choices {
		m := &c.Choices[i].Message
		if m.Content != nil {
			b = append(b, *m.Content...)
		}
		b = append(b, m.ReasoningContent...)
		if m.Refusal != nil {
			b = append(b, *m.Refusal...)
		}
		for _, tc := range m.ToolCalls {
			b = append(b, tc.Function.Name...)
			b = append(b, tc.Function.Arguments...)
		}
	}
	return string(b)
}
