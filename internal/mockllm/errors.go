package mockllm

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"

	"gatehouse/internal/llm"
)

// apiError is one of OpenAI's error responses:
// {"error":{"message":…,"type":…,"param":…,"code":…}} with its status.
// Empty param and code are sent as null, as OpenAI does.
type apiError struct {
	status     int
	message    string
	typ        string
	param      string
	code       string
	retryAfter string
}

func (e *apiError) append(b []byte) []byte {
	b = append(b, `{"error":{"message":`...)
	b = llm.AppendQuote(b, e.message)
	b = append(b, `,"type":`...)
	b = llm.AppendQuote(b, e.typ)
	b = append(b, `,"param":`...)
	b = appendNullable(b, e.param)
	b = append(b, `,"code":`...)
	b = appendNullable(b, e.code)
	return append(b, "}}"...)
}

// fail answers with e. Injected errors and validation failures are both
// counted in Stats.Errors.
func (c *call) fail(e *apiError) {
	if e.retryAfter != "" {
		c.w.Header()["Retry-After"] = []string{e.retryAfter}
	}
	c.writeJSON(e.status, e.append(make([]byte, 0, 128+len(e.message))))
}

func invalidRequest(param, code, format string, args ...any) *apiError {
	return &apiError{status: http.StatusBadRequest, typ: "invalid_request_error",
		param: param, code: code, message: fmt.Sprintf(format, args...)}
}

var (
	errBodyTooLarge = &apiError{status: http.StatusRequestEntityTooLarge, typ: "invalid_request_error",
		message: "The request body is too large."}
	errMalformedJSON = invalidRequest("", "", "We could not parse the JSON body of your request. "+
		"(HINT: This likely means you aren't using your HTTP library correctly. The OpenAI API expects "+
		"a JSON payload, but what was sent was not valid JSON.)")
	errNoAPIKey = &apiError{status: http.StatusUnauthorized, typ: "invalid_request_error",
		message: "You didn't provide an API key. You need to provide your API key in an Authorization " +
			"header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY)."}
)

func missingModel() *apiError {
	return invalidRequest("", "", "you must provide a model parameter")
}

func missingParam(name string) *apiError {
	return invalidRequest(name, "missing_required_parameter", "Missing required parameter: '%s'.", name)
}

func incorrectAPIKey(key string) *apiError {
	return &apiError{status: http.StatusUnauthorized, typ: "invalid_request_error", code: "invalid_api_key",
		message: "Incorrect API key provided: " + maskKey(key) +
			". You can find your API key at https://platform.openai.com/account/api-keys."}
}

// maskKey shows only the ends of a key, as OpenAI does, so a key pasted
// into the wrong place is recognisable without being leaked into logs.
func maskKey(k string) string {
	if len(k) <= 8 {
		return strings.Repeat("*", len(k))
	}
	return k[:3] + strings.Repeat("*", len(k)-7) + k[len(k)-4:]
}

func invalidURL(method, path string) *apiError {
	return &apiError{status: http.StatusNotFound, typ: "invalid_request_error",
		message: "Invalid URL (" + method + " " + path + ")"}
}

func modelNotFound(id string) *apiError {
	return &apiError{status: http.StatusNotFound, typ: "invalid_request_error", param: "model", code: "model_not_found",
		message: "The model '" + id + "' does not exist or you do not have access to it."}
}

// typeError turns an error of json.Unmarshal into OpenAI's answer: the
// "could not parse" 400 for anything that is not a JSON object, else
// OpenAI's wording for a field of the wrong type, e.g. "Invalid type for
// 'messages': expected an array of objects, but got a string instead."
func typeError(err error) *apiError {
	var te *json.UnmarshalTypeError
	if !errors.As(err, &te) || te.Field == "" {
		return errMalformedJSON
	}
	field := te.Field
	want := "a valid value"
	switch te.Type.String() {
	case "string", "*string":
		want = "a string"
	case "bool":
		want = "a boolean"
	case "int", "*int":
		want = "an integer"
	case "float64":
		want = "a number"
	case "[]mockllm.chatMessage":
		want = "an array of objects"
	case "mockllm.chatMessage", "*mockllm.streamOptions":
		want = "an object"
	case "mockllm.plain": // the lenient objects' UnmarshalJSON decodes into a local type of this name
		want = "an object"
	case "[]string":
		want = "an array of strings"
	case "[]json.RawMessage":
		want = "an array of objects"
	}
	got, _, _ := strings.Cut(te.Value, " ")
	switch got {
	case "number":
		got = "a number"
	case "bool":
		got = "a boolean"
	case "array":
		got = "an array"
	case "object":
		got = "an object"
	case "string":
		got = "a string"
	}
	return invalidRequest(field, "invalid_type", "Invalid type for '%s': expected %s, but got %s instead.", field, want, got)
}

// injectedError is the body OpenAI sends for status, so a gateway's
// error classification is exercised against the real shapes.
func injectedError(status int, model, retryAfter string) *apiError {
	e := &apiError{status: status, retryAfter: retryAfter, typ: "invalid_request_error"}
	switch {
	case status == http.StatusTooManyRequests:
		wait := retryAfter
		if wait == "" {
			wait = "1"
		}
		if _, err := strconv.ParseFloat(wait, 64); err == nil {
			wait += "s"
		}
		e.typ, e.code = "requests", "rate_limit_exceeded"
		e.message = "Rate limit reached for " + model + " in organization org-mockllm on requests per min (RPM): " +
			"Limit 60, Used 60, Requested 1. Please try again in " + wait +
			". Visit https://platform.openai.com/account/rate-limits to learn more."
	case status == http.StatusUnauthorized:
		e.code = "invalid_api_key"
		e.message = "Incorrect API key provided. You can find your API key at https://platform.openai.com/account/api-keys."
	case status == http.StatusNotFound:
		return &apiError{status: status, retryAfter: retryAfter, typ: "invalid_request_error", param: "model",
			code: "model_not_found", message: modelNotFound(model).message}
	case status == http.StatusServiceUnavailable:
		e.typ = "server_error"
		e.message = "The engine is currently overloaded, please try again later."
	case status >= 500:
		e.typ = "server_error"
		e.message = "The server had an error while processing your request. Sorry about that!"
	default:
		e.message = "mockllm injected error: " + strconv.Itoa(status) + " " + http.StatusText(status) + "."
	}
	return e
}

func appendNullable(b []byte, s string) []byte {
	if s == "" {
		return append(b, "null"...)
	}
	return llm.AppendQuote(b, s)
}

func appendInt(b []byte, n int64) []byte { return strconv.AppendInt(b, n, 10) }

func itoa(n int) string { return strconv.Itoa(n) }

const idAlphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

// newRequestID returns an x-request-id in OpenAI's "req_" + 32 hex form.
func newRequestID() string {
	const hex = "0123456789abcdef"
	var b [36]byte
	copy(b[:], "req_")
	x, y := rand.Uint64(), rand.Uint64()
	for i := range 16 {
		b[4+i] = hex[x&0xf]
		b[20+i] = hex[y&0xf]
		x >>= 4
		y >>= 4
	}
	return string(b[:])
}

// appendCompletionID appends a "chatcmpl-" id with 29 random characters,
// the length OpenAI's ids have.
func appendCompletionID(b []byte) []byte {
	b = append(b, "chatcmpl-"...)
	x := rand.Uint64()
	for i := range 29 {
		if i == 10 || i == 20 {
			x = rand.Uint64()
		}
		b = append(b, idAlphabet[x%62])
		x /= 62
	}
	return b
}
