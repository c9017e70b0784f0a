package account

import (
	"regexp"
	"unicode/utf8"
)

// Rule replaces every match of Pattern with Replace.
type Rule struct {
	Pattern *regexp.Regexp
	Replace string
}

// builtinRules remove what must never sit in a database in clear text
// even when a project asked for bodies: credentials first (provider and
// gateway keys, bearer tokens, AWS access keys), then the personal data
// most often pasted into prompts (card numbers, e-mail addresses).
var builtinRules = []struct{ pattern, replace string }{
	{`\b(?:sk|rk|pk)-[A-Za-z0-9_\-]{16,}`, "[REDACTED_KEY]"},
	{`\bgh-[A-Za-z0-9_\-]{16,}`, "[REDACTED_KEY]"},
	{`(?i)\bbearer\s+[A-Za-z0-9._~+/=\-]{8,}`, "Bearer [REDACTED]"},
	{`\b(?:AKIA|ASIA)[0-9A-Z]{16}\b`, "[REDACTED_AWS_KEY]"},
	{`\b(?:\d[ \-]?){12,18}\d\b`, "[REDACTED_NUMBER]"},
	{`[A-Za-z0-9._%+\-]+@[A-Za-z0-9.\-]+\.[A-Za-z]{2,}`, "[REDACTED_EMAIL]"},
}

// Redactor prepares bodies for a record: built-in rules, then the
// operator's, then a cut to MaxBytes. A nil *Redactor keeps no bodies.
type Redactor struct {
	rules    []Rule
	maxBytes int
}

// NewRedactor compiles the built-in rules ahead of extra (already
// compiled by config validation, so they cannot fail here).
func NewRedactor(maxBytes int, extra []Rule) *Redactor {
	r := &Redactor{maxBytes: maxBytes}
	for _, b := range builtinRules {
		r.rules = append(r.rules, Rule{Pattern: regexp.MustCompile(b.pattern), Replace: b.replace})
	}
	for _, e := range extra {
		if e.Replace == "" {
			e.Replace = "[REDACTED]"
		}
		r.rules = append(r.rules, e)
	}
	return r
}

// Limit is how many bytes of a body are worth keeping for Body: the cut
// plus the slack redaction looks at; 0 when bodies are not cut.
func (r *Redactor) Limit() int {
	if r.maxBytes <= 0 {
		return 1 << 30
	}
	return r.maxBytes + 256
}

// Body returns b redacted and cut to the size limit (at a character
// boundary, marked with "…[truncated]"); "" for an empty body.
func (r *Redactor) Body(b []byte) string {
	if r == nil || len(b) == 0 {
		return ""
	}
	// Redact a bounded prefix: a 10 MiB body is not scanned whole to
	// keep 64 KiB of it (a little slack so a match at the cut is seen).
	cut := false
	if r.maxBytes > 0 && len(b) > r.maxBytes+256 {
		b, cut = b[:r.maxBytes+256], true
	}
	for _, rule := range r.rules {
		b = rule.Pattern.ReplaceAll(b, []byte(rule.Replace))
	}
	if r.maxBytes > 0 && len(b) > r.maxBytes {
		b, cut = b[:r.maxBytes], true
	}
	if cut {
		for len(b) > 0 { // drop a character the cut split
			if c, size := utf8.DecodeLastRune(b); c != utf8.RuneError || size > 1 {
				break
			}
			b = b[:len(b)-1]
		}
		return string(b) + "…[truncated]"
	}
	return string(b)
}
