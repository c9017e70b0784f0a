package mockllm

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"
)

type embeddingList struct {
	Object string `json:"object"`
	Data   []struct {
		Object    string          `json:"object"`
		Index     int             `json:"index"`
		Embedding json.RawMessage `json:"embedding"`
	} `json:"data"`
	Model string `json:"model"`
	Usage struct {
		PromptTokens int `json:"prompt_tokens"`
		TotalTokens  int `json:"total_tokens"`
	} `json:"usage"`
}

// vectors decodes every embedding of a response, float or base64, into
// float32s.
func vectors(t *testing.T, b []byte) (embeddingList, [][]float32) {
	t.Helper()
	var l embeddingList
	if err := json.Unmarshal(b, &l); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	if got := keysInOrder(t, json.RawMessage(b)); !reflect.DeepEqual(got, []string{"object", "data", "model", "usage"}) {
		t.Errorf("keys %v", got)
	}
	var out [][]float32
	for i, d := range l.Data {
		if d.Object != "embedding" || d.Index != i {
			t.Errorf("data[%d] = object %q index %d", i, d.Object, d.Index)
		}
		var v []float32
		var s string
		if json.Unmarshal(d.Embedding, &s) == nil {
			raw, err := base64.StdEncoding.DecodeString(s)
			if err != nil || len(raw)%4 != 0 {
				t.Fatalf("bad base64 embedding: %v", err)
			}
			for j := 0; j < len(raw); j += 4 {
				v = append(v, math.Float32frombits(binary.LittleEndian.Uint32(raw[j:])))
			}
		} else {
			var f []float64
			if err := json.Unmarshal(d.Embedding, &f); err != nil {
				t.Fatal(err)
			}
			for _, x := range f {
				v = append(v, float32(x))
			}
		}
		out = append(out, v)
	}
	return l, out
}

func TestEmbeddings(t *testing.T) {
	_, ts := start(t, Options{})
	post := func(body string) (int, []byte) {
		resp, b := do(t, ts, "POST", "/v1/embeddings", body, nil)
		return resp.StatusCode, b
	}

	_, fb := post(`{"model":"text-embedding-3-small","input":["the cat","a dog","the cat"]}`)
	l, floats := vectors(t, fb)
	if l.Object != "list" || l.Model != "text-embedding-3-small" || len(floats) != 3 {
		t.Fatalf("response %s", fb)
	}
	if l.Usage.PromptTokens != 6 || l.Usage.TotalTokens != 6 {
		t.Errorf("usage %+v, want 2 tokens for each of three 5- to 7-char inputs", l.Usage)
	}
	for i, v := range floats {
		if len(v) != 1536 {
			t.Errorf("vector %d has %d dimensions, want the default 1536", i, len(v))
		}
		var n float64
		for _, x := range v {
			n += float64(x) * float64(x)
		}
		if math.Abs(n-1) > 1e-4 {
			t.Errorf("vector %d has squared norm %v, want 1", i, n)
		}
	}
	if !reflect.DeepEqual(floats[0], floats[2]) {
		t.Error("equal inputs gave different vectors")
	}
	if reflect.DeepEqual(floats[0], floats[1]) {
		t.Error("different inputs gave equal vectors")
	}

	_, bb := post(`{"model":"text-embedding-3-small","input":["the cat","a dog","the cat"],"encoding_format":"base64"}`)
	if !strings.Contains(string(bb), `"embedding":"`) {
		t.Fatalf("not base64: %.200s", bb)
	}
	_, b64 := vectors(t, bb)
	if !reflect.DeepEqual(floats, b64) {
		t.Error("float and base64 encodings decode to different vectors")
	}

	_, sb := post(`{"model":"m","input":"the cat","dimensions":8}`)
	_, single := vectors(t, sb)
	if len(single) != 1 || len(single[0]) != 8 {
		t.Errorf("dimensions 8 gave %d vectors of %d", len(single), len(single[0]))
	}

	_, tb := post(`{"model":"m","input":[[1,2,3],[4,5]],"dimensions":4}`)
	l, toks := vectors(t, tb)
	if len(toks) != 2 || l.Usage.PromptTokens != 5 || reflect.DeepEqual(toks[0], toks[1]) {
		t.Errorf("token arrays: %s", tb)
	}
	_, ob := post(`{"model":"m","input":[1,2,3],"dimensions":4}`)
	l, one := vectors(t, ob)
	if len(one) != 1 || l.Usage.PromptTokens != 3 || !reflect.DeepEqual(one[0], toks[0]) {
		t.Errorf("one token array: %s, want the vector of [1,2,3] above", ob)
	}
}

func TestEmbeddingValidation(t *testing.T) {
	_, ts := start(t, Options{})
	tests := []struct {
		name, body  string
		param, code string
	}{
		{"malformed", `{"input":`, "<null>", "<null>"},
		{"missing model", `{"input":"x"}`, "<null>", "<null>"},
		{"missing input", `{"model":"m"}`, "input", "missing_required_parameter"},
		{"empty string", `{"model":"m","input":""}`, "input", "<null>"},
		{"empty array", `{"model":"m","input":[]}`, "input", "empty_array"},
		{"object input", `{"model":"m","input":{"a":1}}`, "input", "invalid_type"},
		{"mixed array", `{"model":"m","input":["a",1]}`, "input", "invalid_type"},
		{"zero dimensions", `{"model":"m","input":"x","dimensions":0}`, "dimensions", "invalid_value"},
		{"bad encoding", `{"model":"m","input":"x","encoding_format":"int8"}`, "encoding_format", "invalid_value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, b := do(t, ts, "POST", "/v1/embeddings", tt.body, nil)
			if resp.StatusCode != 400 {
				t.Fatalf("status %d: %s", resp.StatusCode, b)
			}
			e := decodeError(t, b)
			if deref(e.Error.Param) != tt.param || deref(e.Error.Code) != tt.code {
				t.Errorf("param %q code %q, want %q %q: %s", deref(e.Error.Param), deref(e.Error.Code), tt.param, tt.code, b)
			}
		})
	}
	// Header overrides work here too; directives cannot (no messages).
	resp, b := do(t, ts, "POST", "/v1/embeddings", `{"model":"m","input":"x"}`, map[string]string{"X-Mock-Error-Status": "429", "X-Mock-Retry-After": "1"})
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "1" {
		t.Errorf("injected error: %d %s", resp.StatusCode, b)
	}
}
