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

// TestHourComboSame: the rollup's comparison of combinations agrees with
// == for a combination held in other memory and for one differing in any
// one field.
func TestHourComboSame(t *testing.T) {
	c := hourCombo{3600, "k1", "proj", "gpt-4o", "openai"}
	cs := []hourCombo{c,
		{c.hour, strings.Clone(c.keyID), strings.Clone(c.project), strings.Clone(c.model), strings.Clone(c.provider)},
		{7200, c.keyID, c.project, c.model, c.provider}, {c.hour, "k2", c.project, c.model, c.provider},
		{c.hour, c.keyID, "proX", c.model, c.provider}, {c.hour, c.keyID, c.project, "gpt-4", c.provider},
		{c.hour, c.keyID, c.project, c.model, "openaj"}}
	for i := range cs {
		for j := range cs {
			if got, want := cs[i].same(&cs[j]), cs[i] == cs[j]; got != want {
				t.Errorf("%v and %v: same %v, == %v", cs[i], cs[j], got, want)
			}
		}
	}
}
