package llm

import (
	"errors"
	"fmt"
	"strconv"
)

// StreamChunk is what the dialect encoders (Messages, Responses) read of
// an OpenAI-shaped stream chunk: the model and each choice's delta.
type StreamChunk struct {
	Model   string
	Choices []StreamChoice
}

// StreamChoice is one choice of a StreamChunk.
type StreamChoice struct {
	Index        int
	Delta        Delta
	FinishReason *string
	// StopReason is the raw stop_reason some servers (vLLM) add: the
	// stop string or token that ended the reply. It points into the
	// decoded data.
	StopReason []byte
}

// DecodeStreamChunk decodes data into c, reusing c's choices; Model
// keeps its value when the chunk has none or the same (a stream names its
// model in every chunk, and reading it again allocates nothing). It reads
// the same values json.Unmarshal would for the fields StreamChunk has,
// and fails where it would (invalid JSON, a field of the wrong type),
// but it walks the chunk once without reflection: a translated stream
// decodes every chunk, and json.Unmarshal was most of what a Responses
// or Messages stream cost over a chat stream (BENCHMARKS.md). Keys are
// matched exactly, as every server writes them (encoding/json would also
// match them case-insensitively).
func DecodeStreamChunk(data []byte, c *StreamChunk) error {
	c.Choices = c.Choices[:0]
	s := scanner{data: data}
	s.skipSpace()
	if err := s.value(0); err != nil {
		return err
	}
	if err := s.end(); err != nil {
		return err
	}
	switch KindOf(data[skipSpaceAt(data, 0):]) {
	case KindNull:
		return nil
	case KindObject:
	default:
		return errors.New("a chunk must be a JSON object")
	}
	w := Walk(data, '{')
	for k, v, ok := w.Next(); ok; k, v, ok = w.Next() {
		var err error
		switch string(k) {
		case `"model"`:
			err = readString(v, "model", &c.Model)
		case `"choices"`:
			err = c.decodeChoices(v)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (c *StreamChunk) decodeChoices(v []byte) error {
	switch KindOf(v) {
	case KindNull:
		c.Choices = nil
		return nil
	case KindArray:
	default:
		return typeError("choices", "an array", v)
	}
	w := Walk(v, '[')
	for _, e, ok := w.Next(); ok; _, e, ok = w.Next() {
		if KindOf(e) == KindNull {
			c.Choices = append(c.Choices, StreamChoice{})
			continue
		}
		if KindOf(e) != KindObject {
			return typeError("choices[]", "an object", e)
		}
		c.Choices = append(c.Choices, StreamChoice{})
		if err := c.Choices[len(c.Choices)-1].decode(e); err != nil {
			return err
		}
	}
	return nil
}

func (ch *StreamChoice) decode(v []byte) error {
	w := Walk(v, '{')
	for k, f, ok := w.Next(); ok; k, f, ok = w.Next() {
		var err error
		switch string(k) {
		case `"index"`:
			err = readInt(f, "choices[].index", &ch.Index)
		case `"delta"`:
			err = ch.Delta.decode(f)
		case `"finish_reason"`:
			err = readStringPtr(f, "choices[].finish_reason", &ch.FinishReason)
		case `"stop_reason"`:
			ch.StopReason = f
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// decode fills d from a delta object, field by field over what it holds
// (as json.Unmarshal merges a repeated object).
func (d *Delta) decode(v []byte) error {
	switch KindOf(v) {
	case KindNull:
		return nil
	case KindObject:
	default:
		return typeError("delta", "an object", v)
	}
	w := Walk(v, '{')
	for k, f, ok := w.Next(); ok; k, f, ok = w.Next() {
		var err error
		switch string(k) {
		case `"role"`:
			err = readString(f, "delta.role", &d.Role)
		case `"content"`:
			err = readStringPtr(f, "delta.content", &d.Content)
		case `"refusal"`:
			err = readStringPtr(f, "delta.refusal", &d.Refusal)
		case `"reasoning_content"`:
			err = readString(f, "delta.reasoning_content", &d.ReasoningContent)
		case `"reasoning_signature"`:
			err = readString(f, "delta.reasoning_signature", &d.ReasoningSignature)
		case `"tool_calls"`:
			err = d.decodeToolCalls(f)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (d *Delta) decodeToolCalls(v []byte) error {
	switch KindOf(v) {
	case KindNull:
		d.ToolCalls = nil
		return nil
	case KindArray:
	default:
		return typeError("delta.tool_calls", "an array", v)
	}
	d.ToolCalls = d.ToolCalls[:0]
	w := Walk(v, '[')
	for _, e, ok := w.Next(); ok; _, e, ok = w.Next() {
		var tc ToolCallDelta
		switch KindOf(e) {
		case KindNull:
		case KindObject:
			if err := tc.decode(e); err != nil {
				return err
			}
		default:
			return typeError("delta.tool_calls[]", "an object", e)
		}
		d.ToolCalls = append(d.ToolCalls, tc)
	}
	return nil
}

func (tc *ToolCallDelta) decode(v []byte) error {
	w := Walk(v, '{')
	for k, f, ok := w.Next(); ok; k, f, ok = w.Next() {
		var err error
		switch string(k) {
		case `"index"`:
			err = readInt(f, "tool_calls[].index", &tc.Index)
		case `"id"`:
			err = readString(f, "tool_calls[].id", &tc.ID)
		case `"type"`:
			err = readString(f, "tool_calls[].type", &tc.Type)
		case `"function"`:
			switch KindOf(f) {
			case KindNull:
			case KindObject:
				err = tc.Function.decode(f)
			default:
				err = typeError("tool_calls[].function", "an object", f)
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (fn *FunctionCallDelta) decode(v []byte) error {
	w := Walk(v, '{')
	for k, f, ok := w.Next(); ok; k, f, ok = w.Next() {
		var err error
		switch string(k) {
		case `"name"`:
			err = readString(f, "function.name", &fn.Name)
		case `"arguments"`:
			err = readString(f, "function.arguments", &fn.Arguments)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// readString sets *dst from a JSON string; null leaves it as it is.
func readString(v []byte, field string, dst *string) error {
	switch KindOf(v) {
	case KindNull:
		return nil
	case KindString:
	default:
		return typeError(field, "a string", v)
	}
	if len(v) >= 2 && string(v[1:len(v)-1]) == *dst {
		return nil // the same as before (a stream's model, its role): no new string
	}
	s, err := UnquoteString(v)
	if err != nil {
		return fmt.Errorf("%s: %w", field, err)
	}
	*dst = s
	return nil
}

// readStringPtr sets *dst to a JSON string, or to nil for null.
func readStringPtr(v []byte, field string, dst **string) error {
	if KindOf(v) == KindNull {
		*dst = nil
		return nil
	}
	var s string
	if err := readString(v, field, &s); err != nil {
		return err
	}
	*dst = &s
	return nil
}

// readInt sets *dst from a JSON integer; null leaves it as it is.
func readInt(v []byte, field string, dst *int) error {
	switch KindOf(v) {
	case KindNull:
		return nil
	case KindNumber:
	default:
		return typeError(field, "an integer", v)
	}
	n, err := strconv.Atoi(string(v))
	if err != nil {
		return fmt.Errorf("%s: %s is not an integer", field, v)
	}
	*dst = n
	return nil
}

func typeError(field, want string, v []byte) error {
	return fmt.Errorf("%s: want %s, got %s", field, want, KindOf(v))
}
