package llm

import (
	"bytes"
	"fmt"
	"io"
	"testing"
)

// typicalChat is a ~1 KB chat request: a system prompt, a short
// conversation, one tool and the usual sampling options.
var typicalChat = []byte(`{
  "model": "gpt-4o-mini",
  "messages": [
    {"role": "system", "content": "You are a concise assistant for an internal support desk. Answer in at most three sentences, cite the runbook section when you use one, and never invent ticket numbers."},
    {"role": "user", "content": "The nightly export job failed again with \"connection reset by peer\" at 02:14. What should I check first?"},
    {"role": "assistant", "content": "Check whether the database failover ran at that time (runbook §4.2); a reset at that hour usually means the primary moved."},
    {"role": "user", "content": "It did fail over. How do I rerun only the failed partitions?"}
  ],
  "tools": [
    {"type": "function", "function": {"name": "rerun_export", "description": "Rerun export partitions", "parameters": {"type": "object", "properties": {"partitions": {"type": "array", "items": {"type": "integer"}}}, "required": ["partitions"]}}}
  ],
  "temperature": 0.2,
  "top_p": 1,
  "max_completion_tokens": 512,
  "stream": true,
  "stream_options": {"include_usage": true},
  "user": "desk-42"
}`)

func BenchmarkParseChatRequest(b *testing.B) {
	if _, err := ParseChatRequest(typicalChat); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(typicalChat)))
	for b.Loop() {
		if _, err := ParseChatRequest(typicalChat); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkUpstreamBody(b *testing.B) {
	r, err := ParseChatRequest(typicalChat)
	if err != nil {
		b.Fatal(err)
	}
	if out := r.UpstreamBody("gpt-4o-mini-2024-07-18", true); bytes.Equal(out, typicalChat) {
		b.Fatal("no change made")
	}
	b.Run("model", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(typicalChat)))
		for b.Loop() {
			_ = r.UpstreamBody("gpt-4o-mini-2024-07-18", true)
		}
	})
	b.Run("unchanged", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = r.UpstreamBody("gpt-4o-mini", true)
		}
	})
}

func BenchmarkReader(b *testing.B) {
	var stream []byte
	for i := range 100 {
		chunk := fmt.Sprintf(`{"id":"chatcmpl-9x","object":"chat.completion.chunk","created":1731000000,"model":"gpt-4o-mini","system_fingerprint":"fp_1","choices":[{"index":0,"delta":{"content":"token %d "},"logprobs":null,"finish_reason":null}]}`, i)
		stream = AppendEvent(stream, "", []byte(chunk))
	}
	stream = AppendEvent(stream, "", []byte("[DONE]"))
	src := bytes.NewReader(stream)
	b.ReportAllocs()
	b.SetBytes(int64(len(stream)))
	for b.Loop() {
		src.Reset(stream)
		rd := NewReader(src)
		n := 0
		for {
			_, err := rd.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
			n++
		}
		if n != 101 {
			b.Fatalf("read %d events, want 101", n)
		}
	}
}

func BenchmarkAppendOpenAI(b *testing.B) {
	e := BadRequest("messages[0].role", "invalid_type", "Invalid type for 'messages[0].role': expected a string, but got a number instead.")
	buf := make([]byte, 0, 256)
	b.ReportAllocs()
	for b.Loop() {
		buf = e.AppendOpenAI(buf[:0])
	}
}

// BenchmarkBuiltCost is what a translating adapter's answer (encoded by
// NewCompletion: a ~700-byte answer with usage) costs to carry the
// gateway's cost: "walk" finds the usage object by walking the body
// again (SetUsageCost), "slot" puts the cost where NewCompletion says it
// wrote it. Both include the encoding itself.
func BenchmarkBuiltCost(b *testing.B) {
	text := string(bytes.Repeat([]byte("The failover moved the primary; rerun partitions 3 and 7. "), 10))
	build := func(b *testing.B) *Completion {
		c, err := NewCompletion(&ChatCompletion{ID: "chatcmpl-1", Created: 1700000000, Model: "claude-x",
			Choices: []Choice{{Message: ResponseMessage{Content: &text}, FinishReason: "stop"}},
			Usage:   Usage{PromptTokens: 120, CompletionTokens: 140, CachedTokens: 64}.Wire()})
		if err != nil {
			b.Fatal(err)
		}
		return c
	}
	b.Run("walk", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, ok := SetUsageCost(build(b).Body, "0.001250"); !ok {
				b.Fatal("no usage object")
			}
		}
	})
	b.Run("slot", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			c := build(b)
			if c.Slot.End == 0 {
				b.Fatal("no slot")
			}
			SetUsageCostAt(c.Body, c.Slot, "0.001250")
		}
	})
}
