package llm

import (
	"bytes"
	"testing"
)

// lineEndReference is how readLine found a line's end before lineEnd:
// the searches lineEnd makes must agree with it on every input.
func lineEndReference(b []byte) int { return bytes.IndexAny(b, "\r\n") }

// hasBlankLineReference is HasEvent's test before hasBlankLine.
func hasBlankLineReference(b []byte) bool {
	return bytes.Contains(b, []byte("\n\n")) || bytes.Contains(b, []byte("\r\n\r\n")) || bytes.Contains(b, []byte("\r\r"))
}

var lineScanSeeds = []string{
	"", "\n", "\r", "\r\n", "\n\r", "\n\n", "\r\r", "\r\n\r\n", "\n\r\n", "\r\n\r", "\r\n\n", "\n\r\r",
	"data: x", "data: x\n", "data: x\r", "data: x\r\n\r\n", "data: x\n\ndata: y\n\n",
	"data: x\r\rdata: y\r\r", "data: x\r\ndata: y\r\n", ": ping\n\n", "data: a\rb\nc",
	"data: " + chunk2 + "\n\n", "data: " + chunk4 + "\r\n\r\n", "data: " + chunk1 + "\r",
	"\xef\xbb\xbfdata: x\n\n",
}

func TestLineScanMatchesReference(t *testing.T) {
	for _, s := range lineScanSeeds {
		checkLineScan(t, []byte(s))
	}
}

func FuzzLineScan(f *testing.F) {
	for _, s := range lineScanSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) { checkLineScan(t, b) })
}

// checkLineScan holds lineEnd and hasBlankLine to their references on b
// and on each of its suffixes (the buffer holds any part of a stream).
func checkLineScan(t *testing.T, b []byte) {
	t.Helper()
	for i := range len(b) + 1 {
		s := b[i:]
		if got, want := lineEnd(s), lineEndReference(s); got != want {
			t.Fatalf("lineEnd(%q) = %d, want %d", s, got, want)
		}
		if got, want := hasBlankLine(s), hasBlankLineReference(s); got != want {
			t.Fatalf("hasBlankLine(%q) = %v, want %v", s, got, want)
		}
	}
}
