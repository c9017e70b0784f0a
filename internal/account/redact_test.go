package account

import (
	"regexp"
	"strings"
	"testing"
)

func TestRedactorBuiltinsAndRules(t *testing.T) {
	r := NewRedactor(1<<10, []Rule{{Pattern: regexp.MustCompile(`acct-[0-9]+`)}, {Pattern: regexp.MustCompile(`secret`), Replace: "[S]"}})
	in := `{"messages":[{"content":"my key is sk-proj-ABCDEFGHIJKLMNOPQRST and gh-abcdefghijklmnopqrstu, ` +
		`auth Bearer eyJhbGciOi.abc, aws AKIAABCDEFGHIJKLMNOP, card 4111 1111 1111 1111, mail jane.doe@example.com, acct-42 secret"}]}`
	got := r.Body([]byte(in))
	for _, leak := range []string{"sk-proj-ABC", "gh-abcdefghijklmnopqrstu", "eyJhbGciOi", "AKIAABCDEFGHIJKLMNOP", "4111 1111", "jane.doe", "acct-42", "secret"} {
		if strings.Contains(got, leak) {
			t.Errorf("%q survived redaction: %s", leak, got)
		}
	}
	for _, want := range []string{"[REDACTED_KEY]", "Bearer [REDACTED]", "[REDACTED_AWS_KEY]", "[REDACTED_NUMBER]", "[REDACTED_EMAIL]", "[REDACTED] [S]", `{"messages":[{"content":"my key is`} {
		if !strings.Contains(got, want) {
			t.Errorf("want %q in %s", want, got)
		}
	}
}

func TestRedactorCutsAtTheLimit(t *testing.T) {
	r := NewRedactor(10, nil)
	if got := r.Body([]byte("héllo wörld, long body")); got != "héllo wö…[truncated]" {
		t.Fatalf("cut body = %q", got)
	}
	if got := r.Body([]byte("héllo wörld")); got != "héllo wö…[truncated]" { // the first 10 bytes end after "ö"
		t.Fatalf("cut body = %q", got)
	}
	if got := r.Body([]byte("hélló wörld")); got != "hélló w…[truncated]" { // the cut splits "ö"
		t.Fatalf("cut inside a character = %q", got)
	}
	if got := r.Body([]byte("short")); got != "short" {
		t.Fatalf("short body = %q", got)
	}
	var none *Redactor
	if got := none.Body([]byte("x")); got != "" {
		t.Fatalf("nil redactor kept %q", got)
	}
}
