package llm

import (
	"strings"
	"testing"
)

// TestAppendQuoted: whatever the Quoted, the bytes are AppendQuote's for
// the string given.
func TestAppendQuoted(t *testing.T) {
	for _, s := range []string{"", "key_1", `a"b\c`, "tab\there", "ünï", "\xff", "<html>"} {
		want := string(AppendQuote([]byte("x"), s))
		for _, q := range []Quoted{{}, Quote(s), Quote(s + "-other"), Quote("")} {
			if got := string(AppendQuoted([]byte("x"), q, s)); got != want {
				t.Errorf("AppendQuoted(%+v, %q) = %s, want %s", q, s, got, want)
			}
		}
	}
	if q := Quote("k"); q.json != `"k"` {
		t.Errorf("Quote kept %s", q.json)
	}
}

// TestMembers: a Members' text is the two members as AppendQuote writes
// them, names that need escaping included, and it is given only for the
// names and values it was made of: another value (a renamed key, a copy
// changed afterwards), another member name or a zero Members gives none.
func TestMembers(t *testing.T) {
	const k1, k2 = `,"key":`, `,"project":`
	for _, v := range [][2]string{{"key_1", "proj"}, {`a"b\c`, "tab\there"}, {"ünï\u2028", "\xff<html>"}, {"", "x"}, {"x", ""}} {
		m := MakeMembers(k1, v[0], k2, v[1])
		want := string(AppendQuote(append(AppendQuote([]byte(k1), v[0]), k2...), v[1]))
		if got := m.Text(k1, v[0], k2, v[1]); got != want {
			t.Errorf("Text of %q = %s, want %s", v, got, want)
		}
		// The same values in other strings (not the very ones it was
		// made of) are the same values.
		if got := m.Text(k1, string([]byte(v[0])), k2, string([]byte(v[1]))); got != want {
			t.Errorf("Text of %q in copies = %s, want %s", v, got, want)
		}
		for _, other := range [][4]string{
			{k1, v[0] + "-renamed", k2, v[1]},
			{k1, v[0], k2, v[1] + "-renamed"},
			{k1, v[1], k2, v[0]},
			{`,"id":`, v[0], k2, v[1]},
			{k1, v[0], `,"team":`, v[1]},
		} {
			if other[1] == v[0] && other[3] == v[1] && other[0] == k1 && other[2] == k2 {
				continue // the swap of two equal values
			}
			if got := m.Text(other[0], other[1], other[2], other[3]); got != "" {
				t.Errorf("made of %q, Text(%q) = %s, want none", v, other, got)
			}
		}
	}
	var zero Members
	if got := zero.Text("", "", "", ""); got != "" {
		t.Errorf("zero Members: Text = %q", got)
	}
}

// TestSameString: SameString is ==, whether the strings share their
// bytes or not (a string and its own prefix, empty strings, copies).
func TestSameString(t *testing.T) {
	s := "key-1234"
	other := strings.Clone(s)
	for _, c := range [][2]string{{s, s}, {s, other}, {s, s[:3]}, {s[:0], ""}, {"", s}, {s, "key-1235"},
		{s[1:], "ey-1234"}, {s[:3], s[1:4]}, {"", ""}} {
		if got, want := SameString(c[0], c[1]), c[0] == c[1]; got != want {
			t.Errorf("SameString(%q, %q) = %v, want %v", c[0], c[1], got, want)
		}
		if len(c[0]) == len(c[1]) {
			if got, want := SameData(c[0], c[1]), c[0] == c[1]; got != want {
				t.Errorf("SameData(%q, %q) = %v, want %v", c[0], c[1], got, want)
			}
		}
	}
}
