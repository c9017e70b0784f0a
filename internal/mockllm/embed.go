package mockllm

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"gatehouse/internal/llm"
)

const (
	defaultDimensions = 1536
	maxDimensions     = 1 << 14
	maxInputs         = 2048
)

type embedRequest struct {
	Model          *string         `json:"model"`
	Input          json.RawMessage `json:"input"`
	Dimensions     *int            `json:"dimensions"`
	EncodingFormat *string         `json:"encoding_format"`
}

var errEmptyInput = invalidRequest("input", "", "'$.input' is invalid. Please check the API reference: https://platform.openai.com/docs/api-reference.")

// embedInput is one input: text, or tokens when the caller sent token ids.
type embedInput struct {
	text   string
	tokens []int64
	isText bool
}

// parseInputs accepts the four shapes OpenAI accepts: a string, an array
// of strings, an array of token ids, an array of arrays of token ids.
func parseInputs(raw json.RawMessage) ([]embedInput, *apiError) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, missingParam("input")
	}
	invalid := invalidRequest("input", "invalid_type",
		"Invalid type for 'input': expected a string, an array of strings, an array of integers or an array of arrays of integers.")
	switch raw[0] {
	case '"':
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return nil, invalid
		}
		if s == "" {
			return nil, errEmptyInput
		}
		return []embedInput{{text: s, isText: true}}, nil
	case '[':
	default:
		return nil, invalid
	}
	var items []json.RawMessage
	if json.Unmarshal(raw, &items) != nil {
		return nil, invalid
	}
	if len(items) == 0 {
		return nil, invalidRequest("input", "empty_array",
			"Invalid 'input': empty array. Expected an array with minimum length 1, but got an empty array instead.")
	}
	if items[0][0] != '"' && items[0][0] != '[' { // one array of token ids
		var toks []int64
		if json.Unmarshal(raw, &toks) != nil {
			return nil, invalid
		}
		return []embedInput{{tokens: toks}}, nil
	}
	if len(items) > maxInputs {
		return nil, invalidRequest("input", "", "'$.input' is invalid: at most %d inputs are allowed per request.", maxInputs)
	}
	out := make([]embedInput, len(items))
	for i, it := range items {
		var err error
		if it[0] == '"' {
			out[i].isText = true
			err = json.Unmarshal(it, &out[i].text)
			if err == nil && out[i].text == "" {
				return nil, errEmptyInput
			}
		} else {
			err = json.Unmarshal(it, &out[i].tokens)
			if err == nil && len(out[i].tokens) == 0 {
				return nil, invalidRequest("input", "", "'$.input' is invalid: an array of tokens must not be empty.")
			}
		}
		if err != nil {
			return nil, invalid
		}
	}
	return out, nil
}

func (s *Server) embeddings(c *call, body []byte) {
	var req embedRequest
	if err := json.Unmarshal(body, &req); err != nil {
		c.fail(typeError(err))
		return
	}
	if req.Model == nil || *req.Model == "" {
		c.fail(missingModel())
		return
	}
	c.model = *req.Model
	inputs, perr := parseInputs(req.Input)
	if perr != nil {
		c.fail(perr)
		return
	}
	dims := defaultDimensions
	if req.Dimensions != nil {
		dims = *req.Dimensions
		if dims < 1 || dims > maxDimensions {
			c.fail(invalidRequest("dimensions", "invalid_value",
				"Invalid value for 'dimensions': must be between 1 and %d.", maxDimensions))
			return
		}
	}
	base64Format := false
	if f := req.EncodingFormat; f != nil {
		switch *f {
		case "float":
		case "base64":
			base64Format = true
		default:
			c.fail(invalidRequest("encoding_format", "invalid_value",
				"Invalid value: '%s'. Supported values are: 'float' and 'base64'.", *f))
			return
		}
	}
	p, perr := s.newPlan(c, embedText(inputs))
	if perr != nil {
		c.fail(perr)
		return
	}
	if p.hang {
		c.block()
		return
	}
	if !c.wait(p.latency) {
		return
	}
	if s.injectError(&p) {
		c.fail(injectedError(p.errorStatus, c.model, p.retryAfter))
		return
	}
	c.armCut(&p)
	tokens := 0
	for _, in := range inputs {
		if in.isText {
			tokens += max((utf8.RuneCountInString(in.text)+3)/4, 1)
		} else {
			tokens += len(in.tokens)
		}
	}
	b := p.hugeAnswer(dims, func(dims int) []byte {
		return openAIEmbeddings(inputs, dims, base64Format, c.model, tokens)
	})
	c.writeJSON(200, b)
}

// openAIEmbeddings is the answer of /v1/embeddings: a vector of dims
// for each input, as floats or base64.
func openAIEmbeddings(inputs []embedInput, dims int, base64Format bool, model string, tokens int) []byte {
	vec := make([]float32, dims)
	per := dims * 11
	if base64Format {
		per = dims*4*4/3 + 4
	}
	b := make([]byte, 0, 128+len(inputs)*(per+48))
	b = append(b, `{"object":"list","data":[`...)
	var raw []byte
	for i, in := range inputs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"object":"embedding","index":`...)
		b = appendInt(b, int64(i))
		b = append(b, `,"embedding":`...)
		embed(vec, in)
		if base64Format {
			raw = raw[:0]
			for _, f := range vec {
				raw = binary.LittleEndian.AppendUint32(raw, math.Float32bits(f))
			}
			b = append(b, '"')
			b = base64.StdEncoding.AppendEncode(b, raw)
			b = append(b, '"')
		} else {
			b = append(b, '[')
			for j, f := range vec {
				if j > 0 {
					b = append(b, ',')
				}
				b = appendFloat32(b, f)
			}
			b = append(b, ']')
		}
		b = append(b, '}')
	}
	b = append(b, `],"model":`...)
	b = llm.AppendQuote(b, model)
	b = append(b, `,"usage":{"prompt_tokens":`...)
	b = appendInt(b, int64(tokens))
	b = append(b, `,"total_tokens":`...)
	b = appendInt(b, int64(tokens))
	return append(b, "}}"...)
}

// embed fills v with a unit vector derived from a hash of the input, so
// equal inputs get equal vectors (what a semantic cache relies on) and
// different inputs get unrelated ones.
func embed(v []float32, in embedInput) {
	// FNV-1a over the input, then splitmix64 as a generator.
	h := uint64(14695981039346656037)
	mix := func(c byte) { h = (h ^ uint64(c)) * 1099511628211 }
	if in.isText {
		mix('s')
		for i := 0; i < len(in.text); i++ {
			mix(in.text[i])
		}
	} else {
		mix('t')
		for _, t := range in.tokens {
			for k := 0; k < 64; k += 8 {
				mix(byte(t >> k))
			}
		}
	}
	var norm float64
	for i := range v {
		h += 0x9e3779b97f4a7c15
		z := h
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
		z = (z ^ (z >> 27)) * 0x94d049bb133111eb
		z ^= z >> 31
		f := float64(z>>11)/(1<<52) - 1 // uniform in [-1, 1)
		v[i] = float32(f)
		norm += f * f
	}
	if norm == 0 {
		v[0], norm = 1, 1
	}
	scale := 1 / math.Sqrt(norm)
	for i := range v {
		v[i] = float32(float64(v[i]) * scale)
	}
}

// appendFloat32 writes the shortest decimal that reads back as f, so a
// float response and a base64 response decode to the same float32s.
func appendFloat32(b []byte, f float32) []byte {
	return strconv.AppendFloat(b, float64(f), 'g', -1, 32)
}

// embedText is the text inputs joined, where a @mock(...) directive
// arms a fault on an embedding call as it does in a chat prompt.
func embedText(inputs []embedInput) string {
	var b strings.Builder
	for _, in := range inputs {
		if in.isText {
			b.WriteString(in.text)
			b.WriteByte('\n')
		}
	}
	return b.String()
}
