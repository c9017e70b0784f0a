package tokens

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"

	"gatehouse/internal/llm"
)

// escapeAll writes s as a JSON string with every character escaped as
// \uXXXX (surrogate pairs outside the BMP) and / as \/: the escapes
// jsonString decodes itself, on every character.
func escapeAll(s string) []byte {
	b := []byte{'"'}
	for _, r := range s {
		switch {
		case r == '/':
			b = append(b, `\/`...)
		case r >= 0x10000:
			r -= 0x10000
			b = fmt.Appendf(b, `\u%04x\u%04X`, 0xD800+(r>>10), 0xDC00+(r&0x3FF))
		default:
			b = fmt.Appendf(b, `\u%04x`, r)
		}
	}
	return append(b, '"')
}

// encodings are the ways a text reaches the estimate: as itself, and as
// JSON strings the way gatehouse, encoding/json (which escapes <, >, &
// and invalid UTF-8) and a client escaping everything write it.
func encodings(t *testing.T, s string) [][]byte {
	t.Helper()
	std, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return [][]byte{llm.AppendQuote(nil, s), std, escapeAll(s)}
}

// checkSame fails unless the estimator equals the reference on s, read
// directly and through each JSON encoding of it.
func checkSame(t *testing.T, s string) {
	t.Helper()
	if got, want := EstimateText(s), refEstimateText(s); got != want {
		t.Fatalf("EstimateText(%q) = %d, reference %d", s, got, want)
	}
	for _, raw := range encodings(t, s) {
		if got, want := stringTokens(raw), refStringTokens(raw); got != want {
			t.Fatalf("stringTokens(%s) = %d, reference %d", raw, got, want)
		}
	}
}

// TestEstimateEqualsReference: the estimate with its automaton is, on
// every sample of the corpus and on random mixes of the pieces text is
// made of, exactly the estimate as it was (reference_test.go), so that
// no reservation moves with the speed-up.
func TestEstimateEqualsReference(t *testing.T) {
	for _, s := range corpus() {
		checkSame(t, s)
		for _, n := range []int{1, 7, 8, 9, 63, 300} { // every cut of the eight-byte blocks
			for i := 0; i+n <= len(s); i += 97 {
				checkSame(t, strings.ToValidUTF8(s[i:i+n], ""))
			}
		}
	}
	pieces := []string{" ", "  ", "   ", "\n", "\r\n", "\t", " \n ", "a", "the", "word", "Word", "WORD", "supercalifragilistic",
		"internationalization", "x", ".", ",", "(", ")", "\"", "\\", "/", "<", "&", "1", "12", "12345", "1234567890", "é", "naïve",
		"Ünïcödé", "日本", "Привет", "A", "camelCase", "XMLHttp", "-", "__", "...", "\u2028", "\u0085", "😀", "\x00", "\x7f"}
	rng := rand.New(rand.NewPCG(3, 4))
	for range 30000 {
		var b strings.Builder
		for range rng.IntN(24) {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		checkSame(t, b.String())
	}
}

// TestHighRowsEqualReference: long runs that keep the automaton in its
// highest rows for whole eight-byte blocks (punctuation, digits, long
// words, spaces after a newline), where the scan's sum of packed entries
// holds the most row bits below the half-tokens, estimate as before.
func TestHighRowsEqualReference(t *testing.T) {
	for _, unit := range []string{"!", "?!", ".,", "9", "a", "aB", "\n ", "\n  ", " ", "-_", "a!"} {
		for n := 1; n <= 80; n++ {
			s := strings.Repeat(unit, n)
			checkSame(t, s)
			checkSame(t, "x"+s)
			checkSame(t, s+"é"+s)
		}
	}
}

// TestEstimateChatEqualsReference: whole requests, with tools, images and
// tool calls, estimate as before.
func TestEstimateChatEqualsReference(t *testing.T) {
	text := func(s string) []llm.Part { return []llm.Part{{Type: llm.PartText, Text: s}} }
	var ps []*llm.ChatParams
	for _, s := range corpus() {
		ps = append(ps, &llm.ChatParams{Model: "m", Messages: []llm.Message{{Role: "system", Content: text("Be brief.")}, {Role: "user", Content: text(s)}}})
	}
	ps = append(ps, &llm.ChatParams{Model: "m", Messages: []llm.Message{
		{Role: "user", Content: []llm.Part{{Type: llm.PartText, Text: "What is this?"}, {Type: llm.PartImageURL, ImageURL: "data:image/png;base64,AAAA"}}},
		{Role: "assistant", ToolCalls: []llm.ToolCall{{ID: "c1", Name: "get_weather", Arguments: `{"city":"Zürich","note":"a \"quoted\"\nline"}`}}},
		{Role: "tool", ToolCallID: "c1", Content: text(`{"temp":21,"sky":"clear"}`)},
	}, Tools: []llm.Tool{{Name: "get_weather", Description: "Current weather for a city, by name.",
		Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string","description":"e.g. \"Paris\" — or 東京"}},"required":["city"]}`)}}})
	for _, p := range ps {
		r := chatBody(t, p)
		if got, want := EstimateChat(r.Messages, r.Tools), refEstimateChat(r.Messages, r.Tools); got != want {
			t.Fatalf("EstimateChat(%s, %s) = %d, reference %d", r.Messages, r.Tools, got, want)
		}
		if got, want := rawTokens(r.Tools), refRawTokens(r.Tools); got != want {
			t.Fatalf("rawTokens(%s) = %d, reference %d", r.Tools, got, want)
		}
	}
}

// FuzzEstimateEqualsReference: on any text, and on any bytes taken as
// the body of a JSON string (escapes cut short, invalid UTF-8 and all),
// the estimate equals the reference.
func FuzzEstimateEqualsReference(f *testing.F) {
	for _, s := range []string{"", "the quick brown fox", "  camelCase\n\tfoo_bar(x) 12345", "naïve 日本 😀 \u2028 end",
		prose[:200], code[:200], `a\"b\\c\/d\u00e9\ud83d\ude00\u12`, "tail\\", "\xff\\\xc3x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := EstimateText(s), refEstimateText(s); got != want {
			t.Fatalf("EstimateText(%q) = %d, reference %d", s, got, want)
		}
		raw := []byte(`"` + s + `"`)
		if got, want := stringTokens(raw), refStringTokens(raw); got != want {
			t.Fatalf("stringTokens(%q) = %d, reference %d", raw, got, want)
		}
		if got, want := rawTokens([]byte(s)), refRawTokens([]byte(s)); got != want {
			t.Fatalf("rawTokens(%q) = %d, reference %d", s, got, want)
		}
		if !utf8.ValidString(s) {
			return
		}
		for _, raw := range encodings(t, s) {
			if got, want := stringTokens(raw), refStringTokens(raw); got != want {
				t.Fatalf("stringTokens(%s) = %d, reference %d", raw, got, want)
			}
		}
	})
}

// randomMessages is a messages array of random shape: members in any
// order, contents as strings and as parts, tool calls, members the
// estimate skips (holding "content" keys of their own), and whitespace
// between every token when indented.
func randomMessages(rng *rand.Rand, texts []string) []byte {
	text := func() string { return texts[rng.IntN(len(texts))] }
	var ms []any
	for range 1 + rng.IntN(4) {
		m := map[string]any{"role": []string{"system", "user", "assistant", "tool"}[rng.IntN(4)]}
		switch rng.IntN(4) {
		case 0:
			m["content"] = text()
		case 1:
			m["content"] = []any{map[string]any{"type": "text", "text": text()}, map[string]any{"type": "image_url", "image_url": map[string]any{"url": "data:,x"}}}
		case 2:
			m["content"] = nil
			m["tool_calls"] = []any{map[string]any{"id": "c1", "type": "function", "function": map[string]any{"name": "f", "arguments": `{"q":"` + text() + `"}`}}}
		case 3:
			m["content"] = text()
			m["name"] = "ann"
			m["metadata"] = map[string]any{"content": text(), "n": []any{1, 2.5, true, nil}}
		}
		ms = append(ms, m)
	}
	b, err := json.Marshal(ms)
	if err != nil {
		panic(err)
	}
	if rng.IntN(2) == 0 {
		var ind bytes.Buffer
		if err := json.Indent(&ind, b, " ", "\t"); err != nil {
			panic(err)
		}
		b = ind.Bytes()
	}
	return b
}

// randomTools is a tools array: functions with and without a schema,
// members in any order, repeated "function" and "parameters" members
// (the first counts), and members the estimate skips.
func randomTools(rng *rand.Rand, texts []string) []byte {
	if rng.IntN(4) == 0 {
		return nil
	}
	q := func(s string) string { return string(llm.AppendQuote(nil, s)) }
	members := []string{`"type":"function"`, `"strict":true`, `"x":{"description":"skipped","parameters":{}}`}
	var tools []string
	for range 1 + rng.IntN(3) {
		fn := []string{`"name":` + q("get_"+strings.Repeat("x", rng.IntN(12))), `"description":` + q(texts[rng.IntN(len(texts))])}
		for range rng.IntN(3) {
			fn = append(fn, `"parameters":{"type":"object","properties":{"q":{"type":"string","description":`+q(texts[rng.IntN(len(texts))])+`}},"required":["q"]}`)
		}
		if rng.IntN(3) == 0 {
			fn = append(fn, `"description":7`)
		}
		rng.Shuffle(len(fn), func(i, j int) { fn[i], fn[j] = fn[j], fn[i] })
		tool := append([]string{`"function":{` + strings.Join(fn, ", ") + `}`}, members[:rng.IntN(len(members)+1)]...)
		if rng.IntN(3) == 0 {
			tool = append(tool, `"function":{"name":"second"}`)
		}
		rng.Shuffle(len(tool), func(i, j int) { tool[i], tool[j] = tool[j], tool[i] })
		tools = append(tools, "{"+strings.Join(tool, ",")+"}")
	}
	return []byte("[\n" + strings.Join(tools, " ,\n") + "]")
}

// TestEstimateChatWalkEqualsReference: EstimateChat walks a message's
// members itself; on messages of every shape it estimates as the
// reference, which walked them with llm.Walker.
func TestEstimateChatWalkEqualsReference(t *testing.T) {
	var texts []string
	for _, s := range corpus() {
		texts = append(texts, s, s[:len(s)/3])
	}
	texts = append(texts, "", "x", `a "quoted" \ word`, "naïve 😀\n")
	rng := rand.New(rand.NewPCG(5, 6))
	for range 2000 {
		b, tools := randomMessages(rng, texts), randomTools(rng, texts)
		if got, want := EstimateChat(b, tools), refEstimateChat(b, tools); got != want {
			t.Fatalf("EstimateChat(%s, %s) = %d, reference %d", b, tools, got, want)
		}
	}
}

// FuzzEstimateChatEqualsReference: on any valid JSON as the messages
// and tools arrays, the estimate equals the reference; on anything else
// it ends.
func FuzzEstimateChatEqualsReference(f *testing.F) {
	f.Add([]byte(`[{"role":"user","content":"hi \u00e9\ud83d\ude00 \"x\""}]`), []byte(`[{"type":"function"}]`))
	f.Add([]byte(`[{"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url"}]}, 3, "s", [{"content":"x"}]]`), []byte(nil))
	f.Add([]byte(` [ { "content" : "a\\" , "role" : "x" , "content" : { "content" : "b" } } ] `),
		[]byte(`[{"function":{"name":"f","parameters":{"a":[1,"b"]},"parameters":{}}},{"function":3,"function":{"name":"g"}}]`))
	f.Add([]byte(`[{"role":"assistant","tool_calls":[{"function":{"name":"f","arguments":"{\"a\":1}"}},7]}]`), []byte(`{}`))
	f.Add([]byte(`[{"role":"user","content":"a \"b\""},{"role":"tool","content":"c","role":"x"},{"role":"assistant","content":null}]`), []byte(nil))
	f.Fuzz(func(t *testing.T, messages, tools []byte) {
		got := EstimateChat(messages, tools)
		if got < ReplyPriming {
			t.Fatalf("estimate %d below the priming", got)
		}
		if !json.Valid(messages) || (tools != nil && !json.Valid(tools)) {
			return
		}
		if want := refEstimateChat(messages, tools); got != want {
			t.Fatalf("EstimateChat(%s, %s) = %d, reference %d", messages, tools, got, want)
		}
	})
}

// BenchmarkEstimateVsReference estimates the same requests with the
// estimator and with its reference (the estimator before the automaton),
// so that the two are measured in one run: a 300-byte prompt, the code
// and Chinese samples, and a tool call with its tool's schema.
func BenchmarkEstimateVsReference(b *testing.B) {
	text := func(s string) []llm.Part { return []llm.Part{{Type: llm.PartText, Text: s}} }
	tools := &llm.ChatParams{Model: "m", Messages: []llm.Message{
		{Role: "user", Content: text("Weather in Paris and in Zürich, please.")},
		{Role: "assistant", ToolCalls: []llm.ToolCall{{ID: "c1", Name: "get_weather", Arguments: `{"city":"Paris","unit":"celsius"}`}}},
		{Role: "tool", ToolCallID: "c1", Content: text(`{"temp":21,"sky":"clear"}`)},
	}, Tools: []llm.Tool{{Name: "get_weather", Description: "Current weather for a city, by name.",
		Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string","description":"The city's name, in English."},"unit":{"type":"string","enum":["celsius","fahrenheit"]}},"required":["city"]}`)}}}
	cases := []struct {
		name string
		p    *llm.ChatParams
	}{
		{"prompt300", &llm.ChatParams{Model: "m", Messages: []llm.Message{{Role: "user", Content: text(benchPrompt)}}}},
		{"code", &llm.ChatParams{Model: "m", Messages: []llm.Message{{Role: "user", Content: text(code)}}}},
		{"chinese", &llm.ChatParams{Model: "m", Messages: []llm.Message{{Role: "user", Content: text(chinese)}}}},
		{"tools", tools},
	}
	for _, c := range cases {
		r := chatBody(b, c.p)
		for _, f := range []struct {
			name     string
			estimate func(messages, tools []byte) int
		}{{"new", EstimateChat}, {"reference", refEstimateChat}} {
			b.Run(c.name+"/"+f.name, func(b *testing.B) {
				b.ReportAllocs()
				b.SetBytes(int64(len(r.Messages) + len(r.Tools)))
				for b.Loop() {
					f.estimate(r.Messages, r.Tools)
				}
			})
		}
	}
}

// TestRoleAndContentEqualsReference: messages whose members start as the
// SDKs write them ({"role":"user","content":"...) are read by
// roleAndContent, and those that only nearly do by the walk of members;
// each estimates as the reference. took says which messages the fast
// path must read whole: a test of it that never ran would pass too.
func TestRoleAndContentEqualsReference(t *testing.T) {
	quoted, err := json.Marshal(prose[:200])
	if err != nil {
		t.Fatal(err)
	}
	text := `Hello, \"world\" \\ \n naïve 😀 \u00e9 ` + string(quoted[1:len(quoted)-1])
	for _, c := range []struct {
		message string
		took    bool // roleAndContent reads role and content
	}{
		{`{"role":"user","content":"` + text + `"}`, true},
		{`{"role":"system","content":"You are terse."}`, true},
		{`{"role":"assistant","content":"","name":"ann"}`, true},
		{`{"role":"tool","content":"{\"temp\":21}","tool_call_id":"c1"}`, true},
		{`{"role":"developer","content":"x","content":"again"}`, true},
		{`{"role":"user"}`, false},
		{`{"role":"user","name":"ann","content":"x"}`, false},
		{`{"role":"user","content":[{"type":"text","text":"x"}]}`, false},
		{`{"role":"user","content":null}`, false},
		{`{"role":"us\u0065r","content":"x"}`, false},
		{`{"role":"critic","content":"x"}`, false},
		{`{"role":"User","content":"x"}`, false},
		{`{"role":1,"content":"x"}`, false},
		{`{"role" :"user","content":"x"}`, false},
		{`{ "role":"user","content":"x"}`, false},
		{`{"role":"user", "content":"x"}`, false},
		{`{"content":"x","role":"user"}`, false},
		{`{"role":"user","content":"cut`, false},
		{`{"role":"user`, false},
		{`{"role":"`, false},
		{`{}`, false},
	} {
		b := []byte("[" + c.message + "]")
		if c.took && !json.Valid(b) {
			t.Errorf("%s is no valid JSON", c.message)
		}
		// Cut messages need only end (as in FuzzEstimateChatEqualsReference).
		if got, want := EstimateChat(b, nil), refEstimateChat(b, nil); got != want && json.Valid(b) {
			t.Errorf("EstimateChat(%s) = %d, reference %d", b, got, want)
		}
		o := object{b: b, i: 2}
		o.roleAndContent()
		if took := o.i > 2 && b[o.i-1] == '"' && bytes.Contains(b[2:o.i], []byte(`"content":"`)); took != c.took {
			t.Errorf("roleAndContent(%s) read to %d: took both %v, want %v", c.message, o.i, took, c.took)
		}
	}
}
