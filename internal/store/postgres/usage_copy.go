package postgres

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"gatehouse/internal/account"
)

// appendCopyRow appends r as one line of COPY's text format, its columns
// in copySQL's order. Written by hand rather than through pgx's
// CopyFrom, whose per-value codecs cost several times as many
// instructions per record (BENCHMARKS.md, usage records): in cluster
// mode this encoding is most of what a record costs the gateway's CPU,
// the database's work being done in another process.
func appendCopyRow(b []byte, r *account.Record) ([]byte, error) {
	b = appendCopyText(b, r.RequestID)
	b = append(b, '\t')
	// Microseconds, as PostgreSQL keeps them; the layout truncates as
	// the binary encoding does.
	b = appendTimestamp(b, r.Time)
	for _, s := range [...]string{r.Endpoint, r.KeyID, r.ProjectID, r.Project, r.Customer, r.Model,
		r.ServedModel, r.Provider, r.Deployment} {
		b = append(b, '\t')
		b = appendCopyText(b, s)
	}
	b = append(b, '\t')
	b = strconv.AppendInt(b, int64(r.Status), 10)
	b = append(b, '\t')
	b = appendCopyText(b, r.ErrorKind)
	for _, n := range [...]int64{int64(r.PromptTokens), int64(r.CompletionTokens), int64(r.CachedTokens),
		int64(r.ReasoningTokens), int64(r.Cost)} {
		b = append(b, '\t')
		b = strconv.AppendInt(b, n, 10)
	}
	b = append(b, '\t')
	b = appendCopyText(b, r.UsageSource)
	for _, f := range [...]float64{r.LatencyMS, r.TTFTMS, r.OverheadMS} {
		b = append(b, '\t')
		if math.IsNaN(f) || math.IsInf(f, 0) {
			f = 0
		}
		b = strconv.AppendFloat(b, f, 'g', -1, 64)
	}
	b = append(b, '\t')
	b = appendCopyText(b, r.Cache)
	b = append(b, '\t')
	b = strconv.AppendInt(b, int64(r.Attempts), 10)
	if r.Stream {
		b = append(b, "\tt\t"...)
	} else {
		b = append(b, "\tf\t"...)
	}
	if len(r.Labels) == 0 {
		b = append(b, "{}"...)
	} else {
		labels, err := json.Marshal(r.Labels)
		if err != nil {
			return b, err
		}
		b = appendCopyText(b, string(labels))
	}
	for _, body := range [...]string{r.RequestBody, r.ResponseBody} {
		b = append(b, '\t')
		if body == "" {
			b = append(b, `\N`...)
		} else {
			b = appendCopyText(b, body)
		}
	}
	b = append(b, '\t')
	b = strconv.AppendInt(b, int64(r.Saved), 10)
	return append(b, '\n'), nil
}

// appendCopyText appends s escaped for COPY's text format. PostgreSQL's
// text takes neither NUL bytes nor invalid UTF-8: the first are dropped
// and the second replaced by U+FFFD, so one odd header or body can never
// make a batch fail for ever (it would spill and be replayed in a loop).
func appendCopyText(b []byte, s string) []byte {
	clean := true
	for i := 0; i < len(s); i++ {
		if copySpecial[s[i]] {
			clean = false
			break
		}
	}
	if clean {
		return append(b, s...)
	}
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '\\':
			b = append(b, `\\`...)
		case '\t':
			b = append(b, `\t`...)
		case '\n':
			b = append(b, `\n`...)
		case '\r':
			b = append(b, `\r`...)
		case 0:
		default:
			b = append(b, c)
		}
	}
	return b
}

// copySpecial marks the bytes appendCopyText cannot copy as they are:
// COPY's escapes, NUL, and the bytes of multi-byte UTF-8 (checked for
// validity on the slow path).
var copySpecial = func() (t [256]bool) {
	for _, c := range []byte{'\\', '\t', '\n', '\r', 0} {
		t[c] = true
	}
	for c := utf8.RuneSelf; c < 256; c++ {
		t[c] = true
	}
	return t
}()

// appendTimestamp appends t in UTC to the microsecond, truncated as
// the binary encoding truncates ("2026-03-04 05:06:07.891234Z"): a tenth
// of what time.Time.AppendFormat spends interpreting a layout.
func appendTimestamp(b []byte, t time.Time) []byte {
	t = t.UTC()
	year, month, day := t.Date()
	hour, minute, sec := t.Clock()
	if year < 1000 || year > 9999 {
		return t.AppendFormat(b, "2006-01-02 15:04:05.000000Z07:00") // never seen in practice
	}
	b = appendDigits(b, year, 4)
	b = append(b, '-')
	b = appendDigits(b, int(month), 2)
	b = append(b, '-')
	b = appendDigits(b, day, 2)
	b = append(b, ' ')
	b = appendDigits(b, hour, 2)
	b = append(b, ':')
	b = appendDigits(b, minute, 2)
	b = append(b, ':')
	b = appendDigits(b, sec, 2)
	b = append(b, '.')
	b = appendDigits(b, t.Nanosecond()/1000, 6)
	return append(b, 'Z')
}

// appendDigits appends n (≥ 0) as exactly width decimal digits.
func appendDigits(b []byte, n, width int) []byte {
	for i := width - 1; i >= 0; i-- {
		b = append(b, 0)
	}
	for i := len(b) - 1; i >= len(b)-width; i-- {
		b[i] = byte('0' + n%10)
		n /= 10
	}
	return b
}
