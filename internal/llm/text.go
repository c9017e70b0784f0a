package llm

import (
	"bytes"
	"encoding/json"
)

// The text an answer was made of — content, reasoning, refusals, tool
// names and arguments — for counting the completion tokens of an answer
// the upstream reported no usage for. These decode whole chunks, so they
// run only in that rare case, never per chunk on the request path.

// ChunksText appends the text of newline-separated chat.completion.chunk
// JSON objects to dst. Lines that do not
// decode are skipped.
func ChunksText(dst []byte, chunks []byte) []byte {
	for line := range bytes.SplitSeq(chunks, []byte{'\n'}) {
		if len(line) == 0 {
			continue
		}
		var c ChatChunk
		if json.Unmarshal(line, &c) != nil {
			continue
		}
		for i := range c.Choices {
			d := &c.Choices[i].Delta
			if d.Content != nil {
				dst = append(dst, *d.Content...)
			}
			if d.Refusal != nil {
				dst = append(dst, *d.Refusal...)
			}
			dst = append(dst, d.ReasoningContent...)
			for _, tc := range d.ToolCalls {
				dst = append(dst, tc.Function.Name...)
				dst = append(dst, tc.Function.Arguments...)
			}
		}
	}
	return dst
}

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
