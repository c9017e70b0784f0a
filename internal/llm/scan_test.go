package llm

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// member is one (key, raw value) pair reported by EachField.
type member struct {
	Key   string
	Value string
}

// collect runs EachField over data and returns every member it reports.
func collect(t *testing.T, data []byte) ([]member, error) {
	t.Helper()
	var got []member
	err := EachField(data, func(key string, value []byte, offset int) bool {
		if offset < 0 || offset+len(value) > len(data) || !bytes.Equal(data[offset:offset+len(value)], value) {
			t.Errorf("EachField: value %q does not sit at offset %d of the input", value, offset)
		}
		got = append(got, member{key, string(value)})
		return true
	})
	return got, err
}

func TestEachField(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []member
	}{
		{"empty object", `{}`, nil},
		{"empty object with space", " \t\r\n{ \t\r\n} \t\r\n", nil},
		{"one string", `{"a":"b"}`, []member{{"a", `"b"`}}},
		{
			"every kind",
			`{"s":"x","n":-0.5e+10,"t":true,"f":false,"z":null,"a":[1,[2]],"o":{"k":{}}}`,
			[]member{
				{"s", `"x"`}, {"n", `-0.5e+10`}, {"t", `true`}, {"f", `false`},
				{"z", `null`}, {"a", `[1,[2]]`}, {"o", `{"k":{}}`},
			},
		},
		{
			"numbers",
			`{"a":0,"b":-0,"c":1.25,"d":1E5,"e":1e-7,"f":-12.5E+3,"g":123456789012345678901234567890}`,
			[]member{
				{"a", `0`}, {"b", `-0`}, {"c", `1.25`}, {"d", `1E5`}, {"e", `1e-7`},
				{"f", `-12.5E+3`}, {"g", `123456789012345678901234567890`},
			},
		},
		{
			"whitespace everywhere",
			"\n {\r\n\t\"a\" \t:\n [ 1 , { \"b\" : 2 } ] ,\r\"c\"\t:\t\"d\"\n}\n ",
			[]member{{"a", `[ 1 , { "b" : 2 } ]`}, {"c", `"d"`}},
		},
		{
			"escapes in key",
			`{"a\"b\\c\/d\b\f\n\r\t":1}`,
			[]member{{"a\"b\\c/d\b\f\n\r\t", `1`}},
		},
		{"unicode escape in key", `{"mod\u0065l":"x"}`, []member{{"model", `"x"`}}},
		{"surrogate pair in key", `{"\ud83d\ude00":1}`, []member{{"😀", `1`}}},
		{"upper-case hex surrogate pair", `{"\uD83D\uDE00x":1}`, []member{{"😀x", `1`}}},
		{"lone high surrogate", `{"\ud83dx":1}`, []member{{"\uFFFDx", `1`}}},
		{"lone low surrogate", `{"\ude00":1}`, []member{{"\uFFFD", `1`}}},
		{"high surrogate then non-surrogate escape", `{"\ud83d\u0041":1}`, []member{{"\uFFFDA", `1`}}},
		{"two high surrogates", `{"\ud83d\ud83d":1}`, []member{{"\uFFFD\uFFFD", `1`}}},
		{"raw UTF-8 key", `{"ключ":"значение"}`, []member{{"ключ", `"значение"`}}},
		{"invalid UTF-8 key", "{\"a\xffb\":1}", []member{{"a\uFFFDb", `1`}}},
		{"invalid UTF-8 key with escape", "{\"\\n\xff\":1}", []member{{"\n\uFFFD", `1`}}},
		{"escaped quote in value", `{"a":"x\"}y"}`, []member{{"a", `"x\"}y"`}}},
		{"braces inside strings", `{"a":"{[","b":"]}"}`, []member{{"a", `"{["`}, {"b", `"]}"`}}},
		{"duplicate keys are all reported", `{"a":1,"a":2}`, []member{{"a", `1`}, {"a", `2`}}},
		{"empty key", `{"":1}`, []member{{"", `1`}}},
		{"nested 100 deep", `{"a":` + strings.Repeat("[", 100) + strings.Repeat("]", 100) + `}`,
			[]member{{"a", strings.Repeat("[", 100) + strings.Repeat("]", 100)}}},
		{"nested at the depth limit", `{"a":` + strings.Repeat("[", maxDepth) + strings.Repeat("]", maxDepth) + `}`,
			[]member{{"a", strings.Repeat("[", maxDepth) + strings.Repeat("]", maxDepth)}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !json.Valid([]byte(tt.in)) {
				t.Fatalf("test input is not valid JSON: %q", tt.in)
			}
			got, err := collect(t, []byte(tt.in))
			if err != nil {
				t.Fatalf("EachField(%q) = %v", tt.in, err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("EachField(%q) members (-want +got):\n%s", tt.in, diff)
			}
			// The members must be exactly what encoding/json sees.
			if diff := cmp.Diff(stdMembers(t, []byte(tt.in)), lastWins(t, got)); diff != "" {
				t.Errorf("EachField(%q) disagrees with encoding/json (-json +EachField):\n%s", tt.in, diff)
			}
		})
	}
}

func TestEachFieldErrors(t *testing.T) {
	tests := []struct {
		name      string
		in        string
		notObject bool // valid JSON, but not an object
	}{
		{"empty", ``, false},
		{"only space", " \n\t", false},
		{"array", `[1,2]`, true},
		{"string", `"x"`, true},
		{"number", ` 12 `, true},
		{"null", `null`, true},
		{"true", `true`, true},
		{"array with trailing data", `[1] x`, false},
		{"unterminated object", `{"a":1`, false},
		{"unterminated key", `{"a`, false},
		{"unterminated value string", `{"a":"b`, false},
		{"missing colon", `{"a" 1}`, false},
		{"missing value", `{"a":}`, false},
		{"trailing comma", `{"a":1,}`, false},
		{"leading comma", `{,"a":1}`, false},
		{"double comma", `{"a":1,,"b":2}`, false},
		{"missing comma", `{"a":1 "b":2}`, false},
		{"unquoted key", `{a:1}`, false},
		{"single quotes", `{'a':1}`, false},
		{"number key", `{1:1}`, false},
		{"trailing data", `{"a":1} x`, false},
		{"two objects", `{}{}`, false},
		{"control character in string", "{\"a\":\"x\ty\"}", false},
		{"newline in key", "{\"a\nb\":1}", false},
		{"bad escape", `{"a":"\x"}`, false},
		{"short unicode escape", `{"a":"\u12"}`, false},
		{"non-hex unicode escape", `{"a":"\u12g4"}`, false},
		{"escape at end", `{"a":"\`, false},
		{"leading zero", `{"a":01}`, false},
		{"leading plus", `{"a":+1}`, false},
		{"bare minus", `{"a":-}`, false},
		{"dot without digits", `{"a":1.}`, false},
		{"leading dot", `{"a":.5}`, false},
		{"exponent without digits", `{"a":1e}`, false},
		{"exponent sign without digits", `{"a":1e+}`, false},
		{"hex number", `{"a":0x10}`, false},
		{"NaN", `{"a":NaN}`, false},
		{"truncated literal", `{"a":tru}`, false},
		{"misspelled literal", `{"a":nul1}`, false},
		{"capitalised literal", `{"a":True}`, false},
		{"unclosed array", `{"a":[1,2}`, false},
		{"array trailing comma", `{"a":[1,]}`, false},
		{"mismatched brackets", `{"a":[}`, false},
		{"nested unterminated", `{"a":{"b":{}`, false},
		{"BOM", "\xef\xbb\xbf{}", false},
		{"too deep", `{"a":` + strings.Repeat("[", maxDepth+1) + strings.Repeat("]", maxDepth+1) + `}`, false},
		{"NUL byte", "{\"a\":1}\x00", false},
		{"comment", `{"a":1 /* c */}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := EachField([]byte(tt.in), func(string, []byte, int) bool { return true })
			if err == nil {
				t.Fatalf("EachField(%q) = nil, want an error", tt.in)
			}
			if tt.notObject {
				if err != ErrNotObject {
					t.Errorf("EachField(%q) = %v, want ErrNotObject", tt.in, err)
				}
				return
			}
			var se *SyntaxError
			if !errors.As(err, &se) {
				t.Fatalf("EachField(%q) = %T %v, want *SyntaxError", tt.in, err, err)
			}
			if se.Offset < 0 || se.Offset > len(tt.in) {
				t.Errorf("EachField(%q): offset %d outside the input", tt.in, se.Offset)
			}
			if !strings.Contains(se.Error(), "invalid JSON at byte") {
				t.Errorf("SyntaxError.Error() = %q, want it to give the offset", se.Error())
			}
		})
	}
}

func TestEachFieldSyntaxErrorOffset(t *testing.T) {
	tests := []struct {
		in   string
		want int
	}{
		{`{"a":1,}`, 7},
		{`{"a":tru}`, 5},
		{`{"a" 1}`, 5},
		{`{"a":1} x`, 8},
		{"{\"a\":\"x\ny\"}", 7},
	}
	for _, tt := range tests {
		err := EachField([]byte(tt.in), func(string, []byte, int) bool { return true })
		var se *SyntaxError
		if !errors.As(err, &se) {
			t.Errorf("EachField(%q) = %v, want *SyntaxError", tt.in, err)
			continue
		}
		if se.Offset != tt.want {
			t.Errorf("EachField(%q) offset = %d, want %d", tt.in, se.Offset, tt.want)
		}
	}
}

func TestEachFieldStopsEarly(t *testing.T) {
	// Returning false stops the walk, and the rest is not validated.
	in := []byte(`{"a":1,"b":2,"c":!!!`)
	var keys []string
	err := EachField(in, func(key string, _ []byte, _ int) bool {
		keys = append(keys, key)
		return key != "b"
	})
	if err != nil {
		t.Fatalf("EachField = %v, want nil after an early stop", err)
	}
	if diff := cmp.Diff([]string{"a", "b"}, keys); diff != "" {
		t.Errorf("keys (-want +got):\n%s", diff)
	}
}

func TestEachElement(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{`[]`, nil},
		{` [ ] `, nil},
		{`[1]`, []string{`1`}},
		{`[ 1 , "a,b" , {"c":[2,3]} , [ ] , null , true , -1e3 ]`, []string{`1`, `"a,b"`, `{"c":[2,3]}`, `[ ]`, `null`, `true`, `-1e3`}},
		{"[\n{\"role\":\"user\"},\r\n{\"role\":\"assistant\"}\n]", []string{`{"role":"user"}`, `{"role":"assistant"}`}},
	}
	for _, tt := range tests {
		var got []string
		var idx []int
		err := EachElement([]byte(tt.in), func(i int, v []byte) bool {
			idx = append(idx, i)
			got = append(got, string(v))
			return true
		})
		if err != nil {
			t.Errorf("EachElement(%q) = %v", tt.in, err)
			continue
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("EachElement(%q) (-want +got):\n%s", tt.in, diff)
		}
		for i, n := range idx {
			if n != i {
				t.Errorf("EachElement(%q): index %d reported as %d", tt.in, i, n)
			}
		}
	}

	for _, in := range []string{`{}`, `1`, ``, `[1 2]`, `[1,`, `[,]`} {
		if err := EachElement([]byte(in), func(int, []byte) bool { return true }); err == nil {
			t.Errorf("EachElement(%q) = nil, want an error", in)
		}
	}

	n := 0
	if err := EachElement([]byte(`[1,2,3]`), func(int, []byte) bool { n++; return n < 2 }); err != nil || n != 2 {
		t.Errorf("EachElement with early stop: err %v after %d calls, want nil after 2", err, n)
	}
}

func TestUnquoteString(t *testing.T) {
	tests := []struct {
		in   string
		want string
	}{
		{`""`, ""},
		{`"plain"`, "plain"},
		{`"a\"b\\c\/d"`, `a"b\c/d`},
		{`"\b\f\n\r\t"`, "\b\f\n\r\t"},
		{`"\u00e9\u4e2d"`, "é中"},
		{`"\u0000"`, "\x00"},
		{`"\ud83d\ude00"`, "😀"},
		{`"\ud83d"`, "\uFFFD"},
		{`"\ude00\ud83d"`, "\uFFFD\uFFFD"},
		{`"é"`, "é"},
		{"\"\xff\"", "\uFFFD"},
		{"\"a\xc3\"", "a\uFFFD"},
		{"\"\xed\xa0\x80\"", "\uFFFD\uFFFD\uFFFD"}, // UTF-8-encoded surrogate
	}
	for _, tt := range tests {
		got, err := UnquoteString([]byte(tt.in))
		if err != nil {
			t.Errorf("UnquoteString(%q) = %v", tt.in, err)
			continue
		}
		if got != tt.want {
			t.Errorf("UnquoteString(%q) = %q, want %q", tt.in, got, tt.want)
		}
		var std string
		if err := json.Unmarshal([]byte(tt.in), &std); err != nil {
			t.Fatalf("json.Unmarshal(%q): %v", tt.in, err)
		}
		if got != std {
			t.Errorf("UnquoteString(%q) = %q, encoding/json gives %q", tt.in, got, std)
		}
	}

	for _, in := range []string{``, `"`, `x`, `1`, `null`, `["a"]`} {
		if _, err := UnquoteString([]byte(in)); err == nil {
			t.Errorf("UnquoteString(%q) = nil error, want one", in)
		}
	}
}

func TestKindOf(t *testing.T) {
	tests := []struct {
		in   string
		want Kind
		name string
	}{
		{``, KindInvalid, "invalid"},
		{`null`, KindNull, "null"},
		{`true`, KindBool, "a boolean"},
		{`false`, KindBool, "a boolean"},
		{`0`, KindNumber, "a number"},
		{`-1`, KindNumber, "a number"},
		{`"s"`, KindString, "a string"},
		{`[]`, KindArray, "an array"},
		{`{}`, KindObject, "an object"},
	}
	for _, tt := range tests {
		if got := KindOf([]byte(tt.in)); got != tt.want {
			t.Errorf("KindOf(%q) = %v, want %v", tt.in, got, tt.want)
		}
		if got := tt.want.String(); got != tt.name {
			t.Errorf("Kind(%d).String() = %q, want %q", tt.want, got, tt.name)
		}
	}
}

// stdMembers is encoding/json's view of a top-level object: each key's last
// value, compacted.
func stdMembers(t *testing.T, data []byte) map[string]string {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatalf("json.Unmarshal(%q): %v", data, err)
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = compact(t, v)
	}
	return out
}

// lastWins folds EachField's members the way encoding/json folds duplicate
// keys (the last one stays) and compacts their values.
func lastWins(t *testing.T, ms []member) map[string]string {
	t.Helper()
	out := make(map[string]string, len(ms))
	for _, m := range ms {
		out[m.Key] = compact(t, []byte(m.Value))
	}
	return out
}

func compact(t *testing.T, raw []byte) string {
	t.Helper()
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		t.Fatalf("json.Compact(%q): %v", raw, err)
	}
	return buf.String()
}

// nesting returns the deepest bracket nesting in data, ignoring brackets
// inside strings. It needs no validity: it is only used to skip inputs that
// exceed maxDepth, which encoding/json accepts far deeper than EachField.
func nesting(data []byte) int {
	depth, deepest := 0, 0
	inString := false
	for i := 0; i < len(data); i++ {
		c := data[i]
		switch {
		case inString && c == '\\':
			i++
		case c == '"':
			inString = !inString
		case inString:
		case c == '{' || c == '[':
			depth++
			deepest = max(deepest, depth)
		case c == '}' || c == ']':
			depth--
		}
	}
	return deepest
}

func FuzzEachField(f *testing.F) {
	for _, s := range []string{
		`{}`,
		`[]`,
		`null`,
		``,
		`{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}],"stream":true}`,
		`{"model":"m","stream_options":{"include_usage":true},"max_tokens":16}`,
		`{"a\u0000b":"\ud83d\ude00","n":-0.5e+10,"x":[true,false,null,{}]}`,
		"{\"a\xffb\":\"\xfe\"}",
		`{"a":1,"a":2}`,
		" \r\n\t{ \"k\" : [ 1 , 2 ] } ",
		`{"a":01}`,
		`{"a":"\u12"}`,
		`{"a":[[[[[[[[[[]]]]]]]]]]}`,
		`{"a":1}x`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var got []member
		err := EachField(data, func(key string, value []byte, offset int) bool {
			if !bytes.Equal(data[offset:offset+len(value)], value) {
				t.Fatalf("value %q does not sit at offset %d", value, offset)
			}
			got = append(got, member{key, string(value)})
			return true
		})
		if nesting(data) > maxDepth {
			// Deeper than EachField allows but within encoding/json's limit:
			// only an error is acceptable.
			if err == nil && !json.Valid(data) {
				t.Fatalf("EachField(%q) = nil for invalid JSON", data)
			}
			return
		}
		valid := json.Valid(data)
		isObject := valid && bytes.TrimLeft(data, " \t\r\n")[0] == '{'
		if (err == nil) != isObject {
			t.Fatalf("EachField(%q) = %v; json.Valid = %v, object = %v", data, err, valid, isObject)
		}
		if valid && !isObject && err != ErrNotObject {
			t.Fatalf("EachField(%q) = %v for a valid non-object, want ErrNotObject", data, err)
		}
		if err != nil {
			return
		}
		if diff := cmp.Diff(stdMembers(t, data), lastWins(t, got)); diff != "" {
			t.Fatalf("EachField(%q) disagrees with encoding/json (-json +EachField):\n%s", data, diff)
		}
	})
}

// TestHasStopMissesNoStopByte: the eight-byte test never misses a byte
// that ends a plain run (a false alarm is allowed: the byte loop then
// decides), whatever the other bytes and the position.
func TestHasStopMissesNoStopByte(t *testing.T) {
	word := func(b [8]byte) uint64 { return binary.LittleEndian.Uint64(b[:]) }
	for c := range 256 {
		for pos := range 8 {
			for _, fill := range []byte{'a', 0xff, 0x7f, 0x21, 0x5d, 0x80} {
				var b [8]byte
				for i := range b {
					b[i] = fill
				}
				b[pos] = byte(c)
				want := strStop[c] || strStop[fill]
				if got := hasStop(word(b)); want && !got {
					t.Fatalf("byte %#x at %d among %#x: missed", c, pos, fill)
				}
				if !want && hasStop(word(b)) {
					t.Fatalf("byte %#x at %d among %#x: a false alarm on a word with no stop byte", c, pos, fill)
				}
			}
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 100000 {
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], r.Uint64())
		any := false
		for _, c := range b {
			any = any || strStop[c]
		}
		if any && !hasStop(word(b)) {
			t.Fatalf("%x: a stop byte missed", b)
		}
	}
}
