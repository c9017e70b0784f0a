package ollama

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strconv"

	"gatehouse/internal/llm"
	"gatehouse/internal/provider"
)

type embedRequest struct {
	Model      string          `json:"model"`
	Input      json.RawMessage `json:"input"`
	Dimensions int             `json:"dimensions,omitempty"`
}

type embedResponse struct {
	Model           string            `json:"model"`
	Embeddings      []json.RawMessage `json:"embeddings"`
	PromptEvalCount int               `json:"prompt_eval_count"`
	Error           json.RawMessage   `json:"error"` // a failure answered with a 200
}

// embedOptions are the OpenAI embedding parameters besides model and
// input that the translation honours.
type embedOptions struct {
	dimensions int
	base64     bool
}

// EmbedRequest builds POST {base}/api/embed. Ollama embeds text only, so
// token-id inputs are refused; dimensions passes through and base64
// output is encoded by the gateway.
func (Adapter) EmbedRequest(ctx context.Context, d *provider.Deployment, req *llm.EmbedRequest) (*http.Request, error) {
	o, err := readEmbedOptions(d, req)
	if err != nil {
		return nil, err
	}
	if !textInput(req.Input) {
		return nil, llm.BadRequest("input", "unsupported_parameter",
			"Invalid 'input': provider %q (type ollama) embeds text only: send a string or an array of strings, not token ids.", d.Provider)
	}
	body, err := json.Marshal(embedRequest{Model: d.Model, Input: req.Input, Dimensions: o.dimensions})
	if err != nil {
		return nil, fmt.Errorf("provider %q: encode request: %w", d.Provider, err)
	}
	return newRequest(ctx, d, http.MethodPost, "/api/embed", body, "application/json")
}

func readEmbedOptions(d *provider.Deployment, req *llm.EmbedRequest) (embedOptions, error) {
	var o embedOptions
	var ferr error
	err := llm.EachField(req.Body, func(key string, v []byte, _ int) bool {
		null := llm.KindOf(v) == llm.KindNull
		switch key {
		case "model", "input", "user":
		case "dimensions":
			if !null {
				n, err := strconv.Atoi(string(v))
				if err != nil || n < 1 {
					ferr = llm.BadRequest(key, "invalid_value", "Invalid value for 'dimensions': must be a positive integer.")
				}
				o.dimensions = n
			}
		case "encoding_format":
			if !null {
				f, _ := llm.UnquoteString(v)
				switch f {
				case "float":
				case "base64":
					o.base64 = true
				default:
					ferr = llm.BadRequest(key, "invalid_value", "Invalid value for 'encoding_format': %q; expected \"float\" or \"base64\".", f)
				}
			}
		default:
			if !d.DropUnsupported {
				ferr = provider.Unsupported(d, key)
			}
		}
		return ferr == nil
	})
	if err != nil {
		return o, llm.BadRequest("", "invalid_json", "We could not parse the JSON body of your request.")
	}
	return o, ferr
}

// textInput reports whether input is a string or an array of strings.
func textInput(raw []byte) bool {
	switch llm.KindOf(raw) {
	case llm.KindString:
		return true
	case llm.KindArray:
		var items []json.RawMessage
		if json.Unmarshal(raw, &items) != nil {
			return false
		}
		for _, it := range items {
			if llm.KindOf(it) != llm.KindString {
				return false
			}
		}
		return true
	}
	return false
}

// Embedding translates Ollama's embeddings into OpenAI's list. The numbers
// are copied as Ollama wrote them, unless the client asked for base64.
func (Adapter) Embedding(resp *http.Response, d *provider.Deployment, req *llm.EmbedRequest) (*llm.Completion, error) {
	o, err := readEmbedOptions(d, req)
	if err != nil {
		return nil, err
	}
	body, err := provider.ReadBody(resp, d.ResponseLimit())
	if err != nil {
		return nil, err
	}
	var r embedResponse
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, provider.ProtocolError(d.Provider, "an embeddings response that is not JSON", err)
	}
	// A 200 with {"error":…} failed; one without any vector did too, and
	// would otherwise reach the client as an empty list it did not ask for.
	if r.Error != nil {
		return nil, streamError(d, r.Error)
	}
	if len(r.Embeddings) == 0 {
		return nil, provider.ProtocolError(d.Provider, "an embeddings response without embeddings", nil)
	}
	b := make([]byte, 0, len(body)+64*len(r.Embeddings)+128)
	b = append(b, `{"object":"list","data":[`...)
	for i, vec := range r.Embeddings {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"object":"embedding","index":`...)
		b = strconv.AppendInt(b, int64(i), 10)
		b = append(b, `,"embedding":`...)
		if o.base64 {
			if b, err = appendBase64(b, vec); err != nil {
				return nil, provider.ProtocolError(d.Provider, "an embedding that is not an array of numbers", err)
			}
		} else {
			if llm.KindOf(vec) != llm.KindArray {
				return nil, provider.ProtocolError(d.Provider, "an embedding that is not an array of numbers", nil)
			}
			b = append(b, vec...)
		}
		b = append(b, '}')
	}
	b = append(b, `],"model":`...)
	b = llm.AppendQuote(b, modelName(r.Model, d))
	b = append(b, `,"usage":{"prompt_tokens":`...)
	b = strconv.AppendInt(b, int64(r.PromptEvalCount), 10)
	b = append(b, `,"total_tokens":`...)
	b = strconv.AppendInt(b, int64(r.PromptEvalCount), 10)
	b = append(b, "}}"...)
	return &llm.Completion{Body: b, HasUsage: true,
		Usage: llm.Usage{PromptTokens: r.PromptEvalCount, TotalTokens: r.PromptEvalCount}}, nil
}

// appendBase64 writes vec as OpenAI's base64 encoding: little-endian
// float32s.
func appendBase64(b []byte, vec json.RawMessage) ([]byte, error) {
	var fs []float64
	if err := json.Unmarshal(vec, &fs); err != nil {
		return b, err
	}
	raw := make([]byte, 0, 4*len(fs))
	for _, f := range fs {
		raw = binary.LittleEndian.AppendUint32(raw, math.Float32bits(float32(f)))
	}
	b = append(b, '"')
	b = base64.StdEncoding.AppendEncode(b, raw)
	return append(b, '"'), nil
}

// tagsResponse is GET /api/tags.
type tagsResponse struct {
	Models []struct {
		Name  string `json:"name"`
		Model string `json:"model"`
	} `json:"models"`
}

// Models reads the names of the pulled models from /api/tags.
func (Adapter) Models(resp *http.Response, d *provider.Deployment) ([]string, error) {
	body, err := provider.ReadBody(resp, d.ResponseLimit())
	if err != nil {
		return nil, err
	}
	var r tagsResponse
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, provider.ProtocolError(d.Provider, "a model list that is not JSON", err)
	}
	names := make([]string, 0, len(r.Models))
	for _, m := range r.Models {
		name := m.Name
		if name == "" {
			name = m.Model
		}
		if name != "" {
			names = append(names, name)
		}
	}
	return names, nil
}
