package responses

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
)

// BenchmarkReadNative: checking a backend's non-streamed answer, once
// per native Responses request.
func BenchmarkReadNative(b *testing.B) {
	body, err := os.ReadFile("testdata/native/reasoning.json")
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, ok, err := ReadNative(body, "p"); err != nil || !ok {
			b.Fatal(ok, err)
		}
	}
}

// BenchmarkNativeStream: reading a backend's event stream, with 200 text
// deltas between the recorded stream's opening and closing events.
func BenchmarkNativeStream(b *testing.B) {
	rec, err := os.ReadFile("testdata/native/text.sse")
	if err != nil {
		b.Fatal(err)
	}
	head, tail, ok := strings.Cut(string(rec), "event: response.output_text.done")
	if !ok {
		b.Fatal("the recording has no response.output_text.done")
	}
	delta := "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"sequence_number\":5,\"item_id\":\"msg_67c9fdcf37fc8190\",\"output_index\":0,\"content_index\":0,\"delta\":\" word\"}\n\n"
	body := []byte(head + strings.Repeat(delta, 200) + "event: response.output_text.done" + tail + "\n\n")
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		st := NewNativeStream(&http.Response{Body: io.NopCloser(bytes.NewReader(body))})
		for {
			_, err := st.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
		}
	}
}
