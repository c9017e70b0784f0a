package llm

import "strconv"

// EmbedRequest is an embeddings request: the client's JSON plus the fields
// the gateway routes and accounts by.
type EmbedRequest struct {
	Body  []byte
	Model string
	Input []byte // raw "input" value
	User  string

	model span
}

// ParseEmbedRequest scans and checks an OpenAI embeddings request body.
func ParseEmbedRequest(body []byte) (*EmbedRequest, error) {
	r := &EmbedRequest{Body: body}
	var ferr *Error
	err := EachField(body, func(key string, v []byte, off int) bool {
		k := KindOf(v)
		switch key {
		case "model":
			if k != KindString {
				ferr = wrongType(key, "a string", k)
				break
			}
			r.Model, _ = UnquoteString(v)
			r.model = span{off, off + len(v)}
		case "input":
			if k != KindString && k != KindArray {
				ferr = wrongType(key, "a string or an array", k)
				break
			}
			if k == KindArray {
				ferr = inputCount(v)
			}
			r.Input = v
		case "user":
			r.User = ""
			if k == KindString {
				r.User, _ = UnquoteString(v)
			} else if k != KindNull {
				ferr = wrongType(key, "a string", k)
			}
		case "encoding_format":
			if k != KindString && k != KindNull {
				ferr = wrongType(key, "a string", k)
			}
		case "dimensions":
			if k == KindNull {
				break
			}
			n, err := strconv.Atoi(string(v))
			if k != KindNumber || err != nil {
				ferr = wrongType(key, "an integer", k)
			} else if n < 1 {
				ferr = BadRequest(key, "invalid_value", "Invalid 'dimensions': integer below minimum value. Expected a value >= 1, but got %d instead.", n)
			}
		}
		return ferr == nil
	})
	if err != nil {
		return nil, jsonError(err)
	}
	if ferr != nil {
		return nil, ferr
	}
	if !r.model.present() {
		return nil, missing("model")
	}
	if r.Input == nil {
		return nil, missing("input")
	}
	if r.Model == "" {
		return nil, BadRequest("model", "invalid_value", "Invalid value for 'model': must be a non-empty string.")
	}
	return r, nil
}

// MaxEmbedInputs is how many inputs one embeddings request may carry, as
// OpenAI's API documents; more are refused before any upstream is asked.
const MaxEmbedInputs = 2048

// inputCount checks an array input has from 1 to MaxEmbedInputs items.
func inputCount(v []byte) *Error {
	n := 0
	_ = EachElement(v, func(int, []byte) bool {
		n++
		return n <= MaxEmbedInputs
	})
	switch {
	case n == 0:
		return BadRequest("input", "empty_array", "Invalid 'input': empty array. Expected an array with minimum length 1, but got an empty array instead.")
	case n > MaxEmbedInputs:
		return BadRequest("input", "invalid_value", "Invalid 'input': at most %d inputs are allowed per request.", MaxEmbedInputs)
	}
	return nil
}

// UpstreamBody returns the body with the model replaced, copying only when
// the name differs.
func (r *EmbedRequest) UpstreamBody(model string) []byte {
	if model == r.Model {
		return r.Body
	}
	q := AppendQuote(nil, model)
	out := make([]byte, 0, len(r.Body)+len(q))
	out = append(out, r.Body[:r.model.start]...)
	out = append(out, q...)
	return append(out, r.Body[r.model.end:]...)
}
