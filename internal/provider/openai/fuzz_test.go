package openai

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"

	"gatehouse/internal/llm"
)

// FuzzStream feeds arbitrary bytes to the OpenAI stream decoder as a 200
// text/event-stream answer: it ends with an error or io.EOF, never panics
// or loops, and its edits (the usage plumbing it hides) never make JSON
// invalid. A chunk that is not JSON is relayed as it came, as a plain
// proxy would: the fast path does not validate what it does not edit.
func FuzzStream(f *testing.F) {
	fixture, err := os.ReadFile("testdata/stream_with_usage.sse")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(fixture, false)
	f.Add(fixture, true)
	f.Add([]byte("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"}}]}\n\ndata: [DONE]\n\n"), false)
	f.Add([]byte("event: error\ndata: {\"error\":{\"message\":\"overloaded\"}}\n\n"), true)
	f.Fuzz(func(t *testing.T, body []byte, includeUsage bool) {
		reqBody := `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`
		if includeUsage {
			reqBody = `{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`
		}
		st, err := Adapter{}.Stream(streamResponse(bytes.NewReader(body)), deployment(), chatReq(t, reqBody))
		if err != nil {
			return // refused at the start: an error the client gets in its dialect
		}
		defer st.Close()
		invalidIn := false // some event of the input is not JSON
		in := llm.NewReader(bytes.NewReader(body))
		for {
			ev, err := in.Next()
			if err != nil {
				break
			}
			invalidIn = invalidIn || !json.Valid(ev.Data)
		}
		for i := 0; ; i++ {
			c, err := st.Next()
			if err != nil {
				return
			}
			if !json.Valid(c.Data) && !invalidIn {
				t.Fatalf("chunk %q is not JSON, yet every event sent was", c.Data)
			}
			if i > len(body)+10 {
				t.Fatal("more chunks than input bytes")
			}
		}
	})
}
