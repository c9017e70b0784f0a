package account

import (
	"bytes"
	"errors"
	"math"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"gatehouse/internal/llm"
)

// AppendJSON appends r as MarshalJSON writes it, byte for byte, without
// encoding/json's reflection. A record that finds the sink's queue full
// is written to the spill file this way on its request's goroutine:
// encoding/json's walk of the record (and its second pass over
// MarshalJSON's output) was 7% of the gateway's CPU in a benchmark run
// that spilled half its records (BENCHMARKS.md, "Spilled records
// written by hand"). TestAppendJSONMatchesMarshal holds the two equal.
//
// It differs in one thing only: a latency that is not a number (NaN or
// infinite, which no clock reading gives) is written as 0, where
// encoding/json refuses the whole record; the stores keep such a value
// as 0 too. A time outside years 0 to 9999 is refused, as
// time.Time.MarshalJSON refuses it.
func (r *Record) AppendJSON(b []byte) ([]byte, error) {
	t := r.Time.UTC()
	if y := t.Year(); y < 0 || y > 9999 {
		return b, errors.New("usage record: time outside years 0 to 9999")
	}
	b = append(b, `{"request_id":`...)
	b = appendJSONString(b, r.RequestID)
	b = append(b, `,"time":"`...)
	b = t.AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","endpoint":`...)
	b = appendJSONString(b, r.Endpoint)
	b = append(b, `,"key_id":`...)
	b = appendJSONString(b, r.KeyID)
	b = append(b, `,"project_id":`...)
	b = appendJSONString(b, r.ProjectID)
	b = append(b, `,"project":`...)
	b = appendJSONString(b, r.Project)
	b = append(b, `,"customer":`...)
	b = appendJSONString(b, r.Customer)
	b = append(b, `,"model":`...)
	b = appendJSONString(b, r.Model)
	b = append(b, `,"served_model":`...)
	b = appendJSONString(b, r.ServedModel)
	b = append(b, `,"provider":`...)
	b = appendJSONString(b, r.Provider)
	b = append(b, `,"deployment":`...)
	b = appendJSONString(b, r.Deployment)
	b = append(b, `,"status":`...)
	b = strconv.AppendInt(b, int64(r.Status), 10)
	b = append(b, `,"error_kind":`...)
	b = appendJSONString(b, r.ErrorKind)
	b = append(b, `,"prompt_tokens":`...)
	b = strconv.AppendInt(b, int64(r.PromptTokens), 10)
	b = append(b, `,"completion_tokens":`...)
	b = strconv.AppendInt(b, int64(r.CompletionTokens), 10)
	b = append(b, `,"cached_tokens":`...)
	b = strconv.AppendInt(b, int64(r.CachedTokens), 10)
	b = append(b, `,"reasoning_tokens":`...)
	b = strconv.AppendInt(b, int64(r.ReasoningTokens), 10)
	b = append(b, `,"usage_source":`...)
	b = appendJSONString(b, r.UsageSource)
	b = append(b, `,"latency_ms":`...)
	b = appendJSONFloat(b, r.LatencyMS)
	b = append(b, `,"ttft_ms":`...)
	b = appendJSONFloat(b, r.TTFTMS)
	b = append(b, `,"overhead_ms":`...)
	b = appendJSONFloat(b, r.OverheadMS)
	b = append(b, `,"cache":`...)
	b = appendJSONString(b, r.Cache)
	b = append(b, `,"attempts":`...)
	b = strconv.AppendInt(b, int64(r.Attempts), 10)
	b = append(b, `,"stream":`...)
	b = strconv.AppendBool(b, r.Stream)
	b = append(b, `,"labels":{`...)
	if len(r.Labels) > 0 {
		keys := make([]string, 0, len(r.Labels))
		for k := range r.Labels {
			keys = append(keys, k)
		}
		slices.Sort(keys) // encoding/json writes a map's keys sorted
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, k)
			b = append(b, ':')
			b = appendJSONString(b, r.Labels[k])
		}
	}
	b = append(b, '}')
	if r.RequestBody != "" {
		b = append(b, `,"request_body":`...)
		b = appendJSONString(b, r.RequestBody)
	}
	if r.ResponseBody != "" {
		b = append(b, `,"response_body":`...)
		b = appendJSONString(b, r.ResponseBody)
	}
	b = append(b, `,"cost_usd":"`...)
	b = r.Cost.Append(b)
	b = append(b, `","saved_usd":"`...)
	b = r.Saved.Append(b)
	return append(b, `"}`...), nil
}

// appendJSONString appends s quoted as encoding/json quotes it by
// default: <, > and & escaped for HTML, control characters as \n, \r,
// \t, \b, \f or \u00XX, invalid UTF-8 as U+FFFD, and U+2028 and U+2029
// escaped (JavaScript reads them as line ends).
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// appendJSONFloat appends f as encoding/json writes a float64: the
// shortest decimal that reads back as f, in exponent form below 1e-6 and
// from 1e21, the exponent without a leading zero. NaN and infinities,
// which JSON cannot hold, are written as 0.
func appendJSONFloat(b []byte, f float64) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return append(b, '0')
	}
	format := byte('f')
	if a := math.Abs(f); a != 0 && (a < 1e-6 || a >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// e-09 as e-9
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

// readJSON reads a record as AppendJSON writes it, without encoding/json,
// which took 16 µs a record: the spill's replay decodes every record
// that was spilled. It reports false, having perhaps set some of the
// fields it read before, for anything it does not read exactly as encoding/json would — a key
// it does not know (the decoder matches names regardless of case), a
// string with an escape or invalid UTF-8, a null, a number of another
// form — and UnmarshalJSON then reads the record with encoding/json,
// from the start. FuzzReadJSONAgreesWithReflection holds it to that.
func (r *Record) readJSON(b []byte) bool {
	ok := true
	cost, saved := "", ""
	// Each field is set only when it is read: a field readJSON declines
	// is left as it was, for encoding/json to decide (a null leaves it
	// unchanged there).
	str := func(v []byte, dst *string) {
		var s string
		if s, ok = plainJSONString(v); ok {
			*dst = s
		}
	}
	integer := func(v []byte, dst *int) {
		n, err := strconv.ParseInt(string(v), 10, 64)
		if ok = err == nil && llm.KindOf(v) == llm.KindNumber; ok {
			*dst = int(n)
		}
	}
	float := func(v []byte, dst *float64) {
		f, err := strconv.ParseFloat(string(v), 64)
		if ok = err == nil && llm.KindOf(v) == llm.KindNumber; ok {
			*dst = f
		}
	}
	err := llm.EachField(b, func(key string, v []byte, _ int) bool {
		switch key {
		case "request_id":
			str(v, &r.RequestID)
		case "time":
			ok = llm.KindOf(v) == llm.KindString && r.Time.UnmarshalJSON(v) == nil
		case "endpoint":
			str(v, &r.Endpoint)
		case "key_id":
			str(v, &r.KeyID)
		case "project_id":
			str(v, &r.ProjectID)
		case "project":
			str(v, &r.Project)
		case "customer":
			str(v, &r.Customer)
		case "model":
			str(v, &r.Model)
		case "served_model":
			str(v, &r.ServedModel)
		case "provider":
			str(v, &r.Provider)
		case "deployment":
			str(v, &r.Deployment)
		case "status":
			integer(v, &r.Status)
		case "error_kind":
			str(v, &r.ErrorKind)
		case "prompt_tokens":
			integer(v, &r.PromptTokens)
		case "completion_tokens":
			integer(v, &r.CompletionTokens)
		case "cached_tokens":
			integer(v, &r.CachedTokens)
		case "reasoning_tokens":
			integer(v, &r.ReasoningTokens)
		case "usage_source":
			str(v, &r.UsageSource)
		case "latency_ms":
			float(v, &r.LatencyMS)
		case "ttft_ms":
			float(v, &r.TTFTMS)
		case "overhead_ms":
			float(v, &r.OverheadMS)
		case "cache":
			str(v, &r.Cache)
		case "attempts":
			integer(v, &r.Attempts)
		case "stream":
			if ok = llm.KindOf(v) == llm.KindBool; ok {
				r.Stream = v[0] == 't'
			}
		case "labels":
			ok = r.readLabels(v)
		case "request_body":
			str(v, &r.RequestBody)
		case "response_body":
			str(v, &r.ResponseBody)
		case "cost_usd":
			str(v, &cost)
		case "saved_usd":
			str(v, &saved)
		default:
			ok = false
		}
		return ok
	})
	if err != nil || !ok {
		return false
	}
	var cerr, serr error
	r.Cost, cerr = ParseUSD(cost)
	r.Saved, serr = ParseUSD(saved)
	return cerr == nil && serr == nil
}

// readLabels reads the labels object into r.Labels, adding to a map
// already there as encoding/json does.
func (r *Record) readLabels(v []byte) bool {
	if llm.KindOf(v) != llm.KindObject {
		return false
	}
	if r.Labels == nil {
		r.Labels = map[string]string{}
	}
	ok := true
	err := llm.EachField(v, func(key string, val []byte, _ int) bool {
		var s string
		if s, ok = plainJSONString(val); ok {
			r.Labels[key] = s
		}
		return ok
	})
	return err == nil && ok
}

// plainJSONString is the text of a raw JSON string that decodes to its
// own bytes: no escape, valid UTF-8.
func plainJSONString(v []byte) (string, bool) {
	if llm.KindOf(v) != llm.KindString {
		return "", false
	}
	v = v[1 : len(v)-1]
	if bytes.IndexByte(v, '\\') >= 0 || !utf8.Valid(v) {
		return "", false
	}
	return string(v), true
}
