package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"gatehouse/internal/mockllm"
)

// The listener against hostile or broken clients, over raw TCP: request
// smuggling, oversized headers and bodies, slow clients, pipelining, and
// unknown routes, each answered in the caller's dialect with nothing sent
// upstream, and the gateway serving others all along.

// rawConn is a client connection to the gateway that writes bytes as
// given and reads answers one at a time.
type rawConn struct {
	t  *testing.T
	c  net.Conn
	br *bufio.Reader
}

func dialRaw(t *testing.T, gw *testGateway) *rawConn {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(gw.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	// A bound on every read, so a test that goes wrong fails instead of
	// hanging; no test's outcome depends on it.
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	return &rawConn{t: t, c: c, br: bufio.NewReader(c)}
}

func (r *rawConn) send(s string) {
	r.t.Helper()
	if _, err := io.WriteString(r.c, s); err != nil {
		r.t.Fatal(err)
	}
}

// sendPast is send for bytes the gateway may refuse before it has read
// them all: once it has answered and closed, the rest of a large write
// meets a reset, which is not the test's failure (the answer, sent
// before the reset, is still there to read).
func (r *rawConn) sendPast(s string) {
	r.t.Helper()
	if _, err := io.WriteString(r.c, s); err != nil && !errors.Is(err, syscall.ECONNRESET) && !errors.Is(err, syscall.EPIPE) {
		r.t.Fatal(err)
	}
}

// answer reads the next response, body and all.
func (r *rawConn) answer() (*http.Response, string) {
	r.t.Helper()
	return r.read(false)
}

// answerBeforeReset is answer for a server that refuses a request it has
// not read to its end: closing with unread bytes resets the connection,
// which may cut the end of the answer's body.
func (r *rawConn) answerBeforeReset() (*http.Response, string) {
	r.t.Helper()
	return r.read(true)
}

func (r *rawConn) read(resetOK bool) (*http.Response, string) {
	r.t.Helper()
	resp, err := http.ReadResponse(r.br, nil)
	if err != nil {
		r.t.Fatalf("reading an answer: %v", err)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil && !(resetOK && resp.Close) {
		r.t.Fatalf("reading an answer's body: %v", err)
	}
	return resp, string(b)
}

// closed reports whether the gateway closed the connection: a read ends
// with EOF (or a reset) rather than bytes.
func (r *rawConn) closed() bool {
	var b [1]byte
	n, err := r.br.Read(b[:])
	if n > 0 {
		r.t.Logf("more bytes after the answer: %q", b[:n])
		return false
	}
	var ne net.Error
	if err != nil && !(errorsAs(err, &ne) && ne.Timeout()) {
		return true
	}
	return false
}

func errorsAs(err error, target *net.Error) bool {
	ne, ok := err.(net.Error)
	if ok {
		*target = ne
	}
	return ok
}

// dialectError decodes an error body in either dialect and returns its
// code (OpenAI; "" when null) or type (Anthropic), failing when it is
// neither shape.
func dialectError(t *testing.T, anthropic bool, body string) string {
	t.Helper()
	if anthropic {
		var e struct {
			Type  string `json:"type"`
			Error struct {
				Type    string `json:"type"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal([]byte(body), &e); err != nil || e.Type != "error" || e.Error.Type == "" || e.Error.Message == "" {
			t.Fatalf("not an Anthropic error: %q", body)
		}
		return e.Error.Type
	}
	var e openAIError
	if err := json.Unmarshal([]byte(body), &e); err != nil || e.Error.Message == "" || e.Error.Type == "" {
		t.Fatalf("not an OpenAI error: %q", body)
	}
	if e.Error.Code == nil {
		return "" // OpenAI sends null codes too
	}
	return *e.Error.Code
}

const plainChat = `{"model":"chat","messages":[{"role":"user","content":"hi"}]}`

func chatRequest(path, extra, body string) string {
	return "POST " + path + " HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer " + clientKey + "\r\nContent-Type: application/json\r\n" + extra +
		"Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
}

// healthy checks the gateway still answers an ordinary chat request.
func healthy(t *testing.T, gw *testGateway) {
	t.Helper()
	resp, body := post(t, gw.URL+"/v1/chat/completions", "application/json", plainChat, nil)
	if resp.StatusCode != 200 {
		t.Fatalf("the gateway no longer serves: %d %s", resp.StatusCode, body)
	}
}

func TestSmugglingIsRefusedAndTheConnectionClosed(t *testing.T) {
	up := startUpstream(t, mockllm.Options{})
	gw := startGateway(t, baseConfig(up, ""))
	for _, path := range []string{"/v1/chat/completions", "/v1/messages"} {
		t.Run(path, func(t *testing.T) {
			before := up.mock.Stats().Requests
			c := dialRaw(t, gw)
			// A proxy framing by Content-Length sees one request whose
			// body is "0\r\n\r\n" and then a second one; framed by the
			// chunked encoding the second is in the same bytes.
			second := chatRequest("/v1/chat/completions", "", plainChat)
			c.send("POST " + path + " HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer " + clientKey + "\r\nContent-Type: application/json\r\n" +
				"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + second)
			resp, body := c.answer()
			if resp.StatusCode != 400 || !resp.Close {
				t.Fatalf("got %d (close %v), want 400 and the connection closed: %s", resp.StatusCode, resp.Close, body)
			}
			code := dialectError(t, path == "/v1/messages", body)
			if path != "/v1/messages" && code != "ambiguous_length" {
				t.Errorf("code %q", code)
			}
			if !c.closed() {
				t.Error("the connection stayed open: the smuggled request could be served")
			}
			if n := up.mock.Stats().Requests - before; n != 0 {
				t.Errorf("%d requests went upstream", n)
			}
		})
	}
	// Content-Length and a chunked body each alone are served, one after
	// the other on one connection.
	c := dialRaw(t, gw)
	c.send(chatRequest("/v1/chat/completions", "", plainChat))
	if resp, body := c.answer(); resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	c.send("POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer " + clientKey + "\r\nTransfer-Encoding: chunked\r\n\r\n" +
		strconv.FormatInt(int64(len(plainChat)), 16) + "\r\n" + plainChat + "\r\n0\r\n\r\n")
	if resp, body := c.answer(); resp.StatusCode != 200 {
		t.Fatalf("chunked: %d %s", resp.StatusCode, body)
	}
	healthy(t, gw)
}

func TestOversizedHeadersAndBodies(t *testing.T) {
	up := startUpstream(t, mockllm.Options{})
	gw := startGateway(t, baseConfig(up, "server: {max_body_bytes: 64KiB}\n"))
	pad := func(n int) string { return "X-Pad: " + strings.Repeat("p", n) + "\r\n" }
	big := `{"model":"chat","messages":[{"role":"user","content":"` + strings.Repeat("x", 70<<10) + `"}]}`
	tests := []struct {
		name, path, extra, body string
		chunked                 bool
		status                  int
		dialect                 bool // the body is an error in the path's dialect
	}{
		{"headers just under 32KiB", "/v1/chat/completions", pad(31 << 10), plainChat, false, 200, false},
		{"headers over 32KiB", "/v1/chat/completions", pad(33 << 10), plainChat, false, 431, true},
		{"headers over 32KiB, messages", "/v1/messages", pad(33 << 10), plainChat, false, 431, true},
		// Past net/http's 4 KiB of slack net/http would answer in plain
		// text: the connection watcher answers first, in dialect.
		{"headers at 64KiB", "/v1/chat/completions", pad(64 << 10), plainChat, false, 431, true},
		{"headers at 64KiB, messages", "/v1/messages", pad(64 << 10), plainChat, false, 431, true},
		{"headers at 1MiB", "/v1/chat/completions", pad(1 << 20), plainChat, false, 431, true},
		{"headers at 1MiB, messages", "/v1/messages", pad(1 << 20), plainChat, false, 431, true},
		{"body over the limit", "/v1/chat/completions", "", big, false, 413, true},
		{"body over the limit, messages", "/v1/messages", "", big, false, 413, true},
		{"chunked body over the limit", "/v1/chat/completions", "", big, true, 413, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := up.mock.Stats().Requests
			c := dialRaw(t, gw)
			if tt.chunked {
				c.sendPast("POST " + tt.path + " HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer " + clientKey + "\r\nTransfer-Encoding: chunked\r\n\r\n" +
					strconv.FormatInt(int64(len(tt.body)), 16) + "\r\n" + tt.body + "\r\n0\r\n\r\n")
			} else {
				c.sendPast(chatRequest(tt.path, tt.extra, tt.body))
			}
			resp, body := c.answerBeforeReset()
			if resp.StatusCode != tt.status {
				t.Fatalf("got %d, want %d: %.200s", resp.StatusCode, tt.status, body)
			}
			if tt.dialect {
				dialectError(t, tt.path == "/v1/messages", body)
			}
			if tt.status != 200 {
				if n := up.mock.Stats().Requests - before; n != 0 {
					t.Errorf("%d requests went upstream", n)
				}
			}
		})
	}
	healthy(t, gw)
}

func TestSlowClientsAreCutOffWhileOthersAreServed(t *testing.T) {
	// Streams slower than the body timeout: its deadline must be lifted
	// once the body is in.
	up := startUpstream(t, mockllm.Options{TokensPerSecond: 20, Chunks: 8})
	gw := startGateway(t, baseConfig(up, "server: {read_header_timeout: 300ms, body_read_timeout: 300ms}\n"))

	t.Run("headers trickled", func(t *testing.T) {
		c := dialRaw(t, gw)
		c.send("POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\n")
		healthy(t, gw) // served while the slow client holds its connection
		c.send("X-Slow: 1\r\n")
		// No answer is owed to a client that never finished its headers:
		// the connection is closed once read_header_timeout has passed.
		if !c.closed() {
			t.Error("the connection of a client trickling its headers stayed open")
		}
	})
	for _, path := range []string{"/v1/chat/completions", "/v1/messages"} {
		t.Run("body trickled "+path, func(t *testing.T) {
			before := up.mock.Stats().Requests
			c := dialRaw(t, gw)
			c.send("POST " + path + " HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer " + clientKey + "\r\nContent-Length: 500\r\n\r\n{\"model\":")
			healthy(t, gw)
			resp, body := c.answer() // the body never comes
			if resp.StatusCode != http.StatusRequestTimeout || !resp.Close {
				t.Fatalf("got %d (close %v), want 408 and close: %s", resp.StatusCode, resp.Close, body)
			}
			dialectError(t, path == "/v1/messages", body)
			if !c.closed() {
				t.Error("the connection stayed open")
			}
			if n := up.mock.Stats().Requests - before; n != 1 { // healthy's own request
				t.Errorf("%d requests went upstream, want 1", n)
			}
		})
	}
	t.Run("body never read", func(t *testing.T) {
		// Refused before its body is read (no key): net/http reads the
		// rest to keep the connection, and the timeout bounds that too.
		c := dialRaw(t, gw)
		c.send("POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nContent-Length: 500\r\n\r\n{")
		if resp, body := c.answer(); resp.StatusCode != 401 {
			t.Fatalf("got %d: %s", resp.StatusCode, body)
		}
		if !c.closed() {
			t.Error("the connection stayed open")
		}
	})
	t.Run("a stream outlives the body timeout", func(t *testing.T) {
		c := dialRaw(t, gw)
		c.send(chatRequest("/v1/chat/completions", "", `{"model":"chat","stream":true,"max_tokens":40,"messages":[{"role":"user","content":"a long answer please"}]}`))
		resp, body := c.answer()
		if resp.StatusCode != 200 || !strings.Contains(body, "data: [DONE]") {
			t.Fatalf("got %d: %s", resp.StatusCode, body)
		}
	})
}

func TestPipelinedRequestsAreAnsweredInOrder(t *testing.T) {
	up := startUpstream(t, mockllm.Options{})
	gw := startGateway(t, baseConfig(up, ""))
	c := dialRaw(t, gw)
	c.send("GET /healthz HTTP/1.1\r\nHost: gw\r\n\r\n" +
		chatRequest("/v1/chat/completions", "", plainChat) +
		"GET /v1/nope HTTP/1.1\r\nHost: gw\r\n\r\n" +
		chatRequest("/v1/messages", "Anthropic-Version: 2023-06-01\r\n", `{"model":"chat","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`))
	for i, want := range []struct {
		status int
		in     string
	}{{200, `"ok"`}, {200, `"chat.completion"`}, {404, `unknown_url`}, {200, `"type":"message"`}} {
		resp, body := c.answer()
		if resp.StatusCode != want.status || !strings.Contains(body, want.in) {
			t.Fatalf("answer %d: %d %s, want %d with %s", i, resp.StatusCode, body, want.status, want.in)
		}
	}
}

func TestUnknownRoutesAndMethodsAnswerInTheirDialect(t *testing.T) {
	up := startUpstream(t, mockllm.Options{})
	gw := startGateway(t, baseConfig(up, ""))
	tests := []struct {
		method, path string
		status       int
		anthropic    bool
	}{
		{"GET", "/v1/chat/completions", 405, false},
		{"PUT", "/v1/embeddings", 405, false},
		{"GET", "/v1/responses", 405, false},
		{"GET", "/v1/messages", 405, true},
		{"DELETE", "/v1/messages/count_tokens", 405, true},
		{"POST", "/v1/messages/batches", 404, true},
		{"POST", "/v1/nope", 404, false},
		{"POST", "/v1/chat/completions/extra", 404, false},
		{"BREW", "/v1/chat/completions", 405, false},
		{"OPTIONS", "*", 400, false},
		{"POST", "/v1//chat/completions", 404, false},
		{"POST", "/v1/./messages", 404, true},
		{"POST", "/v1/../v1/chat/completions", 404, false},
	}
	before := up.mock.Stats().Requests
	for _, tt := range tests {
		c := dialRaw(t, gw)
		c.send(tt.method + " " + tt.path + " HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer " + clientKey + "\r\nContent-Length: 2\r\n\r\n{}")
		resp, body := c.answer()
		if resp.StatusCode != tt.status {
			t.Errorf("%s %s: %d, want %d: %s", tt.method, tt.path, resp.StatusCode, tt.status, body)
			continue
		}
		dialectError(t, tt.anthropic, body)
	}
	if n := up.mock.Stats().Requests - before; n != 0 {
		t.Errorf("%d requests went upstream", n)
	}
	healthy(t, gw)
}
