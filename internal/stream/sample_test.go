package stream

import (
	"bytes"
	"encoding/json"
	"testing"

	"gatehouse/internal/llm"
)

// chunksText is the text of newline-separated chat.completion.chunk JSON
// objects as encoding/json reads it (lines that do not decode are
// skipped): the reference appendText is held to.
func chunksText(dst []byte, chunks []byte) []byte {
	for line := range bytes.SplitSeq(chunks, []byte{'\n'}) {
		var c llm.ChatChunk
		if len(line) == 0 || json.Unmarshal(line, &c) != nil {
			continue
		}
		for i := range c.Choices {
			d := &c.Choices[i].Delta
			if d.Content != nil {
				dst = append(dst, *d.Content...)
			}
			if d.Refusal != nil {
				dst = append(dst, *d.Refusal...)
			}
			dst = append(dst, d.ReasoningContent...)
			for _, tc := range d.ToolCalls {
				dst = append(dst, tc.Function.Name...)
				dst = append(dst, tc.Function.Arguments...)
			}
		}
	}
	return dst
}

// The text kept of a chunk is what chunksText reads of it (the text
// counted when no usage comes), for every kind of delta.
func TestAppendTextKeepsWhatJSONReads(t *testing.T) {
	chunks := []string{
		`{"id":"c","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}`,
		`{"choices":[{"index":0,"delta":{"content":"Hi \"there\"\n\u00e9\ud83d\ude00 \/"}}]}`,
		`{"choices":[{"index":0,"delta":{"content":null,"refusal":"No."}}]}`,
		`{"choices":[{"index":0,"delta":{"reasoning_content":"think"}}]}`,
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"t","type":"function","function":{"name":"get","arguments":"{\"a\""}},{"index":1,"function":{"arguments":":1}"}}]}}]}`,
		`{"choices":[{"index":0,"delta":{"content":"a"}},{"index":1,"delta":{"content":"b"}}]}`,
		`{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":null}`,
		`{"choices":[]}`,
		`{"choices":[{"index":0,"delta":{"content":"x","refusal":"y"}}]}`,
		`{"choices":[{"index":0,"delta":{"content":"x"},"finish_reason":"]"},{"index":1,"delta":{"content":"z"}}]}`,
		`{"choices":[{"index":0,"delta":{"content":"cut`,
		`not json`,
		`{"choices":[{"delta":{"content":7}}]}`,
	}
	for _, c := range chunks {
		got := SampleText(appendText(nil, []byte(c)))
		want := string(chunksText(nil, []byte(c)))
		if got != want {
			t.Errorf("%s:\n text %q, want %q", c, got, want)
		}
	}
}

func BenchmarkAppendText(b *testing.B) {
	data := []byte(`{"id":"chatcmpl-123","object":"chat.completion.chunk","created":1694268190,"model":"gpt-4o-mini","system_fingerprint":"fp_44709d6fcb","choices":[{"index":0,"delta":{"content":" world"},"logprobs":null,"finish_reason":null}]}`)
	b.ReportAllocs()
	buf := make([]byte, 0, 64)
	for b.Loop() {
		buf = appendText(buf[:0], data)
	}
}

// BenchmarkChoicesOf is what every chunk cost the sample before it kept
// text only (a search, no walk): the ratio to BenchmarkAppendText is the
// price of the smaller sample.
func BenchmarkChoicesOf(b *testing.B) {
	data := []byte(`{"id":"chatcmpl-123","object":"chat.completion.chunk","created":1694268190,"model":"gpt-4o-mini","system_fingerprint":"fp_44709d6fcb","choices":[{"index":0,"delta":{"content":" world"},"logprobs":null,"finish_reason":null}]}`)
	b.ReportAllocs()
	buf := make([]byte, 0, 256)
	for b.Loop() {
		buf = append(append(append(buf[:0], '{'), choicesOf(data)...), '\n')
	}
}

// FuzzAppendText: any chunk from upstream gives lines that are each one
// whole JSON string (its escapes may still be wrong: SampleText skips
// such a line). (Where it reads the same text as chunksText is
// the table above: encoding/json also matches keys in another case and
// takes the last of repeated keys, which servers do not write.)
func FuzzAppendText(f *testing.F) {
	f.Add(`{"choices":[{"index":0,"delta":{"content":"Hi"}}]}`)
	f.Add(`{"choices":[{"index":0,"delta":{"tool_calls":[{"function":{"name":"f","arguments":"{}"}}]}}]}`)
	f.Add(`{"choices":[{"index":0,"delta":{"content":"a\"`)
	f.Fuzz(func(t *testing.T, chunk string) {
		sample := appendText(nil, []byte(chunk))
		for line := range bytes.SplitSeq(sample, []byte{'\n'}) {
			if len(line) == 0 {
				continue
			}
			if line[0] != '"' || llm.StringEnd(line, 0) != len(line) || line[len(line)-1] != '"' {
				t.Fatalf("line %q of %q is not one JSON string", line, chunk)
			}
		}
	})
}

// appendChoicesTextReference is appendChoicesText before its text-only
// path appended without appendString's checks (main at 0c5903b): the
// sample the relay keeps must stay what it was, byte for byte.
func appendChoicesTextReference(dst, v []byte) []byte {
	if !bytes.HasPrefix(v, []byte(choicesKey)) {
		return dst
	}
	v = v[len(choicesKey):]
	if text, ok := onlyContent(v); ok {
		return appendString(dst, text)
	}
	choices := llm.Walk(v, '[')
	for _, c, ok := choices.Next(); ok; _, c, ok = choices.Next() {
		if d := member(c, `"delta"`); d != nil {
			dst = appendDeltaText(dst, d)
		}
	}
	return dst
}

func checkSampleMatchesReference(t *testing.T, prior, chunk []byte) {
	t.Helper()
	var start []byte
	if len(prior) > 0 {
		start = append([]byte(nil), prior...)
	}
	got := appendChoicesText(start, choicesOf(chunk))
	want := appendChoicesTextReference(append([]byte(nil), prior...), choicesOf(chunk))
	if !bytes.Equal(got, want) {
		t.Fatalf("after %q, chunk %q:\n sample %q\n want   %q", prior, chunk, got, want)
	}
}

var sampleSeeds = []string{
	`{"id":"c","choices":[{"index":0,"delta":{"content":" world"},"logprobs":null,"finish_reason":null}],"usage":null}`,
	`{"choices":[{"index":0,"delta":{"content":""}}]}`,
	`{"choices":[{"index":0,"delta":{"content":"a\nb"}}]}`,
	"{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\nb\"}}]}", // a raw line break: not JSON, not kept
	`{"choices":[{"index":0,"delta":{"content":"a\\"}}]}`,
	`{"choices":[{"index":0,"delta":{"content":"a\"}}]}`,
	`{"choices":[{"index":0,"delta":{"content":"cut`,
	`{"choices":[{"index":0,"delta":{"content":"x"}},{"index":1,"delta":{"content":"y"}}]}`,
	`{"choices":[{"index":0,"delta":{"content":"x"}}],"z":"\"delta\""}`,
}

// The sample is what the reference kept, from an empty sample and after
// earlier text.
func TestSampleMatchesReference(t *testing.T) {
	for _, c := range sampleSeeds {
		for _, prior := range []string{"", `"earlier"` + "\n"} {
			checkSampleMatchesReference(t, []byte(prior), []byte(c))
		}
	}
}

func FuzzSampleMatchesReference(f *testing.F) {
	for _, c := range sampleSeeds {
		f.Add([]byte(""), []byte(c))
		f.Add([]byte(`"x"`+"\n"), []byte(c))
	}
	f.Fuzz(func(t *testing.T, prior, chunk []byte) { checkSampleMatchesReference(t, prior, chunk) })
}
