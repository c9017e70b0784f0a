package openai

import (
	"bytes"
	"io"
	"os"
	"testing"

	"gatehouse/internal/llm"
)

// BenchmarkStream measures decoding one whole stream the way the relay
// does when the gateway asked for usage the client did not: every chunk
// is scanned and its "usage":null cut.
func BenchmarkStream(b *testing.B) {
	fixture, err := os.ReadFile("testdata/stream_with_usage.sse")
	if err != nil {
		b.Fatal(err)
	}
	req, err := llm.ParseChatRequest([]byte(`{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		b.Fatal(err)
	}
	d := deployment()
	b.ReportAllocs()
	b.SetBytes(int64(len(fixture)))
	for b.Loop() {
		s, _ := Adapter{}.Stream(streamResponse(bytes.NewReader(fixture)), d, req)
		for {
			if _, err := s.Next(); err != nil {
				if err != io.EOF {
					b.Fatal(err)
				}
				break
			}
		}
	}
}
