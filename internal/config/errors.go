package config

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// FieldError is one problem in a config file. Messages never contain a
// secret's value.
type FieldError struct {
	File   string
	Line   int    // 1-based; 0 when the problem has no place in the file
	Column int    // 1-based, in characters
	Field  string // dotted path such as models[2].targets[0].provider; empty for syntax errors
	// Message says what is wrong, and where useful what is allowed.
	Message string
}

// Error formats e as "file:line:col: field: message".
func (e FieldError) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d:%d", e.Line, e.Column)
	}
	b.WriteString(": ")
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Message)
	return b.String()
}

// Errors is every problem found in one config file, in file order. Parse
// and Load return it as *Errors.
type Errors []FieldError

// Error prints one problem per line.
func (e *Errors) Error() string {
	lines := make([]string, len(*e))
	for i, fe := range *e {
		lines[i] = fe.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap gives each problem to errors.Is and errors.As.
func (e *Errors) Unwrap() []error {
	errs := make([]error, len(*e))
	for i, fe := range *e {
		errs[i] = fe
	}
	return errs
}

// sortErrors puts problems in file order; problems on the same spot keep
// the order they were found in.
func sortErrors(errs []FieldError) {
	slices.SortStableFunc(errs, func(a, b FieldError) int {
		if c := cmp.Compare(a.Line, b.Line); c != 0 {
			return c
		}
		return cmp.Compare(a.Column, b.Column)
	})
}

// scrub replaces every secret value in the messages with "[redacted]": a
// last guard for messages that quote source text, such as syntax errors.
func scrub(errs []FieldError, secrets []string) {
	for _, s := range secrets {
		if len(s) < 6 { // too short to be a credential; would mangle messages
			continue
		}
		for i := range errs {
			errs[i].Message = strings.ReplaceAll(errs[i].Message, s, redacted)
		}
	}
}
