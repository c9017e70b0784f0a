package cache

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
)

// SemanticQuery is what the semantic cache looks a request up by: the
// text of its last user message, to embed, within a scope that holds
// everything else that could change the answer — the project, the
// resolved model, the system prompt and earlier turns, every other
// request field, and the key when the cache is per key. Two
// conversations that differ before their last question never share a
// scope, so their answers are never mixed up because the questions
// match.
type SemanticQuery struct {
	Scope string // hex SHA-256
	Text  string
}

// NewSemanticQuery builds the query of an OpenAI-shaped chat request
// body; false when the request cannot be served semantically: its last
// message is not the user's, or holds more than text (an image, a file).
// keyID is "" unless the cache is scoped per key.
func NewSemanticQuery(project, model, keyID string, body []byte) (SemanticQuery, bool) {
	d := json.NewDecoder(bytes.NewReader(body))
	d.UseNumber()
	var obj map[string]any
	if d.Decode(&obj) != nil {
		return SemanticQuery{}, false
	}
	msgs, _ := obj["messages"].([]any)
	if len(msgs) == 0 {
		return SemanticQuery{}, false
	}
	last, _ := msgs[len(msgs)-1].(map[string]any)
	if last == nil || last["role"] != "user" {
		return SemanticQuery{}, false
	}
	text, ok := contentText(last["content"])
	if !ok || strings.TrimSpace(text) == "" {
		return SemanticQuery{}, false
	}
	for k := range obj {
		if ignored[k] {
			delete(obj, k)
		}
	}
	// The scope: everything but the last message's content. The last
	// message's other fields (a name) stay in it.
	lastRest := make(map[string]any, len(last))
	for k, v := range last {
		if k != "content" {
			lastRest[k] = v
		}
	}
	obj["messages"] = append(msgs[:len(msgs)-1:len(msgs)-1], lastRest)
	h := sha256.New()
	writeString(h, "gatehouse-semantic-v1")
	writeString(h, project)
	writeString(h, model)
	writeString(h, keyID)
	writeCanonical(h, obj)
	return SemanticQuery{Scope: hex.EncodeToString(h.Sum(nil)), Text: text}, true
}

// contentText is a message content's text: a string, or an array of
// text parts joined by newlines; false when a part is not text.
func contentText(c any) (string, bool) {
	switch c := c.(type) {
	case string:
		return c, true
	case []any:
		var b strings.Builder
		for i, p := range c {
			part, _ := p.(map[string]any)
			if part == nil || part["type"] != "text" {
				return "", false
			}
			s, ok := part["text"].(string)
			if !ok {
				return "", false
			}
			if i > 0 {
				b.WriteByte('\n')
			}
			b.WriteString(s)
		}
		return b.String(), true
	}
	return "", false
}
