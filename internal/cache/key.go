// Package cache is the exact response cache: a request's key is a hash of
// its project and of every field of its body that can change the answer,
// in canonical form; a stored answer is the backend's OpenAI-shaped
// response, kept either whole or as its stream's events, and served to
// either kind of request in either dialect.
package cache

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"math"
	"slices"
	"strconv"
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
func NewKey(project, model string, body []byte) (Key, error) {
	d := json.NewDecoder(bytes.NewReader(body))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return "", fmt.Errorf("cache key: %w", err)
	}
	if _, err := d.Token(); err != io.EOF {
		return "", errors.New("cache key: data after the request object")
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return "", errors.New("cache key: the request is not a JSON object")
	}
	h := sha256.New()
	writeString(h, "gatehouse-cache-v1")
	writeString(h, project)
	writeString(h, model)
	for k := range obj {
		if ignored[k] {
			delete(obj, k)
		}
	}
	writeCanonical(h, obj)
	return Key(hex.EncodeToString(h.Sum(nil))), nil
}

// writeString writes s length-prefixed, so no two sequences of strings
// hash alike.
func writeString(h hash.Hash, s string) {
	var n [8]byte
	h.Write(strconv.AppendInt(n[:0], int64(len(s)), 10))
	h.Write([]byte{':'})
	h.Write([]byte(s))
}

// writeCanonical writes v in one spelling: objects with sorted keys,
// numbers in their shortest form, strings length-prefixed.
func writeCanonical(h hash.Hash, v any) {
	switch v := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		h.Write([]byte{'{'})
		for _, k := range keys {
			writeString(h, k)
			writeCanonical(h, v[k])
		}
		h.Write([]byte{'}'})
	case []any:
		h.Write([]byte{'['})
		for _, e := range v {
			writeCanonical(h, e)
		}
		h.Write([]byte{']'})
	case string:
		h.Write([]byte{'s'})
		writeString(h, v)
	case json.Number:
		h.Write([]byte{'n'})
		writeString(h, canonicalNumber(v))
	case bool:
		if v {
			h.Write([]byte{'t'})
		} else {
			h.Write([]byte{'f'})
		}
	case nil:
		h.Write([]byte{'0'})
	}
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
