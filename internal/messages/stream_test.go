package messages

import (
	"bytes"
	"encoding/json"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"gatehouse/internal/llm"
	"gatehouse/internal/llm/llmtest"
)

// readChunks reads an OpenAI stream fixture as the relay gets it.
func readChunks(t *testing.T, path string) []llm.Chunk { return llmtest.ReadChunks(t, path) }

// TestStreamGolden feeds each fixture one chunk at a time and compares
// the Anthropic events, byte-exact. Along the way it checks the timing
// rules: message_start leaves with the first chunk, every content delta
// leaves with the chunk that carried it, and nothing follows message_stop.
func TestStreamGolden(t *testing.T) {
	files, _ := filepath.Glob("testdata/streams/*.openai.sse")
	if len(files) < 5 {
		t.Fatalf("found only %d stream fixtures", len(files))
	}
	for _, in := range files {
		t.Run(filepath.Base(in), func(t *testing.T) {
			s := NewStream("msg_test", "requested-model")
			all := llmtest.Feed(t, s, readChunks(t, in), "message_start", func(i int, all, out []byte) {
				if bytes.Contains(all, []byte("event: message_stop")) && len(out) > 0 {
					t.Errorf("chunk %d wrote after message_stop: %q", i, out)
				}
			})
			all = s.End(all)
			checkSequence(t, all)
			want := golden(t, strings.TrimSuffix(in, ".openai.sse")+".anthropic.sse", all)
			if d := cmp.Diff(string(want), string(all)); d != "" {
				t.Errorf("events (-want +got):\n%s", d)
			}
		})
	}
}

// checkSequence parses the output back and checks Anthropic's grammar:
// message_start, ping, balanced blocks with rising indexes, one
// message_delta, message_stop last; every data line is JSON whose type
// is the event name.
func checkSequence(t *testing.T, b []byte) {
	t.Helper()
	r := llm.NewReader(bytes.NewReader(b))
	var names []string
	open := -1
	next := 0
	for {
		ev, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		var v struct {
			Type  string `json:"type"`
			Index *int   `json:"index"`
		}
		if err := json.Unmarshal(ev.Data, &v); err != nil || v.Type != ev.Name {
			t.Fatalf("event %s has data %s", ev.Name, ev.Data)
		}
		names = append(names, ev.Name)
		switch ev.Name {
		case "content_block_start":
			if open >= 0 || *v.Index != next {
				t.Fatalf("block %d starts while %d is open (next %d)", *v.Index, open, next)
			}
			open, next = *v.Index, next+1
		case "content_block_delta":
			if *v.Index != open {
				t.Fatalf("delta for %d while %d is open", *v.Index, open)
			}
		case "content_block_stop":
			if *v.Index != open {
				t.Fatalf("stop for %d while %d is open", *v.Index, open)
			}
			open = -1
		}
	}
	if len(names) < 4 || names[0] != "message_start" || names[1] != "ping" ||
		names[len(names)-2] != "message_delta" || names[len(names)-1] != "message_stop" || open != -1 {
		t.Fatalf("bad sequence %v", names)
	}
}

func chunkOf(data string, usage *llm.Usage) llm.Chunk {
	return llm.Chunk{Data: []byte(data), Usage: usage, UsageOnly: usage != nil && strings.Contains(data, `"choices":[]`)}
}

// message_delta waits for usage that comes after finish_reason, and goes
// out with the usage chunk, carrying the real counts.
func TestStreamHoldsOnlyTheEndForUsage(t *testing.T) {
	s := NewStream("msg_1", "m")
	out, _ := s.Chunk(nil, chunkOf(`{"choices":[{"index":0,"delta":{"content":"Hi"}}]}`, nil))
	if !bytes.Contains(out, []byte(`"text":"Hi"`)) {
		t.Fatalf("content held: %s", out)
	}
	out, _ = s.Chunk(nil, chunkOf(`{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`, nil))
	if string(out) != "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n" {
		t.Fatalf("finish chunk wrote %q", out)
	}
	u := llm.Usage{PromptTokens: 7, CompletionTokens: 3, TotalTokens: 10}
	out, _ = s.Chunk(nil, chunkOf(`{"choices":[],"usage":{}}`, &u))
	want := "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},\"usage\":{\"input_tokens\":7,\"cache_creation_input_tokens\":0,\"cache_read_input_tokens\":0,\"output_tokens\":3}}\n\n" +
		"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
	if string(out) != want {
		t.Fatalf("usage chunk wrote\n%q\nwant\n%q", out, want)
	}
	if end := s.End(nil); len(end) != 0 {
		t.Fatalf("End after message_stop wrote %q", end)
	}
}

func TestStreamInputTokensHint(t *testing.T) {
	s := NewStream("msg_1", "m")
	s.InputTokens = 321
	out, _ := s.Chunk(nil, chunkOf(`{"model":"up","choices":[{"index":0,"delta":{"role":"assistant"}}]}`, nil))
	if !bytes.Contains(out, []byte(`"model":"up","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":321,`)) {
		t.Fatalf("message_start %s", out)
	}
}

func TestStreamInterleavedToolCallsFail(t *testing.T) {
	s := NewStream("msg_1", "m")
	for _, d := range []string{
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"a","function":{"name":"f","arguments":"{"}}]}}]}`,
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"b","function":{"name":"g","arguments":"{"}}]}}]}`,
	} {
		if _, err := s.Chunk(nil, chunkOf(d, nil)); err != nil {
			t.Fatal(err)
		}
	}
	_, err := s.Chunk(nil, chunkOf(`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"}"}}]}}]}`, nil))
	if e, ok := err.(*llm.Error); !ok || e.Status != 502 {
		t.Fatalf("got %v, want a 502", err)
	}
	if _, err := NewStream("m", "m").Chunk(nil, chunkOf(`{"choices":`, nil)); err == nil {
		t.Fatal("broken JSON accepted")
	}
}

func TestStreamError(t *testing.T) {
	s := NewStream("msg_1", "m")
	_, _ = s.Chunk(nil, chunkOf(`{"choices":[{"index":0,"delta":{"content":"Hi"}}]}`, nil))
	got := string(s.Error(nil, &llm.Error{Status: 529, Message: "Overloaded"}))
	want := "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n"
	if got != want {
		t.Fatalf("got %q want %q", got, want)
	}
	if out, _ := s.Chunk(nil, chunkOf(`{"choices":[{"index":0,"delta":{"content":"more"}}]}`, nil)); len(out) != 0 {
		t.Fatalf("wrote after the error: %q", out)
	}
}
