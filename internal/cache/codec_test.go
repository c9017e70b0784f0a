package cache

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
	"time"

	"gatehouse/internal/llm"
)

func TestCodecRoundTripsEveryByte(t *testing.T) {
	at := time.UnixMicro(1790000000123456)
	chunks := upstreamChunks()
	chunks = append(chunks, llm.Chunk{Data: []byte("{\"x\":\"<a & b>\xff\"}"), Usage: &llm.Usage{PromptTokens: 1}})
	for _, e := range []*Entry{
		{Project: "qa", Chunks: chunks, Usage: llm.Usage{PromptTokens: 3, CompletionTokens: 4, TotalTokens: 7, CachedTokens: 1,
			ReasoningTokens: 2}, Cost: 1234, ServedModel: "m-1", Provider: "up", Deployment: "up/m-1", Expires: at},
		{Project: "qa", Completion: []byte(`{"id":"x","choices":[]}`), Cost: -1, Expires: at},
	} {
		b, err := Encode(e)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Decode(b)
		if err != nil {
			t.Fatal(err)
		}
		if !got.Expires.Equal(e.Expires) {
			t.Fatalf("expires %v, want %v", got.Expires, e.Expires)
		}
		got.Expires = e.Expires
		if !reflect.DeepEqual(got, e) {
			t.Fatalf("decoded\n%+v\nwant\n%+v", got, e)
		}
		// Every truncation and a wrong version fail cleanly.
		for n := range len(b) {
			if _, err := Decode(b[:n]); err == nil {
				t.Fatalf("a value cut to %d of %d bytes decoded", n, len(b))
			}
		}
		bad := append([]byte{codecVersion + 1}, b[1:]...)
		if _, err := Decode(bad); err == nil {
			t.Fatal("an unknown version decoded")
		}
	}
}

// FuzzDecode: whatever a shared tier hands back (a corrupted value, one
// written by another version) is refused or decoded, never a panic; what
// decodes encodes and decodes again to the same entry.
func FuzzDecode(f *testing.F) {
	at := time.UnixMicro(1790000000123456)
	for _, e := range []*Entry{
		{Project: "qa", Chunks: upstreamChunks(), Usage: llm.Usage{PromptTokens: 3, TotalTokens: 3}, Cost: 12, Provider: "up", Expires: at},
		{Project: "qa", Completion: []byte(`{"id":"x","choices":[]}`), Expires: at},
	} {
		b, err := Encode(e)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := Decode(b)
		if err != nil {
			return
		}
		again, err := Encode(e)
		if err != nil {
			t.Fatalf("a decoded entry does not encode: %v", err)
		}
		e2, err := Decode(again)
		if err != nil {
			t.Fatalf("re-encoded entry does not decode: %v", err)
		}
		e2.Expires = e.Expires
		if !reflect.DeepEqual(e, e2) {
			t.Fatalf("round trip changed the entry:\n%+v\n%+v", e, e2)
		}
	})
}

// TestDecodeBounded: a value whose deflated fields expand past the bound
// is refused after reading the bound, not inflated whole.
func TestDecodeBounded(t *testing.T) {
	e := &Entry{Project: "qa", Completion: bytes.Repeat([]byte{'a'}, 1<<20), Expires: time.UnixMicro(1790000000123456)}
	b, err := Encode(e)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > 64<<10 {
		t.Fatalf("a repetitive megabyte deflated to %d bytes; the test needs a small value that expands", len(b))
	}
	if _, err := decodeWithin(b, 2<<20); err != nil {
		t.Fatalf("an entry within the bound: %v", err)
	}
	if _, err := decodeWithin(b, 64<<10); err == nil || !strings.Contains(err.Error(), "over") {
		t.Fatalf("an entry expanding past the bound: err = %v, want the bound's error", err)
	}
}
