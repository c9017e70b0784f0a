// Package cache is the exact response cache: a request's key is a hash of
// its project and of every field of its body that can change the answer,
// in canonical form; a stored answer is the backend's OpenAI-shaped
// response, kept either whole or as its stream's events, and served to
// either kind of request in either dialect.
package cache

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"

	"gatehouse/internal/llm"
)

// Key identifies a cached answer: hex SHA-256, 64 characters.
type Key string

// ignored are the request fields that cannot change the answer: how it
// is delivered (stream, stream_options), and what the client tags it
// with for its own or the provider's bookkeeping. The model is replaced
// by the model as resolved, so aliases of one model share entries.
var ignored = map[string]bool{
	"model":             true,
	"stream":            true,
	"stream_options":    true,
	"user":              true,
	"metadata":          true,
	"store":             true,
	"safety_identifier": true,
	"prompt_cache_key":  true,
}

// NewKey returns the key of an OpenAI-shaped chat request body for a
// project and the model it resolved to. Field order, insignificant
// whitespace and how a number is spelled (1, 1.0, 1e0) do not change the
// key; any value does. The project is part of the hash, so two projects
// never share an entry.
//
// The canonical form is appended to one buffer straight from the raw
// JSON (llm's scanner), without decoding the body into Go values: every
// cached request pays for it, hits included.
func NewKey(project, model string, body []byte) (Key, error) {
	bp := keyBufs.Get().(*[]byte)
	defer keyBufs.Put(bp)
	b := (*bp)[:0]
	for _, s := range [...]string{"gatehouse-cache-v1", project, model} {
		b = appendString(b, s)
	}
	var fields []field
	err := llm.EachField(body, func(k string, v []byte, _ int) bool {
		if !ignored[k] {
			fields = append(fields, field{key: k, value: v})
		}
		return true
	})
	if err != nil {
		return "", fmt.Errorf("cache key: %w", err)
	}
	if b, err = appendObject(b, fields); err != nil {
		return "", fmt.Errorf("cache key: %w", err)
	}
	*bp = b
	sum := sha256.Sum256(b)
	return Key(hex.EncodeToString(sum[:])), nil
}

var keyBufs = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// field is an object member as the scanner found it, or, with canon
// set, a value already in canonical form.
type field struct {
	key   string
	value []byte
	canon []byte
}

// appendObject appends an object's members sorted by key; of a key
// given twice the last counts, as a JSON decoder keeps it.
func appendObject(b []byte, fields []field) ([]byte, error) {
	slices.SortStableFunc(fields, func(x, y field) int { return strings.Compare(x.key, y.key) })
	b = append(b, '{')
	for i, f := range fields {
		if i+1 < len(fields) && fields[i+1].key == f.key {
			continue
		}
		b = appendString(b, f.key)
		if f.canon != nil {
			b = append(b, f.canon...)
			continue
		}
		var err error
		if b, err = appendCanonical(b, f.value); err != nil {
			return b, err
		}
	}
	return append(b, '}'), nil
}

// appendCanonical appends a raw JSON value (validated by the scanner) in
// canonical form: objects with sorted keys, numbers in their shortest
// form, strings unescaped and length-prefixed.
func appendCanonical(b []byte, raw []byte) ([]byte, error) {
	switch llm.KindOf(raw) {
	case llm.KindObject:
		var fields []field
		if err := llm.EachField(raw, func(k string, v []byte, _ int) bool {
			fields = append(fields, field{key: k, value: v})
			return true
		}); err != nil {
			return b, err
		}
		return appendObject(b, fields)
	case llm.KindArray:
		b = append(b, '[')
		var err error
		if e := llm.EachElement(raw, func(_ int, v []byte) bool {
			b, err = appendCanonical(b, v)
			return err == nil
		}); e != nil {
			return b, e
		}
		return append(b, ']'), err
	case llm.KindString:
		s, err := llm.UnquoteString(raw)
		if err != nil {
			return b, err
		}
		return appendString(append(b, 's'), s), nil
	case llm.KindNumber:
		return appendString(append(b, 'n'), canonicalNumber(json.Number(raw))), nil
	case llm.KindBool:
		if raw[0] == 't' {
			return append(b, 't'), nil
		}
		return append(b, 'f'), nil
	case llm.KindNull:
		return append(b, '0'), nil
	}
	return b, errors.New("not a JSON value")
}

// appendString appends s length-prefixed, so no two sequences of strings
// encode alike.
func appendString(b []byte, s string) []byte {
	b = strconv.AppendInt(b, int64(len(s)), 10)
	b = append(b, ':')
	return append(b, s...)
}

// canonicalNumber spells a JSON number one way: integers that fit in 64
// bits exactly (seeds), everything else as its shortest float64.
func canonicalNumber(n json.Number) string {
	if i, err := strconv.ParseInt(string(n), 10, 64); err == nil {
		return strconv.FormatInt(i, 10)
	}
	f, err := strconv.ParseFloat(string(n), 64)
	if err != nil || math.IsInf(f, 0) {
		return string(n)
	}
	if f == math.Trunc(f) && math.Abs(f) < 1<<53 {
		return strconv.FormatInt(int64(f), 10)
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}
