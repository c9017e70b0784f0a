package gemini

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"sort"
	"strings"

	"gatehouse/internal/llm"
	"gatehouse/internal/provider"
)

type batchEmbedRequest struct {
	Requests []embedContentRequest `json:"requests"`
}

type embedContentRequest struct {
	Model                string  `json:"model"`
	Content              content `json:"content"`
	OutputDimensionality *int    `json:"outputDimensionality,omitempty"`
}

// embedParams is the OpenAI embeddings request, decoded.
type embedParams struct {
	inputs     []string
	dimensions *int
	base64     bool
}

// EmbedRequest builds POST {base}/models/{model}:batchEmbedContents, one
// request per OpenAI input. Gemini embeds text only: token-id inputs are
// refused.
func (Adapter) EmbedRequest(ctx context.Context, d *provider.Deployment, req *llm.EmbedRequest) (*http.Request, error) {
	ep, err := decodeEmbed(d, req.Body)
	if err != nil {
		return nil, err
	}
	name := modelPath(d.Model)
	b := batchEmbedRequest{Requests: make([]embedContentRequest, len(ep.inputs))}
	for i, in := range ep.inputs {
		b.Requests[i] = embedContentRequest{Model: name, Content: content{Parts: []part{textPart(in)}}, OutputDimensionality: ep.dimensions}
	}
	body, err := json.Marshal(b)
	if err != nil {
		return nil, fmt.Errorf("provider %q: encode gemini embed request: %w", d.Provider, err)
	}
	return newRequest(ctx, d, ":batchEmbedContents", body, "application/json")
}

func decodeEmbed(d *provider.Deployment, body []byte) (*embedParams, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil {
		return nil, llm.BadRequest("", "invalid_json", "We could not parse the JSON body of your request. (%v)", err)
	}
	ep := &embedParams{}
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := fields[k]
		null := llm.KindOf(v) == llm.KindNull
		switch k {
		case "model", "user":
			// user labels the request for the caller; Gemini has no field for it.
		case "input":
			in, err := embedInputs(v)
			if err != nil {
				return nil, err
			}
			ep.inputs = in
		case "dimensions":
			if !null {
				var n int
				if json.Unmarshal(v, &n) != nil || n < 1 {
					return nil, llm.BadRequest("dimensions", "invalid_value", "Invalid value for 'dimensions': expected a positive integer.")
				}
				ep.dimensions = &n
			}
		case "encoding_format":
			var f string
			_ = json.Unmarshal(v, &f)
			switch f {
			case "", "float":
			case "base64":
				ep.base64 = true
			default:
				return nil, llm.BadRequest("encoding_format", "invalid_value", "Invalid value for 'encoding_format': expected \"float\" or \"base64\".")
			}
		default:
			if !null && !d.DropUnsupported {
				return nil, provider.Unsupported(d, k)
			}
		}
	}
	return ep, nil
}

func embedInputs(v json.RawMessage) ([]string, error) {
	if llm.KindOf(v) == llm.KindString {
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return nil, llm.BadRequest("input", "invalid_type", "Invalid type for 'input'.")
		}
		return []string{s}, nil
	}
	var ss []string
	if err := json.Unmarshal(v, &ss); err != nil {
		return nil, llm.BadRequest("input", "unsupported_value",
			"Invalid 'input': Gemini embeds text only; send a string or an array of strings, not token ids.")
	}
	if len(ss) == 0 {
		return nil, llm.BadRequest("input", "empty_array", "Invalid 'input': empty array. Expected an array with minimum length 1, but got an empty array instead.")
	}
	return ss, nil
}

type batchEmbedResponse struct {
	Error      *apiError `json:"error"` // a failure answered with a 200
	Embeddings []struct {
		Values json.RawMessage `json:"values"`
	} `json:"embeddings"`
	UsageMetadata *struct {
		PromptTokenCount int `json:"promptTokenCount"`
	} `json:"usageMetadata"`
}

// Embedding translates the batch response into OpenAI's embedding list.
// Float vectors are relayed as Gemini wrote them; base64 is OpenAI's
// packing of little-endian float32s. Gemini reports no token count for
// embeddings, so usage is only marked as known when it does.
func (Adapter) Embedding(resp *http.Response, d *provider.Deployment, req *llm.EmbedRequest) (*llm.Completion, error) {
	body, err := provider.ReadBody(resp, d.ResponseLimit())
	if err != nil {
		return nil, err
	}
	var g batchEmbedResponse
	if err := json.Unmarshal(body, &g); err != nil {
		return nil, provider.ProtocolError(d.Provider, "an embeddings response that is not a BatchEmbedContentsResponse", err)
	}
	if g.Error != nil {
		return nil, g.Error.gatewayError(d.Provider, http.StatusBadGateway, nil)
	}
	ep, err := decodeEmbed(d, req.Body)
	if err != nil {
		return nil, err
	}
	if len(g.Embeddings) != len(ep.inputs) {
		return nil, provider.ProtocolError(d.Provider, fmt.Sprintf("%d embeddings for %d inputs", len(g.Embeddings), len(ep.inputs)), nil)
	}
	type item struct {
		Object    string          `json:"object"`
		Index     int             `json:"index"`
		Embedding json.RawMessage `json:"embedding"`
	}
	out := struct {
		Object string         `json:"object"`
		Data   []item         `json:"data"`
		Model  string         `json:"model"`
		Usage  *llm.WireUsage `json:"usage"`
	}{Object: "list", Data: make([]item, len(g.Embeddings)), Model: strings.TrimPrefix(d.Model, "models/")}
	for i, e := range g.Embeddings {
		v := e.Values
		if ep.base64 {
			if v, err = packBase64(v); err != nil {
				return nil, provider.ProtocolError(d.Provider, "an embedding that is not a list of numbers", err)
			}
		}
		out.Data[i] = item{Object: "embedding", Index: i, Embedding: v}
	}
	c := &llm.Completion{}
	u := llm.Usage{}
	if g.UsageMetadata != nil {
		u = llm.Usage{PromptTokens: g.UsageMetadata.PromptTokenCount, TotalTokens: g.UsageMetadata.PromptTokenCount}
		c.Usage, c.HasUsage = u, true
	}
	out.Usage = &llm.WireUsage{PromptTokens: u.PromptTokens, TotalTokens: u.TotalTokens}
	if c.Body, err = json.Marshal(out); err != nil {
		return nil, fmt.Errorf("provider %q: encode embeddings: %w", d.Provider, err)
	}
	return c, nil
}

func packBase64(values json.RawMessage) (json.RawMessage, error) {
	var fs []float64
	if err := json.Unmarshal(values, &fs); err != nil {
		return nil, err
	}
	raw := make([]byte, 0, 4*len(fs))
	for _, f := range fs {
		raw = binary.LittleEndian.AppendUint32(raw, math.Float32bits(float32(f)))
	}
	return json.Marshal(base64.StdEncoding.EncodeToString(raw))
}
