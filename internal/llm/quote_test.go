package llm

import "testing"

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
