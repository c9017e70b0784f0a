package sqlite

import (
	"strings"
	"testing"
)

// TestSameText: sameText agrees with == for strings that share their
// bytes, strings equal in other memory, a string and its own prefix,
// empty strings, and strings that differ.
func TestSameText(t *testing.T) {
	s := "key-1234"
	other := strings.Clone(s)
	for _, c := range [][2]string{{s, s}, {s, other}, {s, s[:3]}, {s[:0], ""}, {"", s}, {s, "key-1235"}, {s[1:], "ey-1234"}} {
		if got, want := sameText(c[0], c[1]), c[0] == c[1]; got != want {
			t.Errorf("sameText(%q, %q) = %v, want %v", c[0], c[1], got, want)
		}
	}
}
