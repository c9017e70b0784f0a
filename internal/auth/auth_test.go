package auth

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestCredential(t *testing.T) {
	cases := []struct {
		header map[string]string
		want   string
	}{
		{map[string]string{"Authorization": "Bearer gh-abc"}, "gh-abc"},
		{map[string]string{"Authorization": "bearer   gh-abc  "}, "gh-abc"},
		{map[string]string{"Authorization": "BEARER gh-abc"}, "gh-abc"},
		{map[string]string{"Authorization": "Bearer"}, ""},
		{map[string]string{"Authorization": "Basic Zm9v"}, ""},
		{map[string]string{"X-Api-Key": "gh-xyz"}, "gh-xyz"},
		{map[string]string{"Authorization": "Bearer gh-a", "X-Api-Key": "gh-b"}, "gh-a"},
		{map[string]string{}, ""},
	}
	for _, c := range cases {
		r, _ := http.NewRequest(http.MethodGet, "/", nil)
		for k, v := range c.header {
			r.Header.Set(k, v)
		}
		if got := Credential(r); got != c.want {
			t.Errorf("%v: got %q want %q", c.header, got, c.want)
		}
	}
}

// TestTrimmed: trimmed answers as strings.TrimSpace for secrets with
// and without white space around them, ASCII or Unicode (U+0085 and
// U+00A0 begin with 0xC2, U+3000 with 0xE3), control bytes and DEL at
// the ends, and bytes past ASCII that are no space.
func TestTrimmed(t *testing.T) {
	for _, s := range []string{"", "k", "gh-abc", " gh-abc", "gh-abc ", "\tgh-abc\r\n", "\vgh\f",
		"\u0085gh-abc", "gh-abc\u0085", "\u00a0gh-abc\u00a0", "\u3000gh-abc", "gh-abc\u3000", "\u2028x\u205f",
		"\x01gh-abc\x7f", "\x7fgh\x01", "éclé", "gh-é", "é-gh", "\xffgh\xc2", " ", "\u00a0", "a b"} {
		if got, want := trimmed(s), strings.TrimSpace(s); got != want {
			t.Errorf("trimmed(%q) = %q, want %q", s, got, want)
		}
	}
}

// FuzzTrimmed: trimmed is strings.TrimSpace on any input.
func FuzzTrimmed(f *testing.F) {
	for _, s := range []string{"gh-abc", " gh-abc ", "\u00a0gh\u3000", "\x85x\xa0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := trimmed(s), strings.TrimSpace(s); got != want {
			t.Fatalf("trimmed(%q) = %q, want %q", s, got, want)
		}
	})
}

func TestStaticAuthenticate(t *testing.T) {
	s := NewStatic([]StaticKey{
		{Secret: "gh-one", Principal: Principal{KeyID: "k1", Project: "p"}},
		{Secret: "gh-two", Principal: Principal{KeyID: "k2", Models: map[string]bool{"m": true}}},
	})
	req := func(h string) *http.Request {
		r, _ := http.NewRequest(http.MethodGet, "/", nil)
		if h != "" {
			r.Header.Set("Authorization", h)
		}
		return r
	}
	if p, err := s.Authenticate(req("Bearer gh-one")); err != nil || p.KeyID != "k1" || !p.Allows("anything") {
		t.Fatalf("gh-one: %+v %v", p, err)
	}
	if p, err := s.Authenticate(req("Bearer gh-two")); err != nil || p.Allows("other") || !p.Allows("m") {
		t.Fatalf("gh-two: %+v %v", p, err)
	}
	if _, err := s.Authenticate(req("")); !errors.Is(err, ErrMissingKey) {
		t.Fatalf("missing key: %v", err)
	}
	_, err := s.Authenticate(req("Bearer gh-nope-secret"))
	if !errors.Is(err, ErrBadKey) {
		t.Fatalf("bad key: %v", err)
	}
	if msg := fmt.Sprint(err); strings.Contains(msg, "gh-nope-secret") {
		t.Fatalf("error echoes the secret: %s", msg)
	}
	// The table holds hashes, not secrets.
	for _, slot := range s.keys {
		if string(slot.hash[:]) == "gh-one" {
			t.Fatal("plaintext key stored")
		}
	}
}

func BenchmarkStaticAuthenticate(b *testing.B) {
	keys := make([]StaticKey, 1000)
	for i := range keys {
		keys[i] = StaticKey{Secret: fmt.Sprintf("gh-key-%d", i), Principal: Principal{KeyID: fmt.Sprint(i)}}
	}
	s := NewStatic(keys)
	r, _ := http.NewRequest(http.MethodGet, "/", nil)
	r.Header.Set("Authorization", "Bearer gh-key-500")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Authenticate(r); err != nil {
			b.Fatal(err)
		}
	}
}

// TestCredentialOnTheWire: Credential looks the names up as stored, which
// holds because net/http's servers store incoming names canonically,
// whatever their case on the wire (HTTP/2 sends them all in lower case).
func TestCredentialOnTheWire(t *testing.T) {
	for _, n := range []string{hdrAuthorization, hdrAPIKey} {
		if c := http.CanonicalHeaderKey(n); c != n {
			t.Errorf("%q is looked up directly but its canonical form is %q", n, c)
		}
	}
	for _, h2 := range []bool{false, true} {
		ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.WriteString(w, r.Proto+" "+Credential(r))
		}))
		ts.EnableHTTP2 = h2
		ts.StartTLS()
		for name, want := range map[string]string{"authorization": "gh-abc", "x-api-key": "gh-xyz", "X-API-KEY": "gh-xyz"} {
			r, _ := http.NewRequest(http.MethodGet, ts.URL, nil)
			v := want
			if name == "authorization" {
				v = "Bearer " + want
			}
			r.Header[name] = []string{v} // sent as written, not canonicalised
			resp, err := ts.Client().Do(r)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			proto := "HTTP/1.1"
			if h2 {
				proto = "HTTP/2.0"
			}
			if got := string(body); got != proto+" "+want {
				t.Errorf("%s as %q: got %q, want %q", proto, name, got, proto+" "+want)
			}
		}
		ts.Close()
	}
}

// TestRateText: the texts are the principal's own and its project's
// rates as made with it; another value, zero, or a rate changed on a copy
// afterwards gets none (the caller formats it), never a wrong one.
func TestRateText(t *testing.T) {
	s := NewStatic([]StaticKey{{Secret: "gh-rates", Principal: Principal{KeyID: "k", Project: "p",
		RPM: 100, TPM: 1_000_000_000_000, ProjectLimits: Limits{RPM: 7}}}})
	p, ok := s.Lookup("gh-rates")
	if !ok {
		t.Fatal("key not found")
	}
	for n, want := range map[int64]string{100: "100", 1_000_000_000_000: "1000000000000", 7: "7", 0: "", -1: "", 8: "", 99: ""} {
		if got := p.RateText(n); got != want {
			t.Errorf("RateText(%d) = %q, want %q", n, got, want)
		}
	}
	c := *p
	c.RPM = 200
	if got := c.RateText(200); got != "" {
		t.Errorf("a copy's changed rate: RateText(200) = %q, want none", got)
	}
	if got := c.RateText(100); got != "100" {
		t.Errorf("a copy: RateText(100) = %q, want the text of the value it was made from", got)
	}
	if got := (&Principal{RPM: 5}).RateText(5); got != "" {
		t.Errorf("a principal made without quoteNames: RateText(5) = %q, want none", got)
	}
	// RateLines: the same rates, each opening either bucket's lines.
	for n, want := range map[int64]string{100: "100", 1_000_000_000_000: "1000000000000", 7: "7", 0: "", -1: "", 8: ""} {
		for _, tokens := range []bool{false, true} {
			bucket := "Requests"
			if tokens {
				bucket = "Tokens"
			}
			wantLines := ""
			if want != "" {
				wantLines = "X-Ratelimit-Limit-" + bucket + ": " + want + "\r\nX-Ratelimit-Remaining-" + bucket + ": "
			}
			if got := p.RateLines(n, tokens); got != wantLines {
				t.Errorf("RateLines(%d, %v) = %q, want %q", n, tokens, got, wantLines)
			}
		}
	}
	if got := c.RateLines(200, false); got != "" {
		t.Errorf("a copy's changed rate: RateLines(200) = %q, want none", got)
	}
}

// TestStaticLimitMemos: each static key's principal comes with a
// limit.Memo of its own (the admitter keeps the key's counters there).
func TestStaticLimitMemos(t *testing.T) {
	s := NewStatic([]StaticKey{{Secret: "gh-memo-a", Principal: Principal{KeyID: "a", RPM: 1}}, {Secret: "gh-memo-b", Principal: Principal{KeyID: "b", RPM: 1}}})
	a, _ := s.Lookup("gh-memo-a")
	b, _ := s.Lookup("gh-memo-b")
	if a == nil || b == nil || a.LimitMemo == nil || b.LimitMemo == nil || a.LimitMemo == b.LimitMemo {
		t.Fatalf("the keys' memos: %v, %v; want one each", a, b)
	}
}

// TestPrincipalTableChainsSharedPrefixes pins the table's exactness: hashes
// that share the eight bytes it is keyed by are told apart by the rest,
// a hash put again takes the later principal, and a hash never put (with
// or without a known prefix) finds nothing.
func TestPrincipalTableChainsSharedPrefixes(t *testing.T) {
	var a, b, c Hash
	for i := range a {
		a[i], b[i], c[i] = byte(i), byte(i), byte(i)
	}
	b[31], c[8] = 0xff, 0xee // same first eight bytes as a, different hashes
	pa, pb, pa2 := &Principal{KeyID: "a"}, &Principal{KeyID: "b"}, &Principal{KeyID: "a2"}
	tab := principalTable{}
	tab.put(a, pa)
	tab.put(b, pb)
	if got := tab.get(&a); got != pa {
		t.Fatalf("a: got %v", got)
	}
	if got := tab.get(&b); got != pb {
		t.Fatalf("b: got %v", got)
	}
	if got := tab.get(&c); got != nil {
		t.Fatalf("c, never put, shares a's prefix: got %v", got)
	}
	tab.put(a, pa2)
	if got := tab.get(&a); got != pa2 {
		t.Fatalf("a put again: got %v, want the later principal", got)
	}
	if got := tab.get(&b); got != pb {
		t.Fatalf("b after a's second put: got %v", got)
	}
	var d Hash
	d[0] = 1
	if got := tab.get(&d); got != nil {
		t.Fatalf("unknown prefix: got %v", got)
	}
	if len(tab) != 1 {
		t.Fatalf("%d map entries for one shared prefix, want 1", len(tab))
	}
}
