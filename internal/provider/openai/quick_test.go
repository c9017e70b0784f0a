package openai

import (
	"bytes"
	"encoding/binary"
	"os"
	"strings"
	"testing"

	"gatehouse/internal/llm"
)

// plainChunkReference and nullUsageChunkReference are the two quick
// paths as they were before quickChunk took them in one pass: three
// substring searches (Contains "error" twice, Count and Index "usage").
// quickChunk must decide as they did on every input, since what they let
// through is relayed unchecked.
func plainChunkReference(data []byte) bool {
	d := bytes.TrimSpace(data)
	return len(d) >= 2 && d[0] == '{' && d[len(d)-1] == '}' &&
		!bytes.Contains(d, []byte(`"usage"`)) && !bytes.Contains(d, []byte(`"error"`))
}

func nullUsageChunkReference(data []byte, strip bool) ([]byte, bool) {
	d := bytes.TrimSpace(data)
	if len(d) < 2 || d[0] != '{' || d[len(d)-1] != '}' || bytes.Contains(d, []byte(`"error"`)) ||
		bytes.Count(d, []byte(`"usage"`)) != 1 {
		return nil, false
	}
	i := bytes.Index(d, []byte(`,"usage":null`))
	if i < 0 {
		return nil, false
	}
	if !strip {
		return data, true
	}
	return append(d[:i], d[i+len(`,"usage":null`):]...), true
}

func quickChunkReference(data []byte, strip bool) ([]byte, bool) {
	if plainChunkReference(data) {
		return data, true
	}
	return nullUsageChunkReference(data, strip)
}

// quickSeeds are chunks as servers send them and the shapes around the
// quick paths' edges: "usage":null first, last, twice, nested, spaced or
// in a string; "error" as a key, a value or escaped; whitespace and line
// ends around the object; "usage" overlapping itself.
func quickSeeds(t testing.TB) []string {
	seeds := []string{
		`{"id":"a","choices":[],"usage":null}`,
		`{"usage":null,"id":"a","choices":[]}`,
		`{"id":"a","usage":null}`,
		`{"id":"a","choices":[], "usage": null}`,
		`{"id":"a","choices":[],"usage" :null}`,
		`{"id":"a","usage":null,"usage":null}`,
		`{"id":"a","x":{"y":1,"usage":null},"z":2}`,
		`{"id":"a","usage":{"prompt_tokens":1},"x":{"usage":null}}`,
		`{"id":"a","usage":null,"error":{"message":"x"}}`,
		`{"error":{"message":"overloaded","type":"server_error"}}`,
		`{"type":"error","choices":[]}`,
		`{"id":"a","choices":[{"delta":{"content":"say \"usage\" and \"error\""}}]}`,
		`{"id":"a","choices":[{"delta":{"content":"\",\"usage\":null"}}],"usage":null}`,
		`{"x":"\"usage\"","usage":null}`,
		`{"usage"usage":null}`,
		`{"a","usage"usage",usage":null}`,
		`{","usage":null"usage"}`,
		`{"x":1,"usage":nullx}`,
		`{"x":1,"usage":null`,
		`"x":1,"usage":null}`,
		` {"x":1,"usage":null} `,
		"\r\n{\"x\":1,\"usage\":null}\r\n",
		"\t{\"x\":1}\n",
		"{\n\"x\": 1,\r\n\"usage\": null\r}",
		`{}`, `{`, `}`, ``, ` `, `[]`, `null`, `"usage"`, `{"usage"}`, `{"error"}`, `{"usage":null,"usag`,
		`{"id":"a","choices":[{"index":0,"delta":{"content":"\u0022usage\u0022"}}],"usage":null}`,
	}
	fixture, err := os.ReadFile("testdata/stream_with_usage.sse")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(fixture), "\n") {
		if d, ok := strings.CutPrefix(line, "data: "); ok {
			seeds = append(seeds, d)
		}
	}
	return seeds
}

func TestQuickChunkMatchesReference(t *testing.T) {
	for _, s := range quickSeeds(t) {
		checkQuickChunk(t, []byte(s))
		// The same after a member of every length up to two rounds, so
		// that each key falls at each place in the rounds of sixteen
		// bytes quickChunk tests at once, and in the bytes it tests one
		// by one at the end.
		if rest, ok := strings.CutPrefix(s, "{"); ok {
			for k := range 33 {
				checkQuickChunk(t, []byte(`{"p":"`+strings.Repeat("x", k)+`",`+rest))
			}
		}
	}
}

func FuzzQuickChunk(f *testing.F) {
	for _, s := range quickSeeds(f) {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) { checkQuickChunk(t, data) })
}

// checkQuickChunk holds quickChunk to the references, with and without
// strip, on copies of data (both edit it in place when they cut).
func checkQuickChunk(t *testing.T, data []byte) {
	t.Helper()
	for _, strip := range []bool{false, true} {
		got, ok := quickChunk(bytes.Clone(data), strip)
		want, wantOK := quickChunkReference(bytes.Clone(data), strip)
		if ok != wantOK || !bytes.Equal(got, want) {
			t.Fatalf("quickChunk(%q, strip %v) = %q, %v; the reference %q, %v", data, strip, got, ok, want, wantOK)
		}
	}
}

// TestQuickChunkOnRealStream runs a whole recorded stream through the
// adapter and through the reference quick paths followed by the full
// scan: the chunks and the usage are the same.
func TestQuickChunkOnRealStream(t *testing.T) {
	fixture, err := os.ReadFile("testdata/stream_with_usage.sse")
	if err != nil {
		t.Fatal(err)
	}
	for _, include := range []bool{false, true} {
		body := `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`
		if include {
			body = `{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`
		}
		st, err := Adapter{}.Stream(streamResponse(bytes.NewReader(fixture)), deployment(), chatReq(t, body))
		if err != nil {
			t.Fatal(err)
		}
		ref := llm.NewReader(bytes.NewReader(fixture))
		n := 0
		for {
			c, err := st.Next()
			if err != nil {
				break
			}
			ev, err := ref.Next()
			if err != nil {
				t.Fatalf("the adapter relayed more chunks than the stream has events")
			}
			want, quick := quickChunkReference(bytes.Clone(ev.Data), !include)
			if quick && !bytes.Equal(c.Data, want) {
				t.Errorf("include_usage %v, chunk %d: %s, the reference %s", include, n, c.Data, want)
			}
			if !quick && c.Usage == nil {
				t.Errorf("include_usage %v, chunk %d: the reference scans it for usage, the adapter found none", include, n)
			}
			n++
		}
		if n != 4 {
			t.Errorf("include_usage %v: %d chunks, want 4", include, n)
		}
	}
}

// TestZeroBytes checks zeroBytes on every byte value in every place of
// a word, among neighbours of several kinds.
func TestZeroBytes(t *testing.T) {
	for _, fill := range []byte{0, 1, 0x7f, 0x80, 0x81, 0xff, '"'} {
		for pos := range 8 {
			for b := range 256 {
				var w [8]byte
				for k := range w {
					w[k] = fill
				}
				w[pos] = byte(b)
				got := zeroBytes(binary.LittleEndian.Uint64(w[:]))
				for k := range w {
					want := w[k] == 0
					if hit := got>>(8*k)&0xff == 0x80; hit != want || got>>(8*k)&0x7f != 0 {
						t.Fatalf("zeroBytes(%x) = %#x: byte %d", w, got, k)
					}
				}
			}
		}
	}
}

// BenchmarkQuickChunk decides the quick path of an OpenAI chunk with
// "usage":null, as quickChunk does and as the substring searches did.
func BenchmarkQuickChunk(b *testing.B) {
	chunk := []byte(`{"id":"chatcmpl-B9","object":"chat.completion.chunk","created":1741569952,"model":"gpt-4o-mini-2024-07-18","service_tier":"default","system_fingerprint":"fp_0","choices":[{"index":0,"delta":{"content":"Hello"},"logprobs":null,"finish_reason":null}],"usage":null}`)
	for name, f := range map[string]func([]byte, bool) ([]byte, bool){"one pass": quickChunk, "searches": quickChunkReference} {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				if _, ok := f(chunk, false); !ok {
					b.Fatal("not quick")
				}
			}
		})
	}
}
