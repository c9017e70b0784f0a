package llm

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseEmbedRequest(t *testing.T) {
	type view struct {
		Model, Input, User string
	}
	tests := []struct {
		name string
		body string
		want view
	}{
		{"string input", `{"model":"text-embedding-3-small","input":"hello"}`, view{"text-embedding-3-small", `"hello"`, ""}},
		{"array input", `{"input":["a","b"],"model":"e"}`, view{"e", `["a","b"]`, ""}},
		{"token input", `{"model":"e","input":[[1,2,3],[4]]}`, view{"e", `[[1,2,3],[4]]`, ""}},
		{"user and options", `{"model":"e","input":"x","user":"u\u0031","encoding_format":"base64","dimensions":256}`, view{"e", `"x"`, "u1"}},
		{"null options", `{"model":"e","input":"x","user":null,"encoding_format":null,"dimensions":null}`, view{"e", `"x"`, ""}},
		{"escaped model", `{"model":"\u0065\/1","input":"x"}`, view{"e/1", `"x"`, ""}},
		{"unknown fields", `{"model":"e","input":"x","extra":{"a":[]}}`, view{"e", `"x"`, ""}},
		{"whitespace", " {\n\"model\" : \"e\" ,\r\n\"input\" : [ \"x\" ] }\t", view{"e", `[ "x" ]`, ""}},
		{"duplicate user, last null", `{"model":"e","input":"x","user":"u","user":null}`, view{"e", `"x"`, ""}},
		{"duplicate model", `{"model":"a","input":"x","model":"b"}`, view{"b", `"x"`, ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := ParseEmbedRequest([]byte(tt.body))
			if err != nil {
				t.Fatalf("ParseEmbedRequest(%s) = %v", tt.body, err)
			}
			if diff := cmp.Diff(tt.want, view{r.Model, string(r.Input), r.User}); diff != "" {
				t.Errorf("ParseEmbedRequest(%s) (-want +got):\n%s", tt.body, diff)
			}
		})
	}
}

func TestParseEmbedRequestErrors(t *testing.T) {
	tests := []struct {
		name        string
		body        string
		param, code string
		msg         string
	}{
		{"malformed", `{"model":"e","input":`, "", "invalid_json", "could not parse the JSON body"},
		{"empty", ``, "", "invalid_json", "could not parse the JSON body"},
		{"array", `["x"]`, "", "invalid_json", "must be a JSON object"},
		{"missing model", `{"input":"x"}`, "model", "missing_required_parameter", "Missing required parameter: 'model'"},
		{"missing input", `{"model":"e"}`, "input", "missing_required_parameter", "Missing required parameter: 'input'"},
		{"empty model", `{"model":"","input":"x"}`, "model", "invalid_value", "'model'"},
		{"model number", `{"model":1,"input":"x"}`, "model", "invalid_type", "'model': expected a string, but got a number"},
		{"input number", `{"model":"e","input":1}`, "input", "invalid_type", "'input': expected a string or an array, but got a number"},
		{"input object", `{"model":"e","input":{}}`, "input", "invalid_type", "'input': expected a string or an array, but got an object"},
		{"input null", `{"model":"e","input":null}`, "input", "invalid_type", "'input'"},
		{"user bool", `{"model":"e","input":"x","user":true}`, "user", "invalid_type", "'user': expected a string, but got a boolean"},
		{"encoding_format number", `{"model":"e","input":"x","encoding_format":1}`, "encoding_format", "invalid_type", "'encoding_format': expected a string"},
		{"dimensions string", `{"model":"e","input":"x","dimensions":"256"}`, "dimensions", "invalid_type", "'dimensions': expected an integer, but got a string"},
		{"dimensions out of range", `{"model":"e","input":"x","dimensions":1e400}`, "dimensions", "invalid_type", "'dimensions': expected an integer"},
		{"dimensions zero", `{"model":"e","input":"x","dimensions":0}`, "dimensions", "invalid_value", "below minimum value"},
		{"input empty array", `{"model":"e","input":[]}`, "input", "empty_array", "empty array"},
		{"too many inputs", `{"model":"e","input":[` + strings.Repeat(`"a",`, MaxEmbedInputs) + `"a"]}`, "input", "invalid_value", "at most 2048 inputs"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := ParseEmbedRequest([]byte(tt.body))
			if err == nil {
				t.Fatalf("ParseEmbedRequest(%s) = %+v, want an error", tt.body, r)
			}
			checkBadRequest(t, err, tt.param, tt.code, tt.msg)
		})
	}
}

func TestEmbedUpstreamBody(t *testing.T) {
	tests := []struct {
		name, body, model, want string
	}{
		{"replaced", `{"model":"alias","input":"x"}`, "text-embedding-3-large", `{"model":"text-embedding-3-large","input":"x"}`},
		{"replaced last", `{"input":["a"], "model" : "alias" }`, "e", `{"input":["a"], "model" : "e" }`},
		{"escapes", `{"model":"alias","input":"x"}`, "a\"\\\n\x7f\u2028", `{"model":"a\"\\\n` + "\x7f" + `\u2028","input":"x"}`},
		{"escaped original", `{"model":"\u0061lias","input":"x"}`, "b", `{"model":"b","input":"x"}`},
		{"duplicate model", `{"model":"x","input":"x","model":"alias"}`, "b", `{"model":"x","input":"x","model":"b"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := []byte(tt.body)
			orig := bytes.Clone(body)
			r, err := ParseEmbedRequest(body)
			if err != nil {
				t.Fatal(err)
			}
			got := r.UpstreamBody(tt.model)
			if string(got) != tt.want {
				t.Errorf("UpstreamBody(%q) =\n%s\nwant\n%s", tt.model, got, tt.want)
			}
			if !bytes.Equal(body, orig) {
				t.Errorf("UpstreamBody modified the client's body: %s", body)
			}
			checkEdited(t, orig, got, tt.model, false)
		})
	}

	body := []byte(`{"model":"e","input":"x"}`)
	r, err := ParseEmbedRequest(body)
	if err != nil {
		t.Fatal(err)
	}
	if got := r.UpstreamBody("e"); len(got) != len(body) || &got[0] != &body[0] {
		t.Errorf("UpstreamBody copied an unchanged body")
	}
}

// FuzzParseEmbedRequest: a body is refused with a 400 *Error or read as
// encoding/json reads it, and UpstreamBody's model splice keeps it JSON.
func FuzzParseEmbedRequest(f *testing.F) {
	f.Add([]byte(`{"model":"text-embedding-3-small","input":"hello","encoding_format":"float"}`), "m")
	f.Add([]byte(`{"input":["a","b"],"model":"e","dimensions":256,"user":"u"}`), "e")
	f.Add([]byte(`{"model":"e","input":[[1,2,3]],"user":null}`), "other")
	f.Fuzz(func(t *testing.T, body []byte, model string) {
		r, err := ParseEmbedRequest(body)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || e.Status != http.StatusBadRequest {
				t.Fatalf("error %v is not a 400 *Error", err)
			}
			return
		}
		var std struct {
			Model string `json:"model"`
		}
		if err := json.Unmarshal(body, &std); err != nil || std.Model != r.Model {
			t.Fatalf("model %q, encoding/json %q (%v)", r.Model, std.Model, err)
		}
		out := r.UpstreamBody(model)
		if err := json.Unmarshal(out, &std); err != nil || std.Model != string([]rune(model)) { // invalid UTF-8 reads as U+FFFD, a byte each
			t.Fatalf("UpstreamBody(%q) = %s: model %q, %v", model, out, std.Model, err)
		}
	})
}
