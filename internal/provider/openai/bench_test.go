package openai

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
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

// BenchmarkCompletion reads a typical non-streamed answer; "valid" is
// json.Valid alone, the second walk the read made before its usage walk
// took over the check, for comparison.
func BenchmarkCompletion(b *testing.B) {
	body := []byte(`{"id":"chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG","object":"chat.completion","created":1741570283,"model":"gpt-4o-2024-08-06","choices":[{"index":0,"message":{"role":"assistant","content":"The image shows a wooden boardwalk path running through a lush green field or meadow. The sky is bright blue with some scattered clouds, giving the scene a serene and peaceful atmosphere. Trees and shrubs are visible in the background.","refusal":null,"annotations":[]},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":1117,"completion_tokens":46,"total_tokens":1163,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}},"service_tier":"default","system_fingerprint":"fp_fc9f1d7035"}`)
	d := deployment()
	b.Run("read", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			resp := &http.Response{StatusCode: 200, ContentLength: int64(len(body)), Body: io.NopCloser(bytes.NewReader(body))}
			if _, err := readCompletion(resp, d); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("valid", func(b *testing.B) {
		for b.Loop() {
			if !json.Valid(body) {
				b.Fatal("invalid")
			}
		}
	})
}
