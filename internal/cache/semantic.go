package cache

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"gatehouse/internal/llm"
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
	var fields []field
	var msgs []byte
	if llm.EachField(body, func(k string, v []byte, _ int) bool {
		if k == "messages" {
			msgs = v
		} else if !ignored[k] {
			fields = append(fields, field{key: k, value: v})
		}
		return true
	}) != nil || llm.KindOf(msgs) != llm.KindArray {
		return SemanticQuery{}, false
	}
	var turns [][]byte
	if llm.EachElement(msgs, func(_ int, v []byte) bool { turns = append(turns, v); return true }) != nil || len(turns) == 0 {
		return SemanticQuery{}, false
	}
	// The last message: its text is the query; its other fields (the
	// role, a name) stay in the scope.
	var rest []field
	var role string
	var content []byte
	if llm.EachField(turns[len(turns)-1], func(k string, v []byte, _ int) bool {
		switch k {
		case "content":
			content = v
			return true
		case "role":
			role, _ = llm.UnquoteString(v)
		}
		rest = append(rest, field{key: k, value: v})
		return true
	}) != nil || role != "user" {
		return SemanticQuery{}, false
	}
	text, ok := contentText(content)
	if !ok || strings.TrimSpace(text) == "" {
		return SemanticQuery{}, false
	}
	// The scope is the canonical request (as NewKey writes it) with the
	// last message's content left out.
	b := make([]byte, 0, 512)
	for _, s := range [...]string{"gatehouse-semantic-v1", project, model, keyID} {
		b = appendString(b, s)
	}
	canon := append(make([]byte, 0, len(msgs)), '[')
	var err error
	for _, t := range turns[:len(turns)-1] {
		if canon, err = appendCanonical(canon, t); err != nil {
			return SemanticQuery{}, false
		}
	}
	if canon, err = appendObject(canon, rest); err != nil {
		return SemanticQuery{}, false
	}
	fields = append(fields, field{key: "messages", canon: append(canon, ']')})
	if b, err = appendObject(b, fields); err != nil {
		return SemanticQuery{}, false
	}
	sum := sha256.Sum256(b)
	return SemanticQuery{Scope: hex.EncodeToString(sum[:]), Text: text}, true
}

// contentText is a message content's text: a string, or an array of
// text parts joined by newlines; false when a part is not text.
func contentText(raw []byte) (string, bool) {
	switch llm.KindOf(raw) {
	case llm.KindString:
		s, err := llm.UnquoteString(raw)
		return s, err == nil
	case llm.KindArray:
		var b strings.Builder
		ok := true
		err := llm.EachElement(raw, func(i int, part []byte) bool {
			var typ, text []byte
			if llm.EachField(part, func(k string, v []byte, _ int) bool {
				switch k {
				case "type":
					typ = v
				case "text":
					text = v
				}
				return true
			}) != nil || string(typ) != `"text"` || llm.KindOf(text) != llm.KindString {
				ok = false
				return false
			}
			s, err := llm.UnquoteString(text)
			if err != nil {
				ok = false
				return false
			}
			if i > 0 {
				b.WriteByte('\n')
			}
			b.WriteString(s)
			return true
		})
		return b.String(), ok && err == nil
	}
	return "", false
}
