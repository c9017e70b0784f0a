package postgres

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"
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
	b = r.Time.UTC().AppendFormat(b, "2006-01-02 15:04:05.999999Z07:00")
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
	return append(b, '\n'), nil
}

// appendCopyText appends s escaped for COPY's text format. PostgreSQL's
// text takes neither NUL bytes nor invalid UTF-8: the first are dropped
// and the second replaced by U+FFFD, so one odd header or body can never
// make a batch fail for ever (it would spill and be replayed in a loop).
func appendCopyText(b []byte, s string) []byte {
	clean := true
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == '\\' || c == '\t' || c == '\n' || c == '\r' || c == 0 || c >= utf8.RuneSelf {
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
