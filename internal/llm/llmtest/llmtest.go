// Package llmtest holds what the tests of the wire-format packages (the
// Messages and Responses dialects) share: golden files and OpenAI stream
// fixtures read into the chunks an adapter hands the relay.
//
// It imports the testing package and is meant only for tests.
package llmtest

import (
	"bytes"
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
