package main

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"testing/iotest"
)

// piecewise delivers its input n bytes a read, as a socket may.
type piecewise struct {
	s []byte
	n int
}

func (p *piecewise) Read(b []byte) (int, error) {
	if len(p.s) == 0 {
		return 0, io.EOF
	}
	k := min(p.n, len(b), len(p.s))
	copy(b, p.s[:k])
	p.s = p.s[k:]
	return k, nil
}

// readers gives the same bytes whole, a byte a read, and in pieces of a
// few bytes (lines and chunks cut everywhere).
func readers(s string) map[string]func() io.Reader {
	return map[string]func() io.Reader{
		"whole":    func() io.Reader { return strings.NewReader(s) },
		"one-byte": func() io.Reader { return iotest.OneByteReader(strings.NewReader(s)) },
		"by-3":     func() io.Reader { return &piecewise{s: []byte(s), n: 3} },
		"by-7":     func() io.Reader { return &piecewise{s: []byte(s), n: 7} },
	}
}

func TestReadResponseWellFormed(t *testing.T) {
	type want struct {
		status    int
		bodyLen   int64
		close     bool
		rateLimit bool
		cache     string // "" absent
		overhead  string
		head      string // a non-200's kept body
	}
	for _, tc := range []struct {
		name, in string
		want     want
	}{
		{"content-length", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Type: text/plain\r\n\r\nhello",
			want{status: 200, bodyLen: 5}},
		{"no reason phrase", "HTTP/1.1 200\r\nContent-Length: 2\r\n\r\nok",
			want{status: 200, bodyLen: 2}},
		{"names in any case, values trimmed", "HTTP/1.1 200 OK\r\ncontent-LENGTH:3\r\nX-GATEHOUSE-CACHE: \tHit \r\nx-ratelimit-limit-requests: 100\r\nX-Gatehouse-Overhead-Ms: 0.042\r\n\r\nabc",
			want{status: 200, bodyLen: 3, rateLimit: true, cache: "Hit", overhead: "0.042"}},
		{"the same content-length twice", "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc",
			want{status: 200, bodyLen: 3}},
		{"similar names are not the headers", "HTTP/1.1 200 OK\r\nX-Ratelimit-Limit-Tokens: 5\r\nX-Gatehouse-Cache-Ttl: 0\r\n" +
			// as long as names read, differing in a full word and in the tail
			"X-Ratelimit-Reset-Requests: 5\r\nX-Ratelimit-Limit-Requestz: 5\r\nX-Gatehouse-Cachf: hit\r\nContent-Length: 0\r\n\r\n",
			want{status: 200}},
		{"a colon where a name of gatehouse's would end is not enough", "HTTP/1.1 200 OK\r\nX-Other: 12345678:9\r\nX-Another-One: 12345678:0\r\nX-Yet-Another: 12345678901:0\r\nContent-Length: 0\r\n\r\n",
			want{status: 200}},
		{"connection close in a list", "HTTP/1.1 200 OK\r\nConnection: keep-alive , Close\r\nContent-Length: 1\r\n\r\nx",
			want{status: 200, bodyLen: 1, close: true}},
		{"connection keep-alive", "HTTP/1.1 200 OK\r\nConnection: keep-alive\r\nContent-Length: 1\r\n\r\nx",
			want{status: 200, bodyLen: 1}},
		{"chunked with extensions and trailers", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" +
			"5;name=value\r\nhello\r\n6 ; ext\r\n world\r\nA\r\n0123456789\r\n0;last\r\nX-Trailer: a\r\nX-Other: b\r\n\r\n",
			want{status: 200, bodyLen: 21}},
		{"chunked, upper-case coding, no trailers", "HTTP/1.1 200 OK\r\nTransfer-Encoding: CHUNKED\r\n\r\n1a\r\n" + strings.Repeat("z", 26) + "\r\n0\r\n\r\n",
			want{status: 200, bodyLen: 26}},
		{"chunked, SSE-like, 1 KiB chunks", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" +
			strings.Repeat("400\r\n"+strings.Repeat("d", 1024)+"\r\n", 9) + "0\r\n\r\n",
			want{status: 200, bodyLen: 9 * 1024}},
		{"a body larger than the buffer", "HTTP/1.1 200 OK\r\nContent-Length: 20000\r\n\r\n" + strings.Repeat("b", 20000),
			want{status: 200, bodyLen: 20000}},
		{"a non-200 keeps its body's start", "HTTP/1.1 429 Too Many Requests\r\nContent-Length: 19\r\n\r\n{\"error\":\"slow\"}   ",
			want{status: 429, bodyLen: 19, head: "{\"error\":\"slow\"}   "}},
		{"a long cache value is kept as too long", "HTTP/1.1 200 OK\r\nX-Gatehouse-Cache: " + strings.Repeat("h", 40) + "\r\nContent-Length: 0\r\n\r\n",
			want{status: 200, cache: strings.Repeat("h", 32) + "…"}},
	} {
		for rname, rd := range readers(tc.in + tc.in) {
			t.Run(tc.name+"/"+rname, func(t *testing.T) {
				br := bufio.NewReaderSize(rd(), rawReadBuffer)
				for i := range 2 { // two responses on one connection
					var resp rawResponse
					if err := readResponse(br, &resp); err != nil {
						t.Fatalf("response %d: %v", i, err)
					}
					got := want{status: resp.status, bodyLen: resp.bodyLen, close: resp.close, rateLimit: resp.rateLimit, head: string(resp.bodyHead())}
					if resp.cache.n >= 0 {
						got.cache = resp.cache.String()
					}
					if resp.overhead.n >= 0 {
						got.overhead = resp.overhead.String()
					}
					if got != tc.want {
						t.Fatalf("response %d: got %+v, want %+v", i, got, tc.want)
					}
				}
				var resp rawResponse
				if err := readResponse(br, &resp); !errors.Is(err, errNoResponse) {
					t.Fatalf("after the last response: %v, want errNoResponse", err)
				}
			})
		}
	}
}

// TestReadResponseSkipGatehouse reads responses with gatehouse's x-
// fields left unread: the framing is read as before, the x- fields not
// at all, and the flag outlives the read (the next response skips them
// too).
func TestReadResponseSkipGatehouse(t *testing.T) {
	const one = "HTTP/1.1 200 OK\r\nX-Gatehouse-Cache: hit\r\nx-ratelimit-limit-requests: 100\r\nX-Gatehouse-Overhead-Ms: 0.042\r\n" +
		"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n3\r\nabc\r\n0\r\n\r\n"
	for rname, rd := range readers(one + one) {
		t.Run(rname, func(t *testing.T) {
			br := bufio.NewReaderSize(rd(), rawReadBuffer)
			resp := rawResponse{skipGatehouse: true}
			for i := range 2 {
				if err := readResponse(br, &resp); err != nil {
					t.Fatalf("response %d: %v", i, err)
				}
				if !resp.skipGatehouse || resp.status != 200 || resp.bodyLen != 3 || !resp.close {
					t.Fatalf("response %d: framing not read: %+v", i, resp)
				}
				if resp.rateLimit || resp.cache.n >= 0 || resp.overhead.n >= 0 {
					t.Fatalf("response %d: x- fields read: rateLimit %v, cache %s, overhead %s", i, resp.rateLimit, resp.cache.String(), resp.overhead.String())
				}
			}
		})
	}
}

func TestReadResponseMalformed(t *testing.T) {
	const ok = "HTTP/1.1 200 OK\r\n"
	for _, tc := range []struct {
		name, in string
		want     error
	}{
		{"nothing", "", errNoResponse},
		{"HTTP/1.0", "HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n", errMalformed},
		{"two-digit status", "HTTP/1.1 20 OK\r\nContent-Length: 0\r\n\r\n", errMalformed},
		{"status not digits", "HTTP/1.1 2x0 OK\r\nContent-Length: 0\r\n\r\n", errMalformed},
		{"status glued to reason", "HTTP/1.1 200OK\r\nContent-Length: 0\r\n\r\n", errMalformed},
		{"informational", "HTTP/1.1 100 Continue\r\n\r\n", errMalformed},
		{"bare LF", "HTTP/1.1 200 OK\nContent-Length: 0\n\n", errMalformed},
		{"header without a colon", ok + "Content-Length 0\r\n\r\n", errMalformed},
		{"space before the colon", ok + "Content-Length : 0\r\n\r\n", errMalformed},
		{"empty name", ok + ": x\r\nContent-Length: 0\r\n\r\n", errMalformed},
		{"folded line", ok + "X-A: 1\r\n continued\r\nContent-Length: 0\r\n\r\n", errMalformed},
		{"content-length not a number", ok + "Content-Length: 5a\r\n\r\nhello", errMalformed},
		{"content-length negative", ok + "Content-Length: -1\r\n\r\n", errMalformed},
		{"content-length empty", ok + "Content-Length:\r\n\r\n", errMalformed},
		{"content-lengths differ", ok + "Content-Length: 3\r\nContent-Length: 4\r\n\r\nabcd", errMalformed},
		{"content-length and chunked", ok + "Content-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n", errMalformed},
		{"neither", ok + "Content-Type: text/plain\r\n\r\nhello", errMalformed},
		{"another coding", ok + "Transfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n", errMalformed},
		{"chunked twice", ok + "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", errMalformed},
		{"body short", ok + "Content-Length: 10\r\n\r\nhello", io.ErrUnexpectedEOF},
		{"cut in the headers", ok + "Content-Length: 1", io.ErrUnexpectedEOF},
		{"cut after the headers' lines", ok + "Content-Length: 1\r\n", io.ErrUnexpectedEOF},
		{"chunk size not hex", ok + "Transfer-Encoding: chunked\r\n\r\nzz\r\n", errMalformed},
		{"chunk size empty", ok + "Transfer-Encoding: chunked\r\n\r\n\r\n", errMalformed},
		{"chunk size then junk", ok + "Transfer-Encoding: chunked\r\n\r\n5 x\r\nhello\r\n0\r\n\r\n", errMalformed},
		{"chunk size too large", ok + "Transfer-Encoding: chunked\r\n\r\n1000000000000000\r\n", errMalformed},
		{"chunk longer than its size", ok + "Transfer-Encoding: chunked\r\n\r\n3\r\nhello\r\n0\r\n\r\n", errMalformed},
		{"chunk cut off", ok + "Transfer-Encoding: chunked\r\n\r\n5\r\nhel", io.ErrUnexpectedEOF},
		{"no last chunk", ok + "Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n", io.ErrUnexpectedEOF},
		{"trailers not ended", ok + "Transfer-Encoding: chunked\r\n\r\n0\r\nX-T: 1\r\n", io.ErrUnexpectedEOF},
		{"a header line longer than the buffer", ok + "X-Long: " + strings.Repeat("l", rawReadBuffer) + "\r\nContent-Length: 0\r\n\r\n", errMalformed},
	} {
		for rname, rd := range readers(tc.in) {
			t.Run(tc.name+"/"+rname, func(t *testing.T) {
				var resp rawResponse
				err := readResponse(bufio.NewReaderSize(rd(), rawReadBuffer), &resp)
				if !errors.Is(err, tc.want) {
					t.Fatalf("got %v, want %v", err, tc.want)
				}
			})
		}
	}
}

// TestReadResponseAllocates nothing: the client's share of the count
// must not grow with what the response carries.
func TestReadResponseAllocatesNothing(t *testing.T) {
	one := "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nX-Gatehouse-Cache: hit\r\nX-Ratelimit-Limit-Requests: 9\r\nX-Gatehouse-Overhead-Ms: 0.01\r\n\r\n" +
		"7;e=1\r\ndata: x\r\n0\r\nX-T: 1\r\n\r\n"
	in := strings.NewReader(one)
	br := bufio.NewReaderSize(in, rawReadBuffer)
	var resp rawResponse
	allocs := testing.AllocsPerRun(100, func() {
		in.Reset(one)
		br.Reset(in)
		if err := readResponse(br, &resp); err != nil {
			t.Fatal(err)
		}
		if !resp.cache.equalFold("hit") || !resp.rateLimit {
			t.Fatalf("got %+v", resp)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations a response, want 0", allocs)
	}
}

// serveCanned answers each request read on a loopback listener with the
// next of responses (closing the connection after those marked with a
// leading "!"), and sends every request's bytes on reqs.
func serveCanned(t *testing.T, responses []string) (base string, reqs <-chan []byte) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	ch := make(chan []byte, len(responses)+1)
	go func() {
		for len(responses) > 0 {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			br := bufio.NewReader(c)
			for len(responses) > 0 {
				req, err := http.ReadRequest(br)
				if err != nil {
					break
				}
				body, _ := io.ReadAll(req.Body)
				ch <- body
				r := responses[0]
				responses = responses[1:]
				hangUp := strings.HasPrefix(r, "!")
				_, _ = io.WriteString(c, strings.TrimPrefix(r, "!"))
				if hangUp {
					break
				}
			}
			c.Close()
		}
	}()
	return "http://" + ln.Addr().String(), ch
}

func TestRawClientDo(t *testing.T) {
	const good = "HTTP/1.1 200 OK\r\nX-Gatehouse-Cache: HIT\r\nContent-Length: 2\r\n\r\nok"
	for _, tc := range []struct {
		name      string
		responses []string
		cache     string
		wantErr   string // "" none
	}{
		{"a 200", []string{good}, "", ""},
		{"the cache value, any case", []string{good}, "hit", ""},
		{"the wrong cache value", []string{good}, "miss", `x-gatehouse-cache "HIT", want "miss"`},
		{"no cache header", []string{"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"}, "hit", `x-gatehouse-cache "(absent)"`},
		{"a 500", []string{"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 4\r\n\r\noops"}, "", `status 500: "oops"`},
		{"an empty 200", []string{"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"}, "", "empty body"},
		{"malformed", []string{"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n"}, "", "malformed"},
		{"connection lost mid-body", []string{"!HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nok"}, "", "unexpected EOF"},
		{"a new connection no response", []string{"!"}, "", "connection closed before a response"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base, reqs := serveCanned(t, tc.responses)
			c, err := newRawClient(base, "/v1/chat/completions", []byte(`{"a":1}`), [2]string{"Authorization", "Bearer k"})
			if err != nil {
				t.Fatal(err)
			}
			defer c.close()
			c.cache = tc.cache
			var resp rawResponse
			err = c.do(&resp)
			if got := <-reqs; string(got) != `{"a":1}` {
				t.Errorf("the server read the body %q", got)
			}
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("unexpected error %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("got error %v, want one saying %q", err, tc.wantErr)
			}
		})
	}
}

// TestRawClientKeepAlive: requests reuse one connection, a response with
// Connection: close takes the next request to a new one, and a kept
// connection the server hung up on while idle is retried once, on a new
// one.
func TestRawClientKeepAlive(t *testing.T) {
	const ok = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
	closing := "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok"
	// 1st connection: two requests, the second answered with close; 2nd:
	// one answer, then the server hangs up while it idles; 3rd: the
	// retried request.
	base, reqs := serveCanned(t, []string{ok, closing, "!" + ok, ok})
	c, err := newRawClient(base, "/p", []byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	for i := range 4 {
		var resp rawResponse
		if err := c.do(&resp); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		<-reqs
	}
	if c.dialled != 3 || len(c.open) != 1 {
		t.Fatalf("%d connections dialled, %d open, want 3 and 1", c.dialled, len(c.open))
	}
}

// TestRawClientRequestIsNetHTTPs: the prepared request is the bytes
// net/http's client writes for the same request, so the server side of
// the benchmark does the same work with either client.
func TestRawClientRequestIsNetHTTPs(t *testing.T) {
	capture := func(send func(base string)) []byte {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		got := make(chan []byte, 1)
		go func() {
			c, err := ln.Accept()
			if err != nil {
				got <- nil
				return
			}
			defer c.Close()
			br := bufio.NewReader(c)
			var head bytes.Buffer
			for {
				line, err := br.ReadString('\n')
				head.WriteString(line)
				if err != nil || line == "\r\n" {
					break
				}
			}
			body := make([]byte, 7)
			_, _ = io.ReadFull(br, body)
			head.Write(body)
			_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
			got <- head.Bytes()
		}()
		addr := ln.Addr().String()
		send("http://" + addr)
		return bytes.Replace(<-got, []byte("Host: "+addr+"\r\n"), []byte("Host: HOST\r\n"), 1) // each capture has its own port
	}
	body := []byte(`{"a":1}`)
	fromGo := capture(func(base string) {
		req, _ := http.NewRequest(http.MethodPost, base+"/v1/chat/completions", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer k")
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Gatehouse-Cache-Ttl", "0")
		tr := &http.Transport{}
		defer tr.CloseIdleConnections()
		resp, err := (&http.Client{Transport: tr}).Do(req)
		if err != nil {
			t.Error(err)
			return
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	})
	fromRaw := capture(func(base string) {
		c, err := newRawClient(base, "/v1/chat/completions", body,
			[2]string{"Authorization", "Bearer k"}, [2]string{"Content-Type", "application/json"}, [2]string{"X-Gatehouse-Cache-Ttl", "0"})
		if err != nil {
			t.Error(err)
			return
		}
		defer c.close()
		var resp rawResponse
		if err := c.do(&resp); err != nil {
			t.Error(err)
		}
	})
	if !bytes.Equal(fromGo, fromRaw) {
		t.Fatalf("net/http wrote\n%q\nthe raw client\n%q", fromGo, fromRaw)
	}
}

func TestNewRawClientRefuses(t *testing.T) {
	for _, tc := range []struct {
		base    string
		headers [][2]string
	}{
		{"https://127.0.0.1:1", nil},
		{"http://", nil},
		{"http://127.0.0.1:1/v1", nil},
		{"http://127.0.0.1:1", [][2]string{{"Content-Type", "a"}, {"Authorization", "b"}}},
	} {
		if _, err := newRawClient(tc.base, "/p", nil, tc.headers...); err == nil {
			t.Errorf("newRawClient(%q, %v) accepted", tc.base, tc.headers)
		}
	}
}

// FuzzReadResponse: whatever the bytes, readResponse returns (no panic,
// no loop), and what it accepts it read from the input: no more body than
// there was input, and a status it could only have read from a status
// line.
func FuzzReadResponse(f *testing.F) {
	f.Add("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello")
	f.Add("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nX-Gatehouse-Cache: hit\r\n\r\n5;a=b\r\nhello\r\n0\r\nX-T: 1\r\n\r\n")
	f.Add("HTTP/1.1 429 Too Many Requests\r\nConnection: close\r\nContent-Length: 2\r\n\r\nno")
	f.Fuzz(func(t *testing.T, in string) {
		var resp rawResponse
		err := readResponse(bufio.NewReaderSize(strings.NewReader(in), rawReadBuffer), &resp)
		if err != nil {
			return
		}
		if resp.bodyLen > int64(len(in)) {
			t.Fatalf("a body of %d bytes from %d bytes of input", resp.bodyLen, len(in))
		}
		if resp.status < 200 || resp.status > 999 || !strings.HasPrefix(in, "HTTP/1.1 ") {
			t.Fatalf("accepted status %d from %q", resp.status, in)
		}
	})
}

// BenchmarkReadResponse reads a response with the head a limited key's
// answer has (the x-ratelimit, budget and cost lines among gatehouse's
// own), the client's share of every request BenchmarkRequestPath counts.
func BenchmarkReadResponse(b *testing.B) {
	const head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Gatehouse-Request-Id: 0b3f6c2a9d1e4f78\r\n" +
		"X-Gatehouse-Provider: mock\r\nX-Gatehouse-Model: chat\r\nX-Gatehouse-Budget-Remaining-Usd: 999999999.999812\r\n" +
		"X-Ratelimit-Limit-Requests: 100000000\r\nX-Ratelimit-Remaining-Requests: 99999999\r\nX-Ratelimit-Reset-Requests: 1ms\r\n" +
		"X-Ratelimit-Limit-Tokens: 1000000000000\r\nX-Ratelimit-Remaining-Tokens: 999999999900\r\nX-Ratelimit-Reset-Tokens: 1ms\r\n" +
		"X-Gatehouse-Cost-Usd: 0.000094\r\nX-Gatehouse-Overhead-Ms: 0.051\r\nDate: Sat, 28 Nov 2026 15:00:00 GMT\r\nContent-Length: 600\r\n\r\n"
	one := head + strings.Repeat("x", 600)
	// "read" reads gatehouse's x- fields, as a warm-up request does;
	// "skip" leaves them, as a timed one does.
	for _, skip := range []bool{false, true} {
		name := map[bool]string{false: "read", true: "skip"}[skip]
		b.Run(name, func(b *testing.B) {
			in := strings.NewReader(one)
			br := bufio.NewReaderSize(in, rawReadBuffer)
			resp := rawResponse{skipGatehouse: skip}
			for b.Loop() {
				in.Reset(one)
				br.Reset(in)
				if err := readResponse(br, &resp); err != nil || resp.rateLimit == skip || resp.bodyLen != 600 {
					b.Fatalf("%v %+v", err, resp)
				}
			}
		})
	}
}
