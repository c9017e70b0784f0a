package mockllm

import (
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"

	"gatehouse/internal/llm"
)

// parseCommonChat reads the requests benchmarks and most clients send —
// a model, messages whose contents are plain strings, and at most stream,
// a token limit and parameters the emulator ignores — with llm's scanner
// instead of encoding/json. Under benchmark load the decoder was a third
// of the emulator's CPU, and the emulator shares a core with the load
// generator, Redis and PostgreSQL: what it spends there is taken from the
// gateway's measured throughput.
//
// ok false means "not a common request", never "a bad one": the request
// then goes to decodeChat, which decides and words every error. So
// parseCommonChat declines anything where the decoder could read
// otherwise: a key it matches only case-insensitively, a repeated key,
// a string with escapes or invalid UTF-8, a number that is not a plain
// integer, content parts. FuzzCommonChatAgreesWithDecoder holds it to
// decodeChat's result.
func (s *Server) parseCommonChat(body []byte) (x *exchange, lastUser string, ok bool) {
	x = &exchange{}
	var messages []byte
	var maxTokens, maxCompletionTokens *int
	var seen uint8
	ok = true
	err := llm.EachField(body, func(key string, v []byte, _ int) bool {
		var bit uint8
		switch key {
		case "model":
			bit = 1
			x.model, ok = plainString(v)
			ok = ok && x.model != ""
		case "messages":
			bit = 2
			messages, ok = v, llm.KindOf(v) == llm.KindArray
		case "stream":
			bit = 4
			x.stream, ok = v[0] == 't', llm.KindOf(v) == llm.KindBool
		case "max_tokens":
			bit = 8
			maxTokens, ok = plainInt(v)
		case "max_completion_tokens":
			bit = 16
			maxCompletionTokens, ok = plainInt(v)
		default:
			ok = ignoredParams[key]
		}
		if seen&bit != 0 {
			ok = false
		}
		seen |= bit
		return ok
	})
	if err != nil || !ok || seen&3 != 3 {
		return nil, "", false
	}
	n := 0
	err = llm.EachElement(messages, func(_ int, m []byte) bool {
		var role, text string
		role, text, ok = plainMessage(m)
		if !ok {
			return false
		}
		x.promptTokens += (utf8.RuneCountInString(text)+3)/4 + 3
		if role == "user" {
			lastUser = text
		}
		n++
		return true
	})
	if err != nil || !ok || n == 0 {
		return nil, "", false
	}
	limit := maxCompletionTokens
	if limit == nil {
		limit = maxTokens
	}
	s.reply(x, lastUser, limit)
	return x, lastUser, true
}

// plainMessage reads a message whose role is a valid one and whose
// content is a plain string or null. Its other members are not read, as
// decodeChat does not read them either, unless the decoder would take
// one for role or content (it matches names regardless of case).
func plainMessage(m []byte) (role, text string, ok bool) {
	if llm.KindOf(m) != llm.KindObject {
		return "", "", false
	}
	var hasRole, hasContent bool
	ok = true
	err := llm.EachField(m, func(key string, v []byte, _ int) bool {
		switch {
		case key == "role" && !hasRole:
			hasRole = true
			role, ok = plainString(v)
			ok = ok && validRoles[role]
		case key == "content" && !hasContent:
			hasContent = true
			if llm.KindOf(v) != llm.KindNull {
				text, ok = plainString(v)
			}
		case strings.EqualFold(key, "role") || strings.EqualFold(key, "content"):
			ok = false
		}
		return ok
	})
	return role, text, err == nil && ok && hasRole
}

// plainString is the text of a raw JSON string that decodes to itself:
// no escapes, valid UTF-8 (the decoder replaces invalid bytes).
func plainString(v []byte) (string, bool) {
	if llm.KindOf(v) != llm.KindString {
		return "", false
	}
	v = v[1 : len(v)-1]
	for _, c := range v {
		if c == '\\' {
			return "", false
		}
	}
	if !utf8.Valid(v) {
		return "", false
	}
	return string(v), true
}

// plainInt reads a token limit: null, or an integer in plain digits that
// fits an int.
func plainInt(v []byte) (*int, bool) {
	if llm.KindOf(v) == llm.KindNull {
		return nil, true
	}
	if llm.KindOf(v) != llm.KindNumber {
		return nil, false
	}
	n, err := strconv.Atoi(string(v))
	if err != nil {
		return nil, false
	}
	return &n, true
}

// ignoredParams are the documented parameters the emulator does not read
// (documentedParams' JSON names): any value of theirs passes decodeChat,
// so a common request may carry them.
var ignoredParams = func() map[string]bool {
	t := reflect.TypeFor[documentedParams]()
	names := make(map[string]bool, t.NumField())
	for f := range t.Fields() {
		names[strings.Split(f.Tag.Get("json"), ",")[0]] = true
	}
	return names
}()
