package llm

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

// openAIError is OpenAI's error body, with pointers so null is visible.
type openAIError struct {
	Error struct {
		Message *string `json:"message"`
		Type    *string `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	} `json:"error"`
}

func ptr(s string) *string { return &s }

// decodeOpenAI decodes b strictly: exactly one "error" member holding
// exactly the four OpenAI fields, all present.
func decodeOpenAI(t *testing.T, b []byte) openAIError {
	t.Helper()
	if !json.Valid(b) {
		t.Fatalf("not valid JSON: %s", b)
	}
	var shape map[string]map[string]json.RawMessage
	if err := json.Unmarshal(b, &shape); err != nil {
		t.Fatalf("not the OpenAI error shape: %v: %s", err, b)
	}
	var keys []string
	for k := range shape["error"] {
		keys = append(keys, k)
	}
	if len(shape) != 1 || len(keys) != 4 {
		t.Errorf("body %s: want exactly {\"error\":{message,type,param,code}}", b)
	}
	var e openAIError
	if err := json.Unmarshal(b, &e); err != nil {
		t.Fatal(err)
	}
	return e
}

func TestAppendOpenAI(t *testing.T) {
	tests := []struct {
		name                      string
		err                       *Error
		message, typ, param, code *string
	}{
		{
			"full",
			BadRequest("messages[0].role", "invalid_type", "Invalid type for '%s'.", "messages[0].role"),
			ptr("Invalid type for 'messages[0].role'."), ptr("invalid_request_error"), ptr("messages[0].role"), ptr("invalid_type"),
		},
		{
			"null param and code",
			&Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Message: "bad"},
			ptr("bad"), ptr("invalid_request_error"), nil, nil,
		},
		{
			"body error has null param",
			BadRequest("", "invalid_json", "We could not parse the JSON body of your request."),
			ptr("We could not parse the JSON body of your request."), ptr("invalid_request_error"), nil, ptr("invalid_json"),
		},
		{
			"model not found",
			ModelNotFound(`gpt-"5"`),
			ptr(`The model 'gpt-"5"' does not exist or you do not have access to it.`), ptr("invalid_request_error"), ptr("model"), ptr("model_not_found"),
		},
		{
			"message needing escapes",
			&Error{Status: 400, Message: "a\"b\\c\nd\te\x00f</g>&\u2028é😀\xff", Param: "x\"y", Code: "c\n"},
			ptr("a\"b\\c\nd\te\x00f</g>&\u2028é😀\uFFFD"), ptr("invalid_request_error"), ptr("x\"y"), ptr("c\n"),
		},
		{"empty message", &Error{Status: 500}, ptr(""), ptr("server_error"), nil, nil},
		{"default type 401", &Error{Status: 401, Message: "m"}, ptr("m"), ptr("authentication_error"), nil, nil},
		{"default type 403", &Error{Status: 403, Message: "m"}, ptr("m"), ptr("permission_error"), nil, nil},
		{"default type 429", &Error{Status: 429, Message: "m"}, ptr("m"), ptr("rate_limit_error"), nil, nil},
		{"default type 502", &Error{Status: 502, Message: "m"}, ptr("m"), ptr("server_error"), nil, nil},
		{"default type 404", &Error{Status: 404, Message: "m"}, ptr("m"), ptr("invalid_request_error"), nil, nil},
		{"explicit type wins", &Error{Status: 429, Type: "insufficient_quota", Message: "m"}, ptr("m"), ptr("insufficient_quota"), nil, nil},
		{
			"cause is never sent",
			&Error{Status: 502, Message: "upstream failed", Cause: errors.New("dial tcp 10.0.0.1:443: secret-host")},
			ptr("upstream failed"), ptr("server_error"), nil, nil,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			prefix := []byte("x")
			b := tt.err.AppendOpenAI(prefix)
			if string(b[:1]) != "x" {
				t.Fatalf("AppendOpenAI overwrote the buffer: %q", b)
			}
			b = b[1:]
			got := decodeOpenAI(t, b)
			var want openAIError
			want.Error.Message, want.Error.Type, want.Error.Param, want.Error.Code = tt.message, tt.typ, tt.param, tt.code
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("AppendOpenAI = %s (-want +got):\n%s", b, diff)
			}
			if tt.err.Cause != nil && strings.Contains(string(b), "secret-host") {
				t.Errorf("the internal cause leaked: %s", b)
			}
		})
	}
}

func TestAppendOpenAIExact(t *testing.T) {
	got := string(BadRequest("model", "missing_required_parameter", "Missing required parameter: 'model'.").AppendOpenAI(nil))
	want := `{"error":{"message":"Missing required parameter: 'model'.","type":"invalid_request_error","param":"model","code":"missing_required_parameter"}}`
	if got != want {
		t.Errorf("AppendOpenAI =\n%s\nwant\n%s", got, want)
	}
	got = string((&Error{Status: 500, Message: "x"}).AppendOpenAI(nil))
	want = `{"error":{"message":"x","type":"server_error","param":null,"code":null}}`
	if got != want {
		t.Errorf("AppendOpenAI =\n%s\nwant\n%s", got, want)
	}
}

func TestWriteOpenAI(t *testing.T) {
	tests := []struct {
		name       string
		err        *Error
		status     int
		retryAfter string
	}{
		{"no retry", BadRequest("model", "invalid_type", "m"), 400, ""},
		{"zero status is 500", &Error{Message: "m"}, 500, ""},
		{"negative retry omitted", &Error{Status: 429, RetryAfter: -time.Second}, 429, ""},
		{"1ns rounds up", &Error{Status: 429, RetryAfter: time.Nanosecond}, 429, "1"},
		{"1ms rounds up", &Error{Status: 429, RetryAfter: time.Millisecond}, 429, "1"},
		{"exactly 1s", &Error{Status: 429, RetryAfter: time.Second}, 429, "1"},
		{"just over 1s", &Error{Status: 429, RetryAfter: time.Second + time.Nanosecond}, 429, "2"},
		{"1.5s", &Error{Status: 503, RetryAfter: 1500 * time.Millisecond}, 503, "2"},
		{"exactly 30s", &Error{Status: 429, RetryAfter: 30 * time.Second}, 429, "30"},
		{"59.001s", &Error{Status: 429, RetryAfter: 59*time.Second + time.Millisecond}, 429, "60"},
		{"an hour", &Error{Status: 429, RetryAfter: time.Hour}, 429, "3600"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			tt.err.WriteOpenAI(rec)
			res := rec.Result()
			got := struct {
				Status      int
				ContentType string
				RetryAfter  string
				HasRetry    bool
			}{res.StatusCode, res.Header.Get("Content-Type"), res.Header.Get("Retry-After"), res.Header.Values("Retry-After") != nil}
			want := got
			want.Status, want.ContentType, want.RetryAfter, want.HasRetry = tt.status, "application/json", tt.retryAfter, tt.retryAfter != ""
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("response (-want +got):\n%s", diff)
			}
			if body := rec.Body.Bytes(); string(body) != string(tt.err.AppendOpenAI(nil)) {
				t.Errorf("body = %s, want AppendOpenAI's", body)
			}
			decodeOpenAI(t, rec.Body.Bytes())
		})
	}
}

func TestErrorWrapping(t *testing.T) {
	cause := errors.New("dial tcp: refused")
	e := &Error{Kind: KindUpstreamConnect, Status: 502, Message: "upstream unreachable", Cause: cause}
	if !errors.Is(e, cause) {
		t.Errorf("errors.Is(e, cause) = false; Unwrap must expose the cause")
	}
	if got, want := e.Error(), "upstream_connect: upstream unreachable: dial tcp: refused"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if got, want := (&Error{Kind: KindAuth, Message: "bad key"}).Error(), "auth: bad key"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}

	wrapped := fmt.Errorf("calling upstream: %w", e)
	if got := AsError(wrapped); got != e {
		t.Errorf("AsError(wrapped) = %v, want the wrapped *Error", got)
	}

	plain := errors.New("nil map write in router")
	got := AsError(plain)
	if got.Kind != KindInternal || got.Status != 500 || got.Type != "server_error" || got.Cause != plain {
		t.Errorf("AsError(plain) = %+v, want an internal 500 wrapping it", got)
	}
	if strings.Contains(string(got.AppendOpenAI(nil)), "nil map") {
		t.Errorf("AsError leaks the cause to the client: %s", got.AppendOpenAI(nil))
	}
}

func TestAppendQuote(t *testing.T) {
	tests := []struct {
		in, want string
	}{
		{"", `""`},
		{"plain", `"plain"`},
		{`"\`, `"\"\\"`},
		{"\n\r\t", `"\n\r\t"`},
		{"\x00\x01\x08\x0c\x1f", `"\u0000\u0001\u0008\u000c\u001f"`},
		{"\x7f", "\"\x7f\""},
		{"é中😀", `"é中😀"`},
		{"<>&\u2028", `"<>&\u2028"`},
		{"a\u2029b\u2027", "\"a\\u2029b\u2027\""},
		{"a\xffb", `"a\ufffdb"`},
		{"\xc3", `"\ufffd"`},
		{"\xed\xa0\x80", `"\ufffd\ufffd\ufffd"`},
		{"\xf0\x9f\x98", `"\ufffd\ufffd\ufffd"`},
		{"\uFFFD", "\"\uFFFD\""},
	}
	for _, tt := range tests {
		if got := string(AppendQuote([]byte("p"), tt.in)); got != "p"+tt.want {
			t.Errorf("AppendQuote(%q) = %s, want %s", tt.in, got[1:], tt.want)
		}
	}
}

// TestAppendQuoteEveryPosition: each byte that needs a look, at every
// position of plain text around it, so that the eight-byte skip over
// plain text (plainWord) meets it at each place in a word and at the
// ends, against log/slog's quoting.
func TestAppendQuoteEveryPosition(t *testing.T) {
	specials := []string{"\x00", "\x1f", "\x20", "\"", "\\", "\x7f", "\x80", "é", "\u2028", "😀", "\xff", "\xed\xa0\x80", "!", "#", "[", "]", "~"}
	const plain = "req_0123456789abcdefghijklmnopqrstuvwxyz"
	for _, sp := range specials {
		for n := 0; n <= 24; n++ {
			for at := 0; at <= n; at++ {
				s := plain[:at] + sp + plain[at:n]
				if got, want := string(AppendQuote(nil, s)), slogQuote(s); got != want {
					t.Fatalf("AppendQuote(%q) = %s, slog writes %s", s, got, want)
				}
			}
		}
	}
	// Every single byte value, in the middle of a word.
	for c := range 256 {
		s := "abcdefg" + string(rune(c))[:1] + "hijklmnop"
		if c >= 0x80 {
			s = "abcdefg" + string([]byte{byte(c)}) + "hijklmnop"
		}
		if got, want := string(AppendQuote(nil, s)), slogQuote(s); got != want {
			t.Fatalf("byte %#x: AppendQuote(%q) = %s, slog writes %s", c, s, got, want)
		}
	}
}

func FuzzAppendQuote(f *testing.F) {
	for _, s := range []string{"", "hello", "\"\\/\b\f\n\r\t", "\x00\x1f\x7f", "é😀\u2028<>&", "a\u2029b", "\xff\xfe", "\xed\xa0\x80", "a\xf0\x9f\x98b",
		"chatcmpl-0123456789abcdef\"quoted\"", "0123456789abcdef\\0123456789abcdef\n", "plain text of some length, then é and \u2028 late"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		q := AppendQuote(nil, s)
		if !json.Valid(q) {
			t.Fatalf("AppendQuote(%q) = %s: invalid JSON", s, q)
		}
		if !utf8.Valid(q) {
			t.Fatalf("AppendQuote(%q) = %q: invalid UTF-8", s, q)
		}
		var got string
		if err := json.Unmarshal(q, &got); err != nil {
			t.Fatalf("AppendQuote(%q) = %s: %v", s, q, err)
		}
		// encoding/json maps each byte of invalid UTF-8 to U+FFFD, as does
		// ranging over the string.
		want := string([]rune(s))
		if got != want {
			t.Fatalf("AppendQuote(%q) decodes to %q, want %q", s, got, want)
		}
		std, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		var stdGot string
		if err := json.Unmarshal(std, &stdGot); err != nil {
			t.Fatal(err)
		}
		if got != stdGot {
			t.Fatalf("AppendQuote(%q) decodes to %q, encoding/json's to %q", s, got, stdGot)
		}
		// And UnquoteString reads it back the same way.
		if back, err := UnquoteString(q); err != nil || back != want {
			t.Fatalf("UnquoteString(AppendQuote(%q)) = %q, %v; want %q", s, back, err, want)
		}
		// Byte for byte what log/slog writes: the request log line is
		// built with AppendQuote and must read as slog's would.
		if sq := slogQuote(s); string(q) != sq {
			t.Fatalf("AppendQuote(%q) = %s, slog writes %s", s, q, sq)
		}
	})
}

// slogQuote is s as log/slog's JSON handler writes a string value.
func slogQuote(s string) string {
	var buf bytes.Buffer
	only := func(groups []string, a slog.Attr) slog.Attr {
		if len(groups) == 0 && a.Key != "k" {
			return slog.Attr{} // time, level and message dropped
		}
		return a
	}
	slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{ReplaceAttr: only})).Info("", "k", s)
	return strings.TrimSuffix(strings.TrimPrefix(buf.String(), `{"k":`), "}\n")
}
