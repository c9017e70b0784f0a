package llm

import (
	"encoding/json"
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

// TestSetUsageCostOwned: the result is SetUsageCostAt's, written into the
// body's own array when it has room (and only then), for insertions and
// for replacements by a longer, shorter or equal cost.
func TestSetUsageCostOwned(t *testing.T) {
	bodies := []string{
		`{"id":"x","usage":{"prompt_tokens":3,"completion_tokens":4}}`,
		`{"usage":{}, "id":"x"}`,
		`{"usage":{"prompt_tokens":1,"cost":9.5,"x":1}}`,
		`{"usage":{"prompt_tokens":1,"cost":123456789.123456}, "tail":"after the usage object"}`,
		`{"usage" : { "total_tokens" : 7 } }`,
		`{"usage":{"details":{"a":{}}},"more":{"usage":{}}}`,
	}
	for _, in := range bodies {
		_, _, slot, err := CheckUsage([]byte(in))
		if err != nil || slot.End == 0 {
			t.Fatalf("CheckUsage(%s): %v, %+v", in, err, slot)
		}
		for _, cost := range []string{"0.001250", "9.5", "1", "123456789012.123456"} {
			want := string(SetUsageCostAt([]byte(in), slot, cost))
			for _, room := range []int{0, 1, SpliceRoom} {
				buf := make([]byte, len(in), len(in)+room)
				copy(buf, in)
				got := SetUsageCostOwned(buf, slot, cost)
				if string(got) != want {
					t.Errorf("%s, cost %s, room %d: %s, want %s", in, cost, room, got, want)
				}
				inPlace := &got[:1][0] == &buf[:1][0]
				if fits := len(want) <= cap(buf); inPlace != fits {
					t.Errorf("%s, cost %s, room %d: in place %v, want %v", in, cost, room, inPlace, fits)
				}
				if !inPlace && string(buf) != in {
					t.Errorf("%s, cost %s, room %d: copied, but the body changed to %s", in, cost, room, buf)
				}
			}
		}
	}
}
