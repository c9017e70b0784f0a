package llm

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
)

func TestSetUsageCost(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"id":"x","usage":{"prompt_tokens":3,"completion_tokens":4}}`, `{"id":"x","usage":{"prompt_tokens":3,"completion_tokens":4,"cost":0.001250}}`},
		{`{"usage":{}, "id":"x"}`, `{"usage":{"cost":0.001250}, "id":"x"}`},
		{`{"usage":{"prompt_tokens":1,"cost":9.5,"x":1}}`, `{"usage":{"prompt_tokens":1,"cost":0.001250,"x":1}}`},
		{`{"usage" : { "total_tokens" : 7 } }`, `{"usage" : { "total_tokens" : 7 ,"cost":0.001250} }`},
		{`{"usage":{"details":{"a":{}}},"more":{"usage":{}}}`, `{"usage":{"details":{"a":{}},"cost":0.001250},"more":{"usage":{}}}`},
	} {
		got, ok := SetUsageCost([]byte(tc.in), "0.001250")
		if !ok || string(got) != tc.want {
			t.Errorf("SetUsageCost(%s) = %s, %v; want %s", tc.in, got, ok, tc.want)
		}
		var v struct {
			Usage struct{ Cost float64 } `json:"usage"`
		}
		if err := json.Unmarshal(got, &v); err != nil || v.Usage.Cost != 0.00125 {
			t.Errorf("result %s: %v, cost %v", got, err, v.Usage.Cost)
		}
	}
	for _, in := range []string{`{"id":"x"}`, `{"usage":null}`, `[1]`, `{"usage":{"a":1}`} {
		if got, ok := SetUsageCost([]byte(in), "1"); ok || string(got) != in {
			t.Errorf("SetUsageCost(%s) = %s, %v; want it unchanged", in, got, ok)
		}
	}
}

func FuzzSetUsageCost(f *testing.F) {
	f.Add([]byte(`{"usage":{"prompt_tokens":3}}`))
	f.Add([]byte(`{"usage":{}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		out, ok := SetUsageCost(b, "0.5")
		if !ok {
			return
		}
		if !json.Valid(out) {
			t.Fatalf("%s → invalid %s", b, out)
		}
	})
}

// scanThenSet is what the request path does with a non-streamed answer:
// find the usage while reading it, then put the cost there.
func scanThenSet(body []byte, cost string) ([]byte, bool) {
	if _, _, start, end := ScanUsage(body); end > 0 {
		return SetUsageCostAt(body, start, end, cost), true
	}
	return body, false
}

func TestSetUsageCostAtAgrees(t *testing.T) {
	for _, in := range []string{
		`{"id":"x","usage":{"prompt_tokens":3,"completion_tokens":4}}`,
		`{"usage":{}, "id":"x"}`,
		`{"usage":{"prompt_tokens":1,"cost":9.5,"x":1}}`,
		`{"usage":{"a":1},"usage":{"b":2}}`,      // the last one, as a decoder keeps
		`{"usage":{"a":1},"usage":null}`,         // a later non-object does not count
		`{"usage":{"a":1},"us\u0061ge":{"b":2}}`, // an escaped key is the same key
		`{"usage":{"a":1},"choices":[}`,          // malformed after the usage: unchanged
		`{"id":"x"}`, `{"usage":null}`, `[1]`, `{"usage":{"a":1}`, ``,
	} {
		want, wantOK := SetUsageCost([]byte(in), "0.5")
		got, ok := scanThenSet([]byte(in), "0.5")
		if ok != wantOK || string(got) != string(want) {
			t.Errorf("%s: span edit gives %s, %v; SetUsageCost %s, %v", in, got, ok, want, wantOK)
		}
	}
}

func FuzzSetUsageCostAt(f *testing.F) {
	f.Add([]byte(`{"usage":{"prompt_tokens":3}}`))
	f.Add([]byte(`{"usage":{"a":1},"usage":{}}`))
	f.Add([]byte(`[{"usage":{"prompt_tokens":3}}]`))
	f.Add([]byte(`{"usage":{"prompt_tokens":3}`))
	f.Add([]byte(` null `))
	f.Fuzz(func(t *testing.T, b []byte) {
		want, wantOK := SetUsageCost(b, "0.5")
		got, ok := scanThenSet(b, "0.5")
		if ok != wantOK || string(got) != string(want) {
			t.Fatalf("%q: span edit gives %q, %v; SetUsageCost %q, %v", b, got, ok, want, wantOK)
		}
		u1, ok1 := UsageOf(b)
		u2, ok2, _, _ := ScanUsage(b)
		if u1 != u2 || ok1 != ok2 {
			t.Fatalf("%q: ScanUsage %v, %v; UsageOf %v, %v", b, u2, ok2, u1, ok1)
		}
		// CheckUsage's verdict is json.Valid's for an object (within the
		// scanner's nesting limit, past which it refuses).
		_, _, _, _, err := CheckUsage(b)
		trimmed := bytes.TrimLeft(b, " \t\r\n")
		object := json.Valid(b) && len(trimmed) > 0 && trimmed[0] == '{'
		switch {
		case object && nesting(b) <= maxDepth && err != nil:
			t.Fatalf("%q: CheckUsage refuses a JSON object: %v", b, err)
		case !object && err == nil:
			t.Fatalf("%q: CheckUsage accepts what is not a JSON object", b)
		case json.Valid(b) && !object && nesting(b) <= maxDepth && !errors.Is(err, ErrNotObject):
			t.Fatalf("%q: CheckUsage gives %v for well-formed JSON that is not an object, want ErrNotObject", b, err)
		}
	})
}
