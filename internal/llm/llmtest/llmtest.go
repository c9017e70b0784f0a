// Package llmtest holds what the tests of the wire-format packages (the
// Messages and Responses dialects) share: golden files and OpenAI stream
// fixtures read into the chunks an adapter hands the relay.
//
// It imports the testing package and is meant only for tests.
package llmtest

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"testing"

	"gatehouse/internal/llm"
)

// Golden returns the golden file's content to compare got with; under
// update it writes got to the file first.
func Golden(t testing.TB, path string, got []byte, update bool) []byte {
	t.Helper()
	if update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return got
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	return want
}

// ReadChunks decodes an OpenAI SSE fixture into the chunks an adapter
// hands the relay, usage marked as the OpenAI adapter marks it.
func ReadChunks(t testing.TB, path string) []llm.Chunk {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r := llm.NewReader(f)
	var out []llm.Chunk
	for {
		ev, err := r.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		if string(ev.Data) == "[DONE]" {
			continue
		}
		c := llm.Chunk{Data: bytes.Clone(ev.Data)}
		if u, ok := llm.UsageOf(c.Data); ok {
			c.Usage = &u
			c.UsageOnly = bytes.Contains(c.Data, []byte(`"choices":[]`))
		}
		out = append(out, c)
	}
}

// Encoder is what a dialect's stream translation does with one chunk
// (stream.Encoder's Chunk, without importing the relay).
type Encoder interface {
	Chunk(b []byte, c llm.Chunk) ([]byte, error)
}

// Feed gives enc the chunks one at a time, as the relay does, and
// returns all it wrote. It checks the rules every translation keeps: the
// first chunk writes first, the event named first; and no text or
// reasoning is held back past the chunk that carried it. after, when
// set, sees what each chunk wrote, for a dialect's own rules.
func Feed(t testing.TB, enc Encoder, chunks []llm.Chunk, first string, after func(i int, all, out []byte)) []byte {
	t.Helper()
	var all []byte
	for i, c := range chunks {
		out, err := enc.Chunk(nil, c)
		if err != nil {
			t.Fatalf("chunk %d: %v", i, err)
		}
		if i == 0 && !bytes.HasPrefix(out, []byte("event: "+first+"\n")) {
			t.Errorf("first chunk wrote %q, want %s at once", out, first)
		}
		var ch llm.ChatChunk
		_ = json.Unmarshal(c.Data, &ch)
		for _, it := range ch.Choices {
			content := ""
			if it.Delta.Content != nil {
				content = *it.Delta.Content
			}
			for _, text := range []string{content, it.Delta.ReasoningContent} {
				if text != "" && !bytes.Contains(out, llm.AppendQuote(nil, text)) {
					t.Errorf("chunk %d: %q held back; wrote %q", i, text, out)
				}
			}
		}
		if after != nil {
			after(i, all, out)
		}
		all = append(all, out...)
	}
	return all
}

// CheckSlot asserts that slot, which a body's builder returned, is the
// usage slot the gateway's walk of body finds, so that setting the cost
// through it gives the very bytes the walk would.
func CheckSlot(t testing.TB, body []byte, slot llm.UsageSlot) {
	t.Helper()
	_, _, walked, err := llm.CheckUsage(body)
	if err != nil {
		t.Fatal(err)
	}
	if walked.End == 0 {
		t.Fatalf("the walk finds no usage object in %s", body)
	}
	if walked != slot {
		t.Errorf("slot %+v, the walk finds %+v", slot, walked)
	}
	want, ok := llm.SetUsageCost(body, "0.000123")
	if !ok {
		t.Fatal("SetUsageCost found no usage object")
	}
	if got := llm.SetUsageCostAt(body, slot, "0.000123"); string(got) != string(want) {
		t.Errorf("cost set through the slot:\n%s\nwant\n%s", got, want)
	}
}
