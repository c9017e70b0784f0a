package llm

import (
	"bytes"
	"encoding/json"
	"strconv"
)

// span marks a value inside a request body; a zero span means "absent".
type span struct{ start, end int }

func (s span) present() bool { return s.end > 0 }

// ChatRequest is a chat completion request as the gateway sees it: the
// client's JSON body plus the fields routing, limits and accounting need.
// Everything else in the body passes through untouched.
type ChatRequest struct {
	Body         []byte // the client's JSON object
	Model        string
	Stream       bool
	IncludeUsage bool // the client asked for stream_options.include_usage
	MaxTokens    int  // max_completion_tokens, else max_tokens; 0 when absent
	User         string
	Messages     []byte // raw messages array, for token estimates and translation
	Tools        []byte // raw tools array, for token estimates; nil when absent or null

	model         span
	streamOptions span
	// max_tokens and max_completion_tokens as last seen (0 for null), kept
	// apart so a repeated key overrides only itself.
	maxTokens, maxCompletionTokens int
	params                         *ChatParams // decoded on demand by Params
	translated                     bool        // built by NewChatRequest from another dialect
}

// Translated reports whether the gateway built this request from another
// dialect's (NewChatRequest) rather than receiving it as it is. Some of
// its parameters are then the translation's choice, not the client's
// (see provider.FitTranslated), and may be dropped where the upstream
// refuses them.
func (r *ChatRequest) Translated() bool { return r.translated }

// ParseChatRequest scans body, checks the fields the gateway relies on and
// returns the request or an OpenAI-style 400 naming the offending field.
func ParseChatRequest(body []byte) (*ChatRequest, error) {
	r := &ChatRequest{Body: body}
	var ferr *Error
	err := EachField(body, func(key string, v []byte, off int) bool {
		ferr = r.field(key, v, off)
		return ferr == nil
	})
	if err != nil {
		return nil, jsonError(err)
	}
	if ferr != nil {
		return nil, ferr
	}
	r.MaxTokens = r.maxCompletionTokens
	if r.MaxTokens == 0 {
		r.MaxTokens = r.maxTokens
	}
	if !r.model.present() {
		return nil, missing("model")
	}
	if r.Messages == nil {
		return nil, missing("messages")
	}
	if r.Model == "" {
		return nil, BadRequest("model", "invalid_value", "Invalid value for 'model': must be a non-empty string.")
	}
	return r, nil
}

// field reads one member. A key may repeat; like encoding/json and the
// upstream's decoder, the last occurrence decides, so null resets.
func (r *ChatRequest) field(key string, v []byte, off int) *Error {
	k := KindOf(v)
	switch key {
	case "model":
		if k != KindString {
			return wrongType(key, "a string", k)
		}
		s, err := UnquoteString(v)
		if err != nil {
			return wrongType(key, "a string", k)
		}
		r.Model, r.model = s, span{off, off + len(v)}
	case "messages":
		if k != KindArray {
			return wrongType(key, "an array", k)
		}
		return r.messages(v)
	case "stream":
		if k == KindNull {
			r.Stream = false
			return nil
		}
		if k != KindBool {
			return wrongType(key, "a boolean", k)
		}
		r.Stream = v[0] == 't'
	case "stream_options":
		r.IncludeUsage = false
		if k == KindNull {
			r.streamOptions = span{off, off + len(v)}
			return nil
		}
		if k != KindObject {
			return wrongType(key, "an object", k)
		}
		r.streamOptions = span{off, off + len(v)}
		var e *Error
		_ = EachField(v, func(key string, v []byte, _ int) bool {
			if key == "include_usage" {
				switch KindOf(v) {
				case KindBool:
					r.IncludeUsage = v[0] == 't'
				case KindNull:
					r.IncludeUsage = false
				default:
					e = wrongType("stream_options.include_usage", "a boolean", KindOf(v))
				}
			}
			return e == nil
		})
		return e
	case "max_tokens", "max_completion_tokens":
		n := 0
		if k != KindNull {
			var err error
			n, err = strconv.Atoi(string(v))
			if k != KindNumber || err != nil {
				return wrongType(key, "an integer", k)
			}
			if n < 1 {
				return BadRequest(key, "invalid_value", "Invalid '%s': integer below minimum value. Expected a value >= 1, but got %d instead.", key, n)
			}
		}
		if key == "max_completion_tokens" {
			r.maxCompletionTokens = n
		} else {
			r.maxTokens = n
		}
	case "user":
		if k == KindNull {
			r.User = ""
			return nil
		}
		if k != KindString {
			return wrongType(key, "a string", k)
		}
		r.User, _ = UnquoteString(v)
	case "temperature", "top_p", "presence_penalty", "frequency_penalty":
		if k != KindNumber && k != KindNull {
			return wrongType(key, "a number", k)
		}
	case "n":
		if k != KindNumber && k != KindNull {
			return wrongType(key, "an integer", k)
		}
	case "tools", "stop":
		if key == "tools" && k != KindArray && k != KindNull {
			return wrongType(key, "an array", k)
		}
		if key == "tools" {
			r.Tools = nil
			if k == KindArray {
				r.Tools = v
			}
		}
		if key == "stop" && k != KindArray && k != KindString && k != KindNull {
			return wrongType(key, "a string or an array", k)
		}
	}
	return nil
}

// messages checks the shape OpenAI itself enforces before any model runs:
// a non-empty array of objects, each with a string role.
func (r *ChatRequest) messages(v []byte) *Error {
	r.Messages = v
	n := 0
	var e *Error
	_ = EachElement(v, func(i int, m []byte) bool {
		n++
		if KindOf(m) != KindObject {
			e = wrongType("messages["+strconv.Itoa(i)+"]", "an object", KindOf(m))
			return false
		}
		// The members again, without validating: the walk that called
		// us has (a second scanner pass cost a bare request about as
		// much as the message's text).
		var role, content []byte
		calls := false // tool_calls, function_call, audio or refusal: an assistant turn with no text
		fs := Walk(m, '{')
		for k, fv, ok := fs.Next(); ok; k, fv, ok = fs.Next() {
			switch messageKey(k) {
			case "role":
				role = fv
			case "content":
				content = fv
			case "tool_calls", "function_call", "audio", "refusal":
				calls = calls || KindOf(fv) != KindNull
			}
		}
		at := func(f string) string { return "messages[" + strconv.Itoa(i) + "]." + f }
		switch {
		case role == nil:
			e = missing(at("role"))
		case KindOf(role) != KindString:
			e = wrongType(at("role"), "a string", KindOf(role))
		case (content == nil || KindOf(content) == KindNull) && !(calls && string(role) == `"assistant"`):
			// OpenAI's reference requires content of every role but an
			// assistant turn that carries tool calls (or a function
			// call, an audio reference, a refusal) instead of text.
			if content == nil {
				e = missing(at("content"))
			} else {
				e = wrongType(at("content"), "a string or an array", KindNull)
			}
		default:
			// The content's shape is checked here, not left to the
			// upstream: a request it would refuse is not sent (nor paid
			// for in admission).
			e = contentShape(at("content"), content)
		}
		return e == nil
	})
	if e != nil {
		return e
	}
	if n == 0 {
		return BadRequest("messages", "empty_array", "Invalid 'messages': empty array. Expected an array with minimum length 1, but got an empty array instead.")
	}
	return nil
}

// messageKey is a quoted key from a Walker over a chat message, as
// EachField would read it (escapes included) when it is one the message
// check looks at (knownKey knows them all), "" for any other key. It allocates only for a key
// written with escapes.
func messageKey(q []byte) string {
	if len(q) < 2 {
		return ""
	}
	if k, ok := knownKey(q[1 : len(q)-1]); ok {
		return k
	}
	if bytes.IndexByte(q, '\\') < 0 {
		return "" // a plain key knownKey did not know: neither of the two
	}
	k, _ := unquoteJSON(q)
	return k
}

// contentShape checks a chat message's content is of a type it can
// have: a string, an array of content part objects, or null or absent
// (an assistant turn of only tool calls; messages checks the role).
func contentShape(path string, v []byte) *Error {
	switch k := KindOf(v); k {
	case KindString, KindNull, KindInvalid:
		return nil
	case KindArray:
		var e *Error
		_ = EachElement(v, func(j int, part []byte) bool {
			if KindOf(part) != KindObject {
				e = wrongType(path+"["+strconv.Itoa(j)+"]", "a content part object", KindOf(part))
			}
			return e == nil
		})
		return e
	default:
		return wrongType(path, "a string or an array", k)
	}
}

// UpstreamBody returns the body to send upstream: the model replaced by
// model, and, when forceUsage is set on a stream, stream_options rewritten
// so the upstream reports usage. It copies only when something changes.
func (r *ChatRequest) UpstreamBody(model string, forceUsage bool) []byte {
	needModel := model != r.Model
	needUsage := forceUsage && r.Stream && !r.IncludeUsage
	if !needModel && !needUsage {
		return r.Body
	}
	type splice struct {
		at, end int
		with    []byte
	}
	var edits [2]splice
	// The model's JSON form, quoted on the stack: it is copied into the
	// new body at once, so it needs no allocation of its own.
	var quoted [64]byte
	n := 0
	if needUsage {
		if r.streamOptions.present() {
			edits[n] = splice{r.streamOptions.start, r.streamOptions.end, streamOptionsWithUsage(r.Body[r.streamOptions.start:r.streamOptions.end])}
		} else {
			at := openBrace(r.Body) + 1
			edits[n] = splice{at, at, []byte(`"stream_options":{"include_usage":true},`)}
		}
		n++
	}
	if needModel {
		edits[n] = splice{r.model.start, r.model.end, AppendQuote(quoted[:0], model)}
		n++
	}
	if n == 2 && edits[1].at < edits[0].at {
		edits[0], edits[1] = edits[1], edits[0]
	}
	size := len(r.Body)
	for _, e := range edits[:n] {
		size += len(e.with) - (e.end - e.at)
	}
	out := make([]byte, 0, size)
	prev := 0
	for _, e := range edits[:n] {
		out = append(out, r.Body[prev:e.at]...)
		out = append(out, e.with...)
		prev = e.end
	}
	return append(out, r.Body[prev:]...)
}

func openBrace(b []byte) int {
	for i, c := range b {
		if c == '{' {
			return i
		}
	}
	return 0
}

// streamOptionsWithUsage keeps the client's other stream options and turns
// include_usage on. It is off the common path (clients that send
// stream_options usually already ask for usage), so it may decode.
func streamOptionsWithUsage(raw []byte) []byte {
	opts := map[string]json.RawMessage{}
	if KindOf(raw) == KindObject {
		_ = json.Unmarshal(raw, &opts)
	}
	opts["include_usage"] = json.RawMessage("true")
	out, _ := json.Marshal(opts)
	return out
}

func missing(param string) *Error {
	return BadRequest(param, "missing_required_parameter", "Missing required parameter: '%s'.", param)
}

func wrongType(param, want string, got Kind) *Error {
	return BadRequest(param, "invalid_type", "Invalid type for '%s': expected %s, but got %s instead.", param, want, got)
}

// jsonError turns a scan failure into the 400 a client can act on.
func jsonError(err error) *Error {
	if err == ErrNotObject {
		return BadRequest("", "invalid_json", "The request body must be a JSON object.")
	}
	return BadRequest("", "invalid_json", "We could not parse the JSON body of your request. (%v)", err)
}
