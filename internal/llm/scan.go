package llm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// maxDepth bounds nesting so hostile input cannot exhaust the stack.
const maxDepth = 512

// SyntaxError reports malformed JSON at a byte offset.
type SyntaxError struct {
	Offset int
	msg    string
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("invalid JSON at byte %d: %s", e.Offset, e.msg)
}

// ErrNotObject is what EachField returns when the top-level value is
// well-formed JSON but not an object. Its message names no kind of body,
// since EachField reads requests and upstream answers alike: a caller
// answering a client says which body it needed (a request body must be
// an object; an upstream answer that is not one is the provider's fault).
var ErrNotObject = errors.New("the JSON value is not an object")

// Kind is the JSON type of a raw value, read from its first byte.
type Kind byte

// The kinds of JSON values.
const (
	KindInvalid Kind = iota
	KindNull
	KindBool
	KindNumber
	KindString
	KindArray
	KindObject
)

// String names the kind the way OpenAI's error messages do.
func (k Kind) String() string {
	switch k {
	case KindNull:
		return "null"
	case KindBool:
		return "a boolean"
	case KindNumber:
		return "a number"
	case KindString:
		return "a string"
	case KindArray:
		return "an array"
	case KindObject:
		return "an object"
	}
	return "invalid"
}

// KindOf reports the kind of a raw JSON value (already validated).
func KindOf(v []byte) Kind {
	if len(v) == 0 {
		return KindInvalid
	}
	switch v[0] {
	case 'n':
		return KindNull
	case 't', 'f':
		return KindBool
	case '"':
		return KindString
	case '[':
		return KindArray
	case '{':
		return KindObject
	}
	return KindNumber
}

// EachField walks the members of the top-level JSON object in data, calling
// fn with each key (unescaped), its raw value and the value's offset in
// data. It validates the whole document as it goes, so a nil error means
// data is one well-formed JSON object; fn returning false stops the walk
// early (and skips validating the rest).
//
// It exists so the request path can read the handful of fields it needs
// without decoding the whole body into Go values.
func EachField(data []byte, fn func(key string, value []byte, offset int) bool) error {
	s := scanner{data: data}
	if open, err := s.openDocument(); !open {
		return err
	}
	for {
		ks, err := s.memberKey()
		if err != nil {
			return err
		}
		key, err := unquoteKey(data[ks:s.pos])
		if err != nil {
			return &SyntaxError{Offset: ks, msg: "bad object key"}
		}
		if err := s.memberColon(); err != nil {
			return err
		}
		vs := s.pos
		if err := s.value(1); err != nil {
			return err
		}
		if !fn(key, data[vs:s.pos], vs) {
			return nil
		}
		more, err := s.memberNext()
		if err != nil {
			return err
		}
		if !more {
			return s.end()
		}
	}
}

// EachElement walks the elements of a raw JSON array (already validated by
// EachField), calling fn with each element's raw bytes.
func EachElement(array []byte, fn func(i int, value []byte) bool) error {
	s := scanner{data: array}
	s.skipSpace()
	if s.peek() != '[' {
		return s.fail("expected an array")
	}
	s.pos++
	s.skipSpace()
	if s.peek() == ']' {
		return nil
	}
	for i := 0; ; i++ {
		s.skipSpace()
		vs := s.pos
		if err := s.value(1); err != nil {
			return err
		}
		if !fn(i, array[vs:s.pos]) {
			return nil
		}
		s.skipSpace()
		switch s.peek() {
		case ',':
			s.pos++
		case ']':
			return nil
		default:
			return s.fail("expected ',' or ']' in array")
		}
	}
}

// unquoteKey returns the key without quotes; only keys with escapes or
// invalid UTF-8 take the slow path.
func unquoteKey(q []byte) (string, error) {
	inner := q[1 : len(q)-1]
	if k, ok := knownKey(inner); ok {
		return k, nil
	}
	if bytes.IndexByte(inner, '\\') < 0 && utf8.Valid(inner) {
		return string(inner), nil
	}
	return unquoteJSON(q)
}

// knownKey returns the keys of OpenAI's chat requests, answers and chunks
// as constants: the request path reads every key of every body it walks,
// and a string built for each one was about a dozen allocations a
// request. (A switch on string(b) compares without building the string.)
func knownKey(b []byte) (string, bool) {
	switch string(b) {
	case "id":
		return "id", true
	case "object":
		return "object", true
	case "created":
		return "created", true
	case "model":
		return "model", true
	case "choices":
		return "choices", true
	case "index":
		return "index", true
	case "message":
		return "message", true
	case "messages":
		return "messages", true
	case "role":
		return "role", true
	case "content":
		return "content", true
	case "refusal":
		return "refusal", true
	case "function_call":
		return "function_call", true
	case "audio":
		return "audio", true
	case "annotations":
		return "annotations", true
	case "logprobs":
		return "logprobs", true
	case "finish_reason":
		return "finish_reason", true
	case "delta":
		return "delta", true
	case "usage":
		return "usage", true
	case "prompt_tokens":
		return "prompt_tokens", true
	case "completion_tokens":
		return "completion_tokens", true
	case "total_tokens":
		return "total_tokens", true
	case "prompt_tokens_details":
		return "prompt_tokens_details", true
	case "completion_tokens_details":
		return "completion_tokens_details", true
	case "cached_tokens":
		return "cached_tokens", true
	case "reasoning_tokens":
		return "reasoning_tokens", true
	case "cost":
		return "cost", true
	case "service_tier":
		return "service_tier", true
	case "system_fingerprint":
		return "system_fingerprint", true
	case "stream":
		return "stream", true
	case "stream_options":
		return "stream_options", true
	case "include_usage":
		return "include_usage", true
	case "max_tokens":
		return "max_tokens", true
	case "max_completion_tokens":
		return "max_completion_tokens", true
	case "temperature":
		return "temperature", true
	case "user":
		return "user", true
	case "tools":
		return "tools", true
	case "tool_calls":
		return "tool_calls", true
	case "type":
		return "type", true
	case "text":
		return "text", true
	case "name":
		return "name", true
	case "error":
		return "error", true
	}
	return "", false
}

// UnquoteString decodes a raw JSON string value.
func UnquoteString(raw []byte) (string, error) {
	if len(raw) < 2 || raw[0] != '"' {
		return "", errors.New("not a JSON string")
	}
	return unquoteKey(raw)
}

// unquoteJSON handles JSON escapes, which differ from Go's in \/ and \u
// surrogate pairs. Like encoding/json it turns each byte of invalid UTF-8
// into U+FFFD, so keys and values read here match what a decoder upstream
// sees.
func unquoteJSON(q []byte) (string, error) {
	out := make([]byte, 0, len(q))
	for i := 1; i < len(q)-1; i++ {
		c := q[i]
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRune(q[i : len(q)-1])
			if r == utf8.RuneError && size == 1 {
				out = utf8.AppendRune(out, utf8.RuneError)
			} else {
				out = append(out, q[i:i+size]...)
				i += size - 1
			}
			continue
		}
		if c != '\\' {
			out = append(out, c)
			continue
		}
		i++
		switch q[i] {
		case '"', '\\', '/':
			out = append(out, q[i])
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, n := decodeU(q[i+1:])
			if n == 0 {
				return "", errors.New("bad \\u escape")
			}
			i += n
			out = utf8.AppendRune(out, r)
		default:
			return "", errors.New("bad escape")
		}
	}
	return string(out), nil
}

// decodeU decodes the hex digits after \u, joining a surrogate pair when one
// follows; it returns the rune and how many bytes it consumed.
func decodeU(b []byte) (rune, int) {
	if len(b) < 4 {
		return 0, 0
	}
	v, err := strconv.ParseUint(string(b[:4]), 16, 32)
	if err != nil {
		return 0, 0
	}
	r := rune(v)
	if r >= 0xD800 && r < 0xDC00 && len(b) >= 10 && b[4] == '\\' && b[5] == 'u' {
		lo, err := strconv.ParseUint(string(b[6:10]), 16, 32)
		if err == nil && lo >= 0xDC00 && lo < 0xE000 {
			return (r-0xD800)<<10 + (rune(lo) - 0xDC00) + 0x10000, 10
		}
	}
	if r >= 0xD800 && r < 0xE000 {
		return utf8.RuneError, 4
	}
	return r, 4
}

type scanner struct {
	data []byte
	pos  int
}

func (s *scanner) fail(msg string) error { return &SyntaxError{Offset: s.pos, msg: msg} }

func (s *scanner) peek() byte {
	if s.pos < len(s.data) {
		return s.data[s.pos]
	}
	return 0
}

func (s *scanner) end() error {
	s.skipSpace()
	if s.pos != len(s.data) {
		return s.fail("unexpected data after top-level value")
	}
	return nil
}

func (s *scanner) skipSpace() {
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

// value validates and skips one JSON value starting at s.pos.
func (s *scanner) value(depth int) error {
	if depth > maxDepth {
		return s.fail("nesting too deep")
	}
	switch c := s.peek(); {
	case c == '"':
		return s.str()
	case c == '{':
		return s.object(depth)
	case c == '[':
		return s.array(depth)
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	case c == '-' || (c >= '0' && c <= '9'):
		return s.number()
	case s.pos >= len(s.data):
		return s.fail("unexpected end of input")
	}
	return s.fail("unexpected character")
}

func (s *scanner) literal(lit string) error {
	if len(s.data)-s.pos < len(lit) || string(s.data[s.pos:s.pos+len(lit)]) != lit {
		return s.fail("invalid literal")
	}
	s.pos += len(lit)
	return nil
}

// str scans a string from its opening quote. The plain run between
// escapes is skipped a byte per table lookup: the request path scans
// every prompt's text at least once, and this loop is most of the
// scanner's time.
func (s *scanner) str() error {
	d, i := s.data, s.pos+1 // past the opening quote
	for {
		for i+8 <= len(d) && !hasStop(binary.LittleEndian.Uint64(d[i:])) {
			i += 8
		}
		for i < len(d) && !strStop[d[i]] {
			i++
		}
		if i >= len(d) {
			s.pos = i
			return s.fail("unterminated string")
		}
		switch d[i] {
		case '"':
			s.pos = i + 1
			return nil
		case '\\':
			i++
			if i >= len(d) {
				s.pos = i
				return s.fail("unterminated string")
			}
			switch d[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i++
			case 'u':
				if len(d)-i < 5 || !isHex4(d[i+1:i+5]) {
					s.pos = i
					return s.fail("bad \\u escape")
				}
				i += 5
			default:
				s.pos = i
				return s.fail("bad escape in string")
			}
		default:
			s.pos = i
			return s.fail("control character in string")
		}
	}
}

// hasStop reports whether any of the eight bytes in w is a strStop byte:
// '"', '\\' or below 0x20 (the classic has-zero-byte test on w, on w
// with each candidate byte xored away, and for "below 0x20" on w less
// 0x20 in each byte; a false alarm after a real one only sends the
// caller to the byte loop, which decides).
func hasStop(w uint64) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	zero := func(x uint64) uint64 { return (x - ones) & ^x & highs }
	return zero(w^(ones*'"'))|zero(w^(ones*'\\'))|((w-ones*0x20) & ^w & highs) != 0
}

// strStop marks the bytes that end a plain run inside a string: the
// closing quote, a backslash, and the control characters JSON forbids.
var strStop = func() (t [256]bool) {
	for c := range 0x20 {
		t[c] = true
	}
	t['"'], t['\\'] = true, true
	return t
}()

func isHex4(b []byte) bool {
	for _, c := range b {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return true
}

func (s *scanner) number() error {
	d := s.data
	if s.peek() == '-' {
		s.pos++
	}
	switch {
	case s.peek() == '0':
		s.pos++
	case s.peek() >= '1' && s.peek() <= '9':
		for s.pos < len(d) && d[s.pos] >= '0' && d[s.pos] <= '9' {
			s.pos++
		}
	default:
		return s.fail("invalid number")
	}
	if s.peek() == '.' {
		s.pos++
		if !(s.peek() >= '0' && s.peek() <= '9') {
			return s.fail("invalid number")
		}
		for s.pos < len(d) && d[s.pos] >= '0' && d[s.pos] <= '9' {
			s.pos++
		}
	}
	if c := s.peek(); c == 'e' || c == 'E' {
		s.pos++
		if c := s.peek(); c == '+' || c == '-' {
			s.pos++
		}
		if !(s.peek() >= '0' && s.peek() <= '9') {
			return s.fail("invalid number")
		}
		for s.pos < len(d) && d[s.pos] >= '0' && d[s.pos] <= '9' {
			s.pos++
		}
	}
	return nil
}

// openDocument reads the start of a document that should be one JSON
// object, up to its first member's key. open is false when there are no
// members to walk: err is then nil for a whole "{}", ErrNotObject for
// well-formed JSON of another kind, or the syntax error.
func (s *scanner) openDocument() (open bool, err error) {
	s.skipSpace()
	if s.pos >= len(s.data) {
		return false, s.fail("empty body")
	}
	if s.data[s.pos] != '{' {
		if err := s.value(0); err != nil {
			return false, err
		}
		s.skipSpace()
		if s.pos != len(s.data) {
			return false, s.fail("unexpected data after top-level value")
		}
		return false, ErrNotObject
	}
	s.pos++
	s.skipSpace()
	if s.peek() == '}' {
		s.pos++
		return false, s.end()
	}
	return true, nil
}

// memberKey reads an object member's quoted key (after any space) and
// returns where it starts; callers that need the key decode
// s.data[ks:s.pos]. It, memberColon and memberNext are the parts every
// member loop shares (object, EachField, the usage walk), so they fail
// alike, with the same messages at the same offsets.
func (s *scanner) memberKey() (ks int, err error) {
	s.skipSpace()
	if s.peek() != '"' {
		return 0, s.fail("expected object key")
	}
	ks = s.pos
	return ks, s.str()
}

// memberColon reads the ':' after a key and the space before the value.
func (s *scanner) memberColon() error {
	s.skipSpace()
	if s.peek() != ':' {
		return s.fail("expected ':' after object key")
	}
	s.pos++
	s.skipSpace()
	return nil
}

// memberNext reads what follows a member's value: more is true after a
// ',' and false after the object's closing '}'.
func (s *scanner) memberNext() (more bool, err error) {
	s.skipSpace()
	switch s.peek() {
	case ',':
		s.pos++
		return true, nil
	case '}':
		s.pos++
		return false, nil
	}
	return false, s.fail("expected ',' or '}' in object")
}

func (s *scanner) object(depth int) error {
	s.pos++
	s.skipSpace()
	if s.peek() == '}' {
		s.pos++
		return nil
	}
	for {
		if _, err := s.memberKey(); err != nil {
			return err
		}
		if err := s.memberColon(); err != nil {
			return err
		}
		if err := s.value(depth + 1); err != nil {
			return err
		}
		if more, err := s.memberNext(); !more {
			return err
		}
	}
}

func (s *scanner) array(depth int) error {
	s.pos++
	s.skipSpace()
	if s.peek() == ']' {
		s.pos++
		return nil
	}
	for {
		s.skipSpace()
		if err := s.value(depth + 1); err != nil {
			return err
		}
		s.skipSpace()
		switch s.peek() {
		case ',':
			s.pos++
		case ']':
			s.pos++
			return nil
		default:
			return s.fail("expected ',' or ']' in array")
		}
	}
}
