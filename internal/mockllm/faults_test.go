package mockllm

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
)

// faultDialect builds one provider's chat request carrying a directive.
type faultDialect struct {
	name string
	req  func(directive string, stream bool) (path, body string, hdr map[string]string)
	// done is how a complete stream of this dialect ends.
	done string
	// errMark is a piece of the provider's error object.
	errMark string
}

var faultDialects = []faultDialect{
	{"openai", func(d string, stream bool) (string, string, map[string]string) {
		return "/v1/chat/completions", chatJSON("gpt-4o", "hello "+d, stream, false), nil
	}, "data: [DONE]\n\n", `{"error":{"message":"mockllm injected fault`},
	{"azure", func(d string, stream bool) (string, string, map[string]string) {
		return "/openai/deployments/prod-4o/chat/completions?api-version=2024-10-21", chatJSON("gpt-4o", "hello "+d, stream, false), nil
	}, "data: [DONE]\n\n", `{"error":{"message":"mockllm injected fault`},
	{"responses", func(d string, stream bool) (string, string, map[string]string) {
		return "/v1/responses", `{"model":"gpt-4o","input":` + quote("hello "+d) + `,"stream":` + boolText(stream) + `}`, nil
	}, "event: response.completed", `server_error`},
	{"anthropic", func(d string, stream bool) (string, string, map[string]string) {
		return "/v1/messages", `{"model":"claude-sonnet-4-5","max_tokens":64000,"stream":` + boolText(stream) +
				`,"messages":[{"role":"user","content":` + quote("hello "+d) + `}]}`,
			map[string]string{"Anthropic-Version": "2023-06-01"}
	}, "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n", `{"type":"error","error":{"type":"api_error"`},
	{"gemini", func(d string, stream bool) (string, string, map[string]string) {
		path := "/v1beta/models/gemini-2.5-flash:generateContent"
		if stream {
			path = "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
		}
		return path, `{"contents":[{"role":"user","parts":[{"text":` + quote("hello "+d) + `}]}]}`, nil
	}, `"finishReason": "STOP"`, `"status": "INTERNAL"`},
	{"gemini array", func(d string, stream bool) (string, string, map[string]string) {
		path := "/v1beta/models/gemini-2.5-flash:generateContent"
		if stream {
			path = "/v1beta/models/gemini-2.5-flash:streamGenerateContent"
		}
		return path, `{"contents":[{"role":"user","parts":[{"text":` + quote("hello "+d) + `}]}]}`, nil
	}, `"finishReason": "STOP"`, `"status": "INTERNAL"`},
	{"ollama", func(d string, stream bool) (string, string, map[string]string) {
		return "/api/chat", ollamaChatJSON("llama3.2", "hello "+d, ptrBool(stream), ""), nil
	}, `"done":true`, `{"error":"mockllm injected fault`},
	{"bedrock", func(d string, stream bool) (string, string, map[string]string) {
		op := "converse"
		if stream {
			op = "converse-stream"
		}
		return "/model/anthropic.claude-3-haiku-20240307-v1%3A0/" + op,
			`{"messages":[{"role":"user","content":[{"text":` + quote("hello "+d) + `}]}]}`, nil
	}, "metadata", `{"message":"mockllm injected fault`},
}

func boolText(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

// faultResult is what a client read: the status, the bytes, and the error
// that ended the read (nil for a clean end).
type faultResult struct {
	status int
	body   []byte
	err    error
}

func faultDo(t *testing.T, url string, d faultDialect, directive string, stream bool) faultResult {
	t.Helper()
	path, body, hdr := d.req(directive, stream)
	// A fresh transport per request: a reset or cut connection must not
	// be confused with a kept-alive one.
	tr := &http.Transport{DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Do(newRequest(t, context.Background(), "POST", url+path, body, hdr))
	if err != nil {
		return faultResult{err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return faultResult{resp.StatusCode, b, err}
}

func TestFaultDirectivesEveryDialect(t *testing.T) {
	_, ts := start(t, Options{})
	for _, d := range faultDialects {
		t.Run(d.name, func(t *testing.T) {
			t.Run("control", func(t *testing.T) {
				r := faultDo(t, ts.URL, d, "", true)
				if r.err != nil || r.status != 200 || !bytes.Contains(r.body, []byte(d.done)) {
					t.Fatalf("a stream without faults: %d %v, no %q in %q", r.status, r.err, d.done, r.body)
				}
			})
			t.Run("truncate plain", func(t *testing.T) {
				r := faultDo(t, ts.URL, d, "@mock(truncate)", false)
				if !errors.Is(r.err, io.ErrUnexpectedEOF) {
					t.Errorf("read error %v, want an unexpected EOF under Content-Length", r.err)
				}
				if r.status != 200 || len(r.body) == 0 || json.Valid(r.body) {
					t.Errorf("status %d body %q: want a 200 with half a JSON body", r.status, r.body)
				}
			})
			t.Run("truncate stream", func(t *testing.T) {
				r := faultDo(t, ts.URL, d, "@mock(truncate=2)", true)
				if r.err != nil || r.status != 200 {
					t.Fatalf("status %d err %v: want a stream that ends cleanly", r.status, r.err)
				}
				if bytes.Contains(r.body, []byte(d.done)) {
					t.Errorf("the truncated stream still ends with %q: %q", d.done, r.body)
				}
				if d.name != "bedrock" && (bytes.HasSuffix(r.body, []byte("\n\n")) || bytes.HasSuffix(r.body, []byte("\r\n\r\n"))) {
					t.Errorf("the stream ends on a whole event: %q", r.body)
				}
			})
			t.Run("malformed plain", func(t *testing.T) {
				r := faultDo(t, ts.URL, d, "@mock(malformed)", false)
				if r.err != nil || r.status != 200 || json.Valid(r.body) || len(r.body) == 0 {
					t.Errorf("status %d err %v body %q: want a whole response whose JSON is broken", r.status, r.err, r.body)
				}
			})
			t.Run("malformed stream", func(t *testing.T) {
				r := faultDo(t, ts.URL, d, "@mock(malformed=1)", true)
				if r.err != nil || r.status != 200 || !bytes.Contains(r.body, []byte(d.done)) {
					t.Fatalf("status %d err %v: want the stream to go on to its end: %q", r.status, r.err, r.body)
				}
				if !brokenEvent(d.name, r.body) {
					t.Errorf("no broken event in %q", r.body)
				}
			})
			t.Run("error_in_200 plain", func(t *testing.T) {
				r := faultDo(t, ts.URL, d, "@mock(error_in_200)", false)
				if r.err != nil || r.status != 200 || !bytes.Contains(r.body, []byte(d.errMark)) {
					t.Errorf("status %d err %v body %q: want a 200 carrying %q", r.status, r.err, r.body, d.errMark)
				}
			})
			t.Run("error_in_200 stream", func(t *testing.T) {
				r := faultDo(t, ts.URL, d, "@mock(error_in_200=2)", true)
				if r.err != nil || r.status != 200 || bytes.Contains(r.body, []byte(d.done)) {
					t.Fatalf("status %d err %v body %q: want a 200 stream ended by an error", r.status, r.err, r.body)
				}
				mark := d.errMark
				if d.name == "bedrock" {
					mark = ":exception-type"
				}
				if d.name == "gemini" {
					mark = `"status": "INTERNAL"}}` + "\r\n\r\n"
				}
				if !bytes.Contains(r.body, []byte(mark)) {
					t.Errorf("no %q in %q", mark, r.body)
				}
			})
			t.Run("reset_after", func(t *testing.T) {
				r := faultDo(t, ts.URL, d, "@mock(reset_after=2)", true)
				if !errors.Is(r.err, syscall.ECONNRESET) {
					t.Errorf("read error %v, want a connection reset", r.err)
				}
				if r.status != 200 || len(r.body) == 0 {
					t.Errorf("status %d, %d bytes: want the events before the reset", r.status, len(r.body))
				}
			})
			t.Run("huge", func(t *testing.T) {
				for _, stream := range []bool{false, true} {
					r := faultDo(t, ts.URL, d, "@mock(huge=300000)", stream)
					if r.err != nil || r.status != 200 || len(r.body) < 300000 {
						t.Errorf("stream %v: status %d err %v, %d bytes: want over 300000", stream, r.status, r.err, len(r.body))
					}
					if n := bytes.Count(r.body, []byte("lorem ipsum")); n < 300000/len("lorem ipsum dolor sit amet ")-1 {
						t.Errorf("stream %v: the reply holds %d words of the huge text", stream, n)
					}
				}
			})
		})
	}
}

// brokenEvent reports whether a stream holds an event its client cannot
// parse: an SSE data line or NDJSON line that is not JSON, a JSON array
// that does not parse, or an event-stream frame whose CRC is wrong.
func brokenEvent(dialect string, body []byte) bool {
	switch dialect {
	case "bedrock":
		for len(body) >= 16 {
			n := int(binary.BigEndian.Uint32(body))
			if n > len(body) || n < 16 {
				return true
			}
			if crc32.ChecksumIEEE(body[:n-4]) != binary.BigEndian.Uint32(body[n-4:n]) {
				return true
			}
			body = body[n:]
		}
		return false
	case "gemini array":
		return !json.Valid(body)
	case "ollama":
		for line := range strings.SplitSeq(strings.TrimSpace(string(body)), "\n") {
			if !json.Valid([]byte(line)) {
				return true
			}
		}
		return false
	}
	for line := range strings.SplitSeq(string(body), "\n") {
		data, ok := strings.CutPrefix(strings.TrimRight(line, "\r"), "data: ")
		if ok && data != "[DONE]" && !json.Valid([]byte(data)) {
			return true
		}
	}
	return false
}

func TestFaultDirectiveValues(t *testing.T) {
	_, ts := start(t, Options{})
	for _, bad := range []string{"@mock(truncate=-1)", "@mock(malformed=x)", "@mock(huge=2000000000)", "@mock(reset_after=no)"} {
		resp, b := do(t, ts, "POST", "/v1/chat/completions", chatJSON("m", bad, false, false), nil)
		if resp.StatusCode != 400 || !strings.Contains(string(b), "invalid_mock_directive") {
			t.Errorf("%s: %d %s, want a 400 naming the directive", bad, resp.StatusCode, b)
		}
	}
	// false switches a fault off, so a header can undo a directive.
	resp, b := do(t, ts, "POST", "/v1/chat/completions", chatJSON("m", "@mock(error_in_200)", false, false),
		map[string]string{"X-Mock-Error-In-200": "false"})
	if resp.StatusCode != 200 || strings.Contains(string(b), `"error"`) {
		t.Errorf("error_in_200 switched off by header: %d %s", resp.StatusCode, b)
	}
}

// TestFaultDirectivesInEmbeddings: a directive in an embedding input arms
// the whole-body faults on OpenAI's, Gemini's and Ollama's embeddings,
// huge answers, and cuts (an embedding has no chunks: half the body,
// then the cut).
func TestFaultDirectivesInEmbeddings(t *testing.T) {
	_, ts := start(t, Options{Models: []string{"all-minilm"}})
	for _, d := range []faultDialect{
		{"openai", func(d string, _ bool) (string, string, map[string]string) {
			return "/v1/embeddings", `{"model":"text-embedding-3-small","input":["first",` + quote("hello "+d) + `]}`, nil
		}, `"usage"`, `{"error":{"message":"mockllm injected fault`},
		{"gemini", func(d string, _ bool) (string, string, map[string]string) {
			return "/v1beta/models/gemini-embedding-001:embedContent", `{"content":{"parts":[{"text":` + quote("hello "+d) + `}]}}`, nil
		}, `"values"`, `"status": "INTERNAL"`},
		{"ollama", func(d string, _ bool) (string, string, map[string]string) {
			return "/api/embed", `{"model":"all-minilm","input":` + quote("hello "+d) + `}`, nil
		}, `"embeddings"`, `{"error":"mockllm injected fault`},
	} {
		t.Run(d.name, func(t *testing.T) {
			if r := faultDo(t, ts.URL, d, "", false); r.err != nil || r.status != 200 || !bytes.Contains(r.body, []byte(d.done)) {
				t.Fatalf("without a fault: %d %v %q", r.status, r.err, r.body)
			}
			if r := faultDo(t, ts.URL, d, "@mock(error_in_200)", false); r.status != 200 || !bytes.Contains(r.body, []byte(d.errMark)) {
				t.Errorf("error_in_200: %d %q; want a 200 with %q", r.status, r.body, d.errMark)
			}
			if r := faultDo(t, ts.URL, d, "@mock(truncate)", false); !errors.Is(r.err, io.ErrUnexpectedEOF) || json.Valid(r.body) {
				t.Errorf("truncate: %v %q; want half a body under its Content-Length", r.err, r.body)
			}
			if r := faultDo(t, ts.URL, d, "@mock(malformed)", false); r.err != nil || r.status != 200 || json.Valid(r.body) {
				t.Errorf("malformed: %d %v %q; want a 200 whose JSON is broken", r.status, r.err, r.body)
			}
			for _, n := range []int{300000, 300001, 123457} {
				r := faultDo(t, ts.URL, d, fmt.Sprintf("@mock(huge=%d)", n), false)
				if r.err != nil || r.status != 200 || len(r.body) != n || !json.Valid(r.body) || !bytes.Contains(r.body, []byte(d.done)) {
					t.Errorf("huge=%d: %d %v, %d bytes; want a whole answer of exactly %d", n, r.status, r.err, len(r.body), n)
				}
				// The bytes are vectors, not only padding.
				end := bytes.LastIndexByte(r.body, '}')
				if pad := end - len(bytes.TrimRight(r.body[:max(end, 0)], " ")); pad > n/10 {
					t.Errorf("huge=%d: %d of the %d bytes are spaces", n, pad, len(r.body))
				}
			}
			// Less than the usual answer: the usual answer.
			if plain, r := faultDo(t, ts.URL, d, "", false), faultDo(t, ts.URL, d, "@mock(huge=10)", false); r.err != nil ||
				r.status != 200 || len(r.body) < len(plain.body)-40 || !json.Valid(r.body) {
				t.Errorf("huge=10: %d %v, %d bytes; want the usual answer (%d bytes)", r.status, r.err, len(r.body), len(plain.body))
			}
			if r := faultDo(t, ts.URL, d, "@mock(reset_after=0)", false); !errors.Is(r.err, syscall.ECONNRESET) || json.Valid(r.body) {
				t.Errorf("reset_after: %v, %d bytes; want ECONNRESET before the body's end", r.err, len(r.body))
			}
			if r := faultDo(t, ts.URL, d, "@mock(fail_after=3)", false); !errors.Is(r.err, io.ErrUnexpectedEOF) || json.Valid(r.body) {
				t.Errorf("fail_after: %v %q; want half the body under its Content-Length", r.err, r.body)
			}
		})
	}
}
